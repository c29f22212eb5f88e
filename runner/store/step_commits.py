"""`durability="step"`: a run's transitions committed a step at a time, not one by one.

`StepCommits` wraps the engine's store. The appends of a run it holds (`hold(run_id)`) are kept
in memory and written together, in one transaction where the store can (`append_all`), when:
- the step ends: a transition into `plan` (the next model request) or a terminal state;
- anything else is written for that run: an intent claimed (so a write's intent, with its
  operation key, is committed before the write is dispatched), an outcome settled, the summary;
- anything of that run is read, and when the run is released or the store closed.
The rule no mode relaxes holds: every write's intent is durable before its dispatch and its
outcome before anything depends on it (the next model request, the next claim). A crash loses
at most the held transitions of the step in flight, which resume re-drives as it would a crash
between two commits. Appends of runs it does not hold pass straight through.

Inputs taken in before their transition (`append_inputs`: a parallel batch's outcome that came
back while the run waits on an earlier call) are held with the step as well, and committed with
the step's next transition: step mode trades the transitions of the step in flight for fewer
commits, and those inputs go with them (a crash may then cost such a call one dispatch more, as
before inputs could be stored alone). A run not held passes them straight on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ..core.states import TERMINAL, OperationStatus, State
from ..record.operations import Operation
from ..record.recording import Recorded, RecordedOutput, RecordedTurn
from ..record.trace import RunHeader, RunSummary, TransitionRecord
from ._early import HeldInputs, pass_on
from .base import RunListing, RunLog, Store, UnreadableRun

Entry = tuple[TransitionRecord, Sequence[Recorded]]

STEP_ENDS: Final = frozenset({State.PLAN, *TERMINAL})
"""A transition into one of these ends a step: what the step held is committed with it."""


def append_all(log: RunLog, entries: Sequence[Entry]) -> None:
    """`entries` in one write where `log` offers `append_all` (SQLite), else one by one."""
    batch = getattr(log, "append_all", None)
    if batch is not None:
        batch(entries)
        return
    for record, inputs in entries:
        log.append(record, inputs)


class StepCommits:
    """A store whose held runs commit their transitions a step at a time (see the module)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self._held: dict[str, list[Entry]] = {}
        self._early = HeldInputs()
        """Inputs of a held run (or for an inner log that takes none alone) until its next
        transition."""
        self._early_runs = self._early.runs  # read on every append: one attribute, not two

    def hold(self, run_id: str) -> None:
        """Commit `run_id`'s transitions a step at a time from now on."""
        self._held.setdefault(run_id, [])

    def release(self, run_id: str) -> None:
        """Commit what `run_id` holds, and pass its appends straight through from now on (inputs
        held without their transition, from a run cut short, go to a log that takes them)."""
        self.flush(run_id)
        self._held.pop(run_id, None)
        early = self._early.runs.pop(run_id, None)
        take = getattr(self.inner, "append_inputs", None)
        if early and take is not None:
            take(run_id, early)

    def flush(self, run_id: str) -> None:
        """Commit what `run_id` holds (nothing to do for a run not held)."""
        entries = self._held.get(run_id)
        if entries:
            self._held[run_id] = []
            append_all(self.inner, entries)

    # -- run log --------------------------------------------------------------------------------

    def begin_run(self, header: RunHeader) -> None:
        self.inner.begin_run(header)

    def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None:
        if self._early_runs:  # inputs that came before this transition (see append_inputs)
            inputs = self._early.ahead(record.run_id, inputs)
        entries = self._held.get(record.run_id)
        if entries is None:
            self.inner.append(record, inputs)
            return
        entries.append((record, inputs))
        if record.to_state in STEP_ENDS:
            self.flush(record.run_id)

    def append_inputs(self, run_id: str, inputs: Sequence[Recorded]) -> None:
        """Held with the step when `run_id` is held (see the module); else passed on."""
        if run_id in self._held:
            self._early.hold(run_id, inputs)
        else:
            pass_on(self.inner, self._early, run_id, inputs)

    def end_run(self, summary: RunSummary) -> None:
        self.flush(summary.run_id)
        self.inner.end_run(summary)

    def close(self) -> None:
        for run_id in list(self._held):
            self.flush(run_id)
        self.inner.close()

    # -- reads: what a held run wrote is committed before it is read ----------------------------

    def header(self, run_id: str) -> RunHeader | None:
        return self.inner.header(run_id)

    def summary(self, run_id: str) -> RunSummary | None:
        return self.inner.summary(run_id)

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        self.flush(run_id)
        return self.inner.transitions(run_id)

    def transitions_after(self, run_id: str, after: int, limit: int) -> list[TransitionRecord]:
        self.flush(run_id)
        return self.inner.transitions_after(run_id, after, limit)

    def turns(self, run_id: str) -> list[RecordedTurn]:
        self.flush(run_id)
        return self.inner.turns(run_id)

    def outputs(self, run_id: str) -> list[RecordedOutput]:
        self.flush(run_id)
        return self.inner.outputs(run_id)

    def runs(self) -> list[RunListing | UnreadableRun]:
        return self.inner.runs()

    # -- operations: the intent and the outcome are never held ----------------------------------

    def claim(self, operation: Operation) -> Operation:
        self.flush(operation.run_id)
        return self.inner.claim(operation)

    def settle(
        self, key: str, status: OperationStatus, result: dict[str, Any] | None = None
    ) -> None:
        for run_id in list(self._held):  # the key names no run: commit every held run first
            self.flush(run_id)
        self.inner.settle(key, status, result)

    def operations(self, run_id: str) -> list[Operation]:
        self.flush(run_id)
        return self.inner.operations(run_id)
