"""A `RunLog` that appends every event to a JSONL transition log (`runner run --log FILE`).

Each line is flushed as it is written, so a killed process leaves a log that ends at a whole line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from ..errors import StoreError
from ..recording import RecordedOutput, RecordedTurn
from ..trace import (
    RunHeader,
    RunSummary,
    TransitionRecord,
    finished_line,
    output_line,
    started_line,
    transition_line,
    turn_line,
)


class JsonlLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._file: TextIO = path.open("a", encoding="utf-8")
        except OSError as exc:
            raise StoreError(f"cannot open log {path}: {exc.strerror}") from exc

    def _write(self, line: str) -> None:
        try:
            self._file.write(line + "\n")
            self._file.flush()
        except OSError as exc:
            raise StoreError(f"cannot write log {self.path}: {exc.strerror}") from exc

    def begin_run(self, header: RunHeader) -> None:
        self._write(started_line(header))

    def append(self, record: TransitionRecord) -> None:
        self._write(transition_line(record))

    def record_turn(self, turn: RecordedTurn) -> None:
        self._write(turn_line(turn))

    def record_output(self, output: RecordedOutput) -> None:
        self._write(output_line(output))

    def end_run(self, summary: RunSummary) -> None:
        self._write(finished_line(summary))

    def close(self) -> None:
        self._file.close()
