"""A `RunLog` that appends every event to a JSONL transition log (`runner run --log FILE`).

Each line is flushed as it is written, so a killed process leaves a log that ends at a whole line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ..base._jsonsafe import clean_text
from ..base.errors import StoreError
from ..record.recording import Recorded, RecordedTurn
from ..record.trace import (
    RunHeader,
    RunSummary,
    TransitionRecord,
    finished_line,
    output_line,
    started_line,
    transition_line,
    turn_line,
)


def _readable(line: str) -> str:
    """`line` with every lone surrogate replaced by U+FFFD (escaped pairs are kept)."""
    plain = clean_text(json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False))
    return json.dumps(json.loads(plain), sort_keys=True)


class JsonlLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._file: TextIO = path.open("a", encoding="utf-8")
        except OSError as exc:
            raise StoreError(f"cannot open log {path}: {exc.strerror}") from exc
        self._failed = False
        """A write failed (and raised): closing may only fail the same way again."""

    def _write(self, line: str) -> None:
        if "\\ud" in line:  # maybe an escaped lone surrogate, which no JSON reader need accept
            line = "\n".join(_readable(part) for part in line.split("\n"))
        try:
            self._file.write(line + "\n")
            self._file.flush()
        except OSError as exc:
            self._failed = True
            raise StoreError(f"cannot write log {self.path}: {exc.strerror}") from exc

    def begin_run(self, header: RunHeader) -> None:
        self._write(started_line(header))

    def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None:
        lines = [
            turn_line(item) if isinstance(item, RecordedTurn) else output_line(item)
            for item in inputs
        ]
        lines.append(transition_line(record))
        self._write("\n".join(lines))

    def append_inputs(self, run_id: str, inputs: Sequence[Recorded]) -> None:
        """Inputs before their transition (`base.InputsAlone`): their lines, no transition line
        after them yet (a reader collects a run's inputs whatever line follows them)."""
        if inputs:
            self._write(
                "\n".join(
                    turn_line(item) if isinstance(item, RecordedTurn) else output_line(item)
                    for item in inputs
                )
            )

    def end_run(self, summary: RunSummary) -> None:
        self._write(finished_line(summary))

    def close(self) -> None:
        try:
            self._file.close()  # flushes what a failed write left buffered: it fails the same way
        except OSError as exc:
            if not self._failed:  # a failed write was reported already; anything else is news
                raise StoreError(f"cannot write log {self.path}: {exc.strerror}") from exc
