"""The `Store` protocol every backend implements (memory, JSONL, and SQLite/PostgreSQL to come).

Contract: `begin_run` once, then `append` for each transition in `seq` order, then `end_run` once.
A store raises `StoreError` when it cannot keep a write; it never drops one silently.
"""

from __future__ import annotations

from typing import Protocol

from ..trace import RunHeader, RunSummary, TransitionRecord


class Store(Protocol):
    def begin_run(self, header: RunHeader) -> None:
        """Record that a run started."""
        ...

    def append(self, record: TransitionRecord) -> None:
        """Record one transition, durably for persistent stores."""
        ...

    def end_run(self, summary: RunSummary) -> None:
        """Record the run's one terminal summary."""
        ...

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        """Every transition of a run, in `seq` order."""
        ...

    def close(self) -> None:
        """Release files and connections."""
        ...
