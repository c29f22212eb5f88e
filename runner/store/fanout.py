"""Write every event to several stores (e.g. memory for the CLI's report plus a JSONL log)."""

from __future__ import annotations

from ..trace import RunHeader, RunSummary, TransitionRecord
from .base import Store


class FanoutStore:
    """Writes to every store in order; reads from the first."""

    def __init__(self, first: Store, *rest: Store) -> None:
        self.stores: tuple[Store, ...] = (first, *rest)

    def begin_run(self, header: RunHeader) -> None:
        for store in self.stores:
            store.begin_run(header)

    def append(self, record: TransitionRecord) -> None:
        for store in self.stores:
            store.append(record)

    def end_run(self, summary: RunSummary) -> None:
        for store in self.stores:
            store.end_run(summary)

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        return self.stores[0].transitions(run_id)

    def close(self) -> None:
        for store in self.stores:
            store.close()
