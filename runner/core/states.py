"""The seven states of a run and which of them end it; the four of a write's operation."""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    """Where a run is. `plan`, `call` and `observe` loop; the other four end the run."""

    PLAN = "plan"
    """Ask the model what to do next."""
    CALL = "call"
    """Admit, validate, authorize and dispatch the proposed tool calls."""
    OBSERVE = "observe"
    """Classify an outcome and apply the policy's decision."""
    COMPLETE = "complete"
    """The model answered from its evidence."""
    ABSTAIN = "abstain"
    """A bound was spent or the evidence cannot answer; a partial answer is returned."""
    ESCALATE = "escalate"
    """A person is needed (access denied, approval missing)."""
    UNKNOWN = "unknown"
    """A write's outcome cannot be determined; its operation key is handed over."""


TERMINAL: frozenset[State] = frozenset(
    {State.COMPLETE, State.ABSTAIN, State.ESCALATE, State.UNKNOWN}
)


class OperationStatus(StrEnum):
    """Where a write's operation is: `pending` (its intent recorded before dispatch), then
    `committed`, `failed` or `unknown` (reconciled by its key before anything else happens)."""

    PENDING = "pending"
    COMMITTED = "committed"
    FAILED = "failed"
    UNKNOWN = "unknown"
