"""A store that also copies every write to extra run logs (e.g. SQLite plus a JSONL log).

Inputs stored before their transition (`append_inputs`) go to each log that takes them alone;
a log that does not gets them with the run's next transition (`_early.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.states import OperationStatus
from ..record.operations import Operation
from ..record.recording import Recorded, RecordedOutput, RecordedTurn
from ..record.trace import RunHeader, RunSummary, TransitionRecord
from ._early import HeldInputs, pass_on
from .base import RunListing, RunLog, Store, UnreadableRun


class FanoutStore:
    """Reads and operations go to `primary`; run-log writes go to it and then to each sink."""

    def __init__(self, primary: Store, *sinks: RunLog) -> None:
        self.primary = primary
        self.sinks = sinks
        self._logs: tuple[RunLog, ...] = (primary, *sinks)
        self._early = tuple(HeldInputs() for _ in self._logs)
        """Per log, the inputs it could not take alone (see `append_inputs`)."""

    def begin_run(self, header: RunHeader) -> None:
        for log in self._logs:
            log.begin_run(header)

    def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None:
        for log, early in zip(self._logs, self._early, strict=True):
            log.append(record, early.ahead(record.run_id, inputs) if early.runs else inputs)

    def append_inputs(self, run_id: str, inputs: Sequence[Recorded]) -> None:
        for log, early in zip(self._logs, self._early, strict=True):
            pass_on(log, early, run_id, inputs)

    def end_run(self, summary: RunSummary) -> None:
        for log in self._logs:
            log.end_run(summary)

    def close(self) -> None:
        for log in self._logs:
            log.close()

    def header(self, run_id: str) -> RunHeader | None:
        return self.primary.header(run_id)

    def summary(self, run_id: str) -> RunSummary | None:
        return self.primary.summary(run_id)

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        return self.primary.transitions(run_id)

    def transitions_after(self, run_id: str, after: int, limit: int) -> list[TransitionRecord]:
        return self.primary.transitions_after(run_id, after, limit)

    def turns(self, run_id: str) -> list[RecordedTurn]:
        return self.primary.turns(run_id)

    def outputs(self, run_id: str) -> list[RecordedOutput]:
        return self.primary.outputs(run_id)

    def runs(self) -> list[RunListing | UnreadableRun]:
        return self.primary.runs()

    def claim(self, operation: Operation) -> Operation:
        return self.primary.claim(operation)

    def settle(
        self, key: str, status: OperationStatus, result: dict[str, Any] | None = None
    ) -> None:
        self.primary.settle(key, status, result)

    def operations(self, run_id: str) -> list[Operation]:
        return self.primary.operations(run_id)
