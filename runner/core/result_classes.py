"""Every result class and its facts, in one place.

A result class is the `kind` of an observation (see `observations.py`). What the runner may do
with each (the decisions a policy may give it, its default, whether the runner may retry it,
whether it settles the call or the write, whether only a dispatched call can come to it, how the
model is shown it) is written here once; the policy, the decision, the engine, the renderer and
grading read it from here. `_facts` matches the `ResultClass` literal exhaustively, so a class
added to the literal without its facts fails `mypy` (and the import).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, assert_never, get_args

from .machine import Decision
from .observations import ResultClass
from .states import OperationStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassFacts:
    """What is true of every observation of one result class."""

    default: Decision | None
    """The default policy's decision (None: not a tool outcome, never decided on)."""
    allowed: frozenset[Decision]
    """The decisions any policy may give it."""
    rule: str
    """The safety rule behind `allowed`, quoted when a policy breaks it."""
    retryable: bool = False
    """The runner may send the same call again (bounded by the policy)."""
    settles_call: bool = False
    """The same call again would bring no new information: a repeat of it is refused."""
    write_status: OperationStatus | None = None
    """What it makes of the call's write, if it has one: None leaves the write open (a lookup,
    or the run's end, settles it)."""
    dispatched: bool = False
    """Only a dispatched call can come to it (grading counts it as a dispatch)."""
    shown_as_result: bool = False
    """The model is shown the tool's result (and it is evidence), not a typed error."""


_TO_PLAN: Final = frozenset({Decision.CONTINUE, Decision.BACK_TO_MODEL})
_STOP: Final = frozenset({Decision.ABSTAIN, Decision.ESCALATE})
_HAND_BACK: Final = frozenset({Decision.BACK_TO_MODEL}) | _STOP
_RETRYABLE: Final = frozenset({Decision.RETRY}) | _HAND_BACK


def _facts(kind: ResultClass) -> ClassFacts:
    match kind:
        case "ok":
            return ClassFacts(
                default=Decision.CONTINUE,
                allowed=_TO_PLAN,
                rule="a success is final: never retried nor reconciled",
                settles_call=True,
                write_status=OperationStatus.COMMITTED,
                dispatched=True,
                shown_as_result=True,
            )
        case "empty":
            return ClassFacts(
                default=Decision.CONTINUE,
                allowed=_TO_PLAN,
                rule="an empty result is an answer: never retried nor reconciled",
                settles_call=True,
                write_status=OperationStatus.COMMITTED,
                dispatched=True,
                shown_as_result=True,
            )
        case "invalid_arguments":
            return ClassFacts(
                default=Decision.BACK_TO_MODEL,
                allowed=_HAND_BACK,
                rule="invalid arguments go back to the model for correction, never re-sent as is",
                write_status=OperationStatus.FAILED,
            )
        case "rate_limited":
            return ClassFacts(
                default=Decision.RETRY,
                allowed=_RETRYABLE,
                rule="a rate limit is retried (bounded) or handed back; nothing to reconcile",
                retryable=True,
                write_status=OperationStatus.FAILED,
                dispatched=True,
            )
        case "transient":
            return ClassFacts(
                default=Decision.RETRY,
                allowed=_RETRYABLE,
                rule="a transient failure is retried (bounded) or handed back; nothing to "
                "reconcile",
                retryable=True,
                write_status=OperationStatus.FAILED,
                dispatched=True,
            )
        case "access_denied":
            return ClassFacts(
                default=Decision.ESCALATE,
                allowed=_STOP,
                rule="access denied is never retried, reconciled or handed back: escalate or "
                "abstain",
                write_status=OperationStatus.FAILED,
            )
        case "permanent":
            return ClassFacts(
                default=Decision.BACK_TO_MODEL,
                allowed=_HAND_BACK,
                rule="a permanent failure is never retried: the same call fails",
                settles_call=True,
                write_status=OperationStatus.FAILED,
            )
        case "malformed_result":
            return ClassFacts(
                default=Decision.BACK_TO_MODEL,
                allowed=_HAND_BACK,
                rule="a malformed result is never retried nor reconciled",
                settles_call=True,
                write_status=OperationStatus.FAILED,
                dispatched=True,
            )
        case "unknown_tool":
            return ClassFacts(
                default=Decision.BACK_TO_MODEL,
                allowed=_HAND_BACK,
                rule="a call to an unknown tool is never retried",
                write_status=OperationStatus.FAILED,
            )
        case "unknown_outcome":
            return ClassFacts(
                default=Decision.RECONCILE,
                allowed=frozenset({Decision.RECONCILE, Decision.UNKNOWN}),
                rule="an unknown write outcome is reconciled by its key before anything else, "
                "or ends unknown",
                dispatched=True,
            )
        case "not_applied":
            return ClassFacts(
                default=Decision.RETRY,
                allowed=_RETRYABLE,
                rule="a write proven not applied may be re-sent under its key, never looked up "
                "again",
                retryable=True,
                write_status=OperationStatus.FAILED,
                dispatched=True,
            )
        case "repeat_refused":
            return ClassFacts(
                default=Decision.BACK_TO_MODEL,
                allowed=_HAND_BACK,
                rule="a refused repeat is never re-sent",
                write_status=OperationStatus.FAILED,
            )
        case "budget_exhausted":
            return ClassFacts(
                default=Decision.FINAL_ANSWER,
                allowed=frozenset({Decision.FINAL_ANSWER, Decision.ABSTAIN}),
                rule="a spent budget allows only the final tool-free answer or abstain",
            )
        case "approval_required":
            return ClassFacts(
                default=Decision.ESCALATE,
                allowed=_STOP,
                rule="a write that needs approval waits for a person: escalate or abstain, never "
                "sent on the model's word",
                write_status=OperationStatus.FAILED,
            )
        case "approval_denied":
            return ClassFacts(
                default=Decision.ABSTAIN,
                allowed=_STOP,
                rule="a denied write is never sent: abstain or escalate",
                write_status=OperationStatus.FAILED,
            )
        case "model_final":
            return ClassFacts(
                default=None,
                allowed=frozenset(),
                rule="the model's final answer is not a tool outcome",
            )
        case unreachable:
            assert_never(unreachable)


CLASSES: Final[dict[ResultClass, ClassFacts]] = {
    kind: _facts(kind) for kind in get_args(ResultClass)
}
"""Every result class, in the literal's order, with its facts."""

DISPATCHED: Final = frozenset(kind for kind, facts in CLASSES.items() if facts.dispatched)
"""Classes only a dispatched call can come to (for grading records, which carry the name)."""

COMMITS_WRITE: Final = frozenset(
    kind for kind, facts in CLASSES.items() if facts.write_status is OperationStatus.COMMITTED
)
"""Classes that settle a write as committed."""

LEAVES_WRITE_OPEN: Final = frozenset(
    kind for kind, facts in CLASSES.items() if facts.write_status is None and facts.default
)
"""Tool classes that leave a write's outcome open: a lookup (or nothing) must settle it."""
