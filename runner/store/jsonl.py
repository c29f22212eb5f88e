"""A store that appends every event to a JSONL transition log (`runner run --log FILE`).

Each line is flushed as it is written, so a killed process leaves a log that ends at a whole line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from ..errors import StoreError
from ..trace import (
    RunHeader,
    RunSummary,
    TransitionRecord,
    finished_line,
    read_log,
    started_line,
    transition_line,
)


class JsonlStore:
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

    def end_run(self, summary: RunSummary) -> None:
        self._write(finished_line(summary))

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        self._file.flush()
        for run in read_log(self.path):
            if run.header.run_id == run_id:
                return run.transitions
        return []

    def close(self) -> None:
        self._file.close()
