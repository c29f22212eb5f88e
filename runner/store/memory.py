"""An in-memory store: the default for tests and for embedding without persistence."""

from __future__ import annotations

from ..errors import StoreError
from ..trace import RunHeader, RunSummary, TransitionRecord


class MemoryStore:
    def __init__(self) -> None:
        self.headers: dict[str, RunHeader] = {}
        self.records: dict[str, list[TransitionRecord]] = {}
        self.summaries: dict[str, RunSummary] = {}

    def begin_run(self, header: RunHeader) -> None:
        if header.run_id in self.headers:
            raise StoreError(f"run {header.run_id} already exists")
        self.headers[header.run_id] = header
        self.records[header.run_id] = []

    def append(self, record: TransitionRecord) -> None:
        records = self.records.get(record.run_id)
        if records is None:
            raise StoreError(f"run {record.run_id} was never begun")
        if record.seq != len(records) + 1:
            raise StoreError(f"run {record.run_id}: seq {record.seq} after {len(records)}")
        records.append(record)

    def end_run(self, summary: RunSummary) -> None:
        if summary.run_id in self.summaries:
            raise StoreError(f"run {summary.run_id} already ended")
        self.summaries[summary.run_id] = summary

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        return list(self.records.get(run_id, []))

    def close(self) -> None:
        """Nothing to release."""
