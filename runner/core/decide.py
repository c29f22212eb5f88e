"""The one decision: policy + observation + the run's facts -> a verdict the engine carries out.

Every observation goes through `decide`: a tool call's (right after its outcome is classified),
a model request's that failed, and what `plan` comes to (a reply, no reply, a spent bound, a
cancel: rules in `_plan_rules.py`). The engine records the verdict and carries it out; nothing
else overrides it, and every move into a terminal state carries one. Pure: it reads no clock and
touches no store; the only source it draws from is the run's injected RNG, and only for the
jitter of a retry it grants. The rules for a tool call's observation, on top of the policy's
table:

- a second invalid-argument call to the same tool (past `corrections_per_tool`) abstains;
- retries are bounded per call, never happen once another call of the batch has ended the run,
  and never re-send a write whose destination does not suppress duplicates;
- an unknown write outcome is looked up once by key; inconclusive after that means `unknown`; a
  table that says to retry it on a write that may not be re-sent gets the lookup instead;
- a retry whose wait would outlast the deadline, or that a spent bound forbids, is not made: the
  call is answered `budget_exhausted` (final answer); a lookup a spent bound forbids leaves the
  write `unknown`; a spent bound on a write that was never looked up is `unknown`, not a partial
  answer;
- the batch follows its strongest decision; at its end, a write of this run whose outcome is
  still open makes it `unknown` whatever the policy said (the last guard before `plan`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from typing import Final, assert_never, overload

from ._plan_rules import PlanFacts, RequestFacts, decide_plan, decide_request
from .budget import Bound
from .machine import DECISION_TRIGGER, Decision, Trigger
from .observations import (
    AccessDenied,
    ApprovalDenied,
    ApprovalRequired,
    ArgumentsRejected,
    BudgetExhausted,
    OutcomeUnknown,
    PlanObservation,
    RepeatRefused,
    RequestFailure,
    ResultMalformed,
    ToolFailedPermanently,
    ToolFailedTransiently,
    ToolFoundNothing,
    ToolObservation,
    ToolRateLimited,
    ToolSucceeded,
    ToolUnknown,
    WriteNotApplied,
    malformed_reason,
)
from .policy import Policy, retry_delay
from .verdicts import Ending, Move, PlanVerdict, RequestVerdict

__all__ = [
    "ENDING",
    "Batch",
    "Exit",
    "Facts",
    "PlanFacts",
    "RequestFacts",
    "Verdict",
    "decide",
    "why",
]

ENDING: Final = frozenset({Decision.ABSTAIN, Decision.ESCALATE, Decision.UNKNOWN})

# When several calls in one batch decide differently, the run follows the strongest.
_PRECEDENCE: Final[dict[Decision, int]] = {
    Decision.CONTINUE: 0,
    Decision.BACK_TO_MODEL: 1,
    Decision.FINAL_ANSWER: 2,
    Decision.ABSTAIN: 3,
    Decision.ESCALATE: 4,
    Decision.UNKNOWN: 5,
    # Never a batch's standing: the call goes back to `call` before the batch moves on.
    Decision.RETRY: -1,
    Decision.RECONCILE: -1,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """Where the batch in flight stands: its strongest decision so far, and why."""

    decision: Decision = Decision.CONTINUE
    reason: str | None = None
    """The result class (or spent bound) that decided it."""
    key: str | None = None
    """The operation key of the call that decided it (handed over when it is `unknown`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    """What the decision needs to know about the run, gathered by the engine before it asks."""

    call_id: str
    tool: str
    retries: int
    """Retries of this call already made."""
    corrections: int
    """Invalid-argument calls to this tool handed back in a row before this one."""
    resend_unsafe: bool
    """The call is a write whose destination does not suppress duplicates."""
    can_look_up: bool
    """The call's write can be looked up by key (it has a lookup, not yet made)."""
    operation_key: str | None
    looked_up: bool
    """A lookup by key has been made for this write since it was last sent."""
    blocked: Bound | None
    """A bound that forbids another dispatch now."""
    now: float
    """Monotonic seconds now."""
    deadline: float
    """Monotonic seconds at the deadline."""
    wall: datetime
    """Wall time now (a Retry-After date is read against it)."""
    tripped: Bound | None
    """The bound the run has already found spent."""
    batch: Batch
    last: bool
    """This is the last outstanding call of the batch."""
    unsettled: str | None = None
    """When `last`: the key of a write of this run whose outcome is still open."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Exit:
    """How the batch leaves `observe` (set on the verdict of its last call)."""

    move: Move
    """Back to the model (`resume`), or the move that ends the run (with its `Ending`)."""
    unsettled: str | None
    """A write found still open at the end of the batch (the engine marks it `unknown`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The decision on one observation, and everything the engine needs to carry it out."""

    decision: Decision
    reason: str | None
    """Short and secret-free, recorded with the decision."""
    wait: float | None = None
    """Seconds to sleep before the retry (retries only)."""
    shown: ToolObservation
    """What the model is shown for the call (the observation, or why it was not retried)."""
    tripped: Bound | None
    """The bound the run has found spent, after this observation."""
    batch: Batch
    """The batch with this decision folded in."""
    exit: Exit | None = None
    """Set when this was the batch's last call and the batch moves on."""
    then: Trigger
    """How `observe` carries it out: `retry`, `reconcile`, `next_call`, or the exit's move."""

    @property
    def leaves_unknown(self) -> bool:
        """The call's write, if it has one, is marked `unknown`."""
        return self.decision is Decision.UNKNOWN


def why(observation: ToolObservation) -> str | None:
    """A short, secret-free reason for the log where the class alone does not say enough."""
    if type(observation) in _SAY_NOTHING:  # the usual outcome, without walking the cases
        return None
    match observation:
        case ArgumentsRejected(field=field, reason=reason):
            return f"{field}: {reason}" if field else reason
        case AccessDenied(source=source):
            return f"denied by {source}"
        case BudgetExhausted(bound=bound):
            return bound.value
        case ToolFailedPermanently(reason=reason) | ToolFailedTransiently(reason=reason):
            return reason
        case OutcomeUnknown(reason=reason):
            return reason
        case ResultMalformed(errors=errors):
            return malformed_reason(errors)
        case RepeatRefused(first_call_id=first, first_kind=kind, in_same_reply=same_reply):
            return f"duplicate of {first} in the same reply ({kind})" if same_reply else None
        case ApprovalRequired(reasons=reasons):
            return "needs approval: " + ", ".join(reasons)
        case ApprovalDenied(approver=approver):
            return f"denied by {approver}"
        case (
            ToolSucceeded()
            | ToolFoundNothing()
            | ToolRateLimited()
            | ToolUnknown()
            | WriteNotApplied()
        ):
            return None
        case unreachable:
            assert_never(unreachable)


_SAY_NOTHING: Final = frozenset(
    {ToolSucceeded, ToolFoundNothing, ToolRateLimited, ToolUnknown, WriteNotApplied}
)
"""The observations whose class says it all (`why` is None for them)."""


def _by_rules(policy: Policy, observation: ToolObservation, facts: Facts) -> Decision:
    """The table's decision, bounded by the run rules (no bound or clock consulted yet)."""
    kind = observation.kind
    decision = policy.decision_for(kind)
    if kind == "invalid_arguments" and facts.corrections + 1 > policy.corrections_per_tool:
        return Decision.ABSTAIN
    if kind == "unknown_outcome" and decision is Decision.RETRY and facts.resend_unsafe:
        decision = Decision.RECONCILE  # a write that may not be re-sent is looked up instead
    if decision is Decision.RECONCILE and not facts.can_look_up:
        return Decision.UNKNOWN
    if decision is Decision.RETRY:
        if facts.retries >= policy.max_retries or facts.batch.decision in ENDING:
            return Decision.UNKNOWN if kind == "unknown_outcome" else Decision.BACK_TO_MODEL
        if facts.resend_unsafe:
            return Decision.BACK_TO_MODEL  # never re-send a write the destination may duplicate
    return decision


@overload
def decide(
    policy: Policy, observation: ToolObservation, facts: Facts, rng: random.Random
) -> Verdict: ...
@overload
def decide(
    policy: Policy, observation: RequestFailure, facts: RequestFacts, rng: random.Random
) -> RequestVerdict: ...
@overload
def decide(
    policy: Policy, observation: PlanObservation, facts: PlanFacts, rng: random.Random
) -> PlanVerdict: ...
def decide(
    policy: Policy,
    observation: ToolObservation | RequestFailure | PlanObservation,
    facts: Facts | RequestFacts | PlanFacts,
    rng: random.Random,
) -> Verdict | RequestVerdict | PlanVerdict:
    """The one decision: what `observation` comes to, given the run's `facts`."""
    if type(facts) is Facts:  # the usual case, asked first: a tool call's outcome
        return _decide_tool(policy, observation, facts, rng)  # type: ignore[arg-type]
    if type(facts) is RequestFacts:
        return decide_request(policy, observation, facts, rng)  # type: ignore[arg-type]
    assert type(facts) is PlanFacts, facts
    return decide_plan(observation, facts)  # type: ignore[arg-type]


def _decide_tool(
    policy: Policy, observation: ToolObservation, facts: Facts, rng: random.Random
) -> Verdict:
    """The decision on a tool call's observation."""
    decision = _by_rules(policy, observation, facts)
    shown, tripped = observation, facts.tripped
    if decision is Decision.RETRY:
        wait = retry_delay(policy, observation, facts.retries + 1, rng, facts.wall)
        blocked = facts.blocked
        if blocked is None and facts.now + wait >= facts.deadline:
            blocked = Bound.DEADLINE  # the wait would outlast the deadline: never retry early
        if blocked is None:
            verdict = Verdict(
                decision=decision,
                reason=why(observation),
                wait=wait,
                shown=observation,
                tripped=tripped,
                batch=facts.batch,
                then=Trigger.RETRY,
            )
            return verdict
        decision = Decision.FINAL_ANSWER
        shown = BudgetExhausted(
            bound=blocked,
            call_id=facts.call_id,
            tool=facts.tool,
            detail=f"retry needed a wait of {wait:.3f} s; {observation.kind} not retried",
        )
    elif decision is Decision.RECONCILE:
        if facts.blocked is None:
            return Verdict(
                decision=decision,
                reason=why(observation),
                shown=observation,
                tripped=tripped,
                batch=facts.batch,
                then=Trigger.RECONCILE,
            )
        decision, tripped = Decision.UNKNOWN, facts.blocked
        shown = OutcomeUnknown(
            call_id=facts.call_id,
            tool=facts.tool,
            reason=f"not reconciled: the {facts.blocked.value} budget is spent",
        )
    if isinstance(shown, BudgetExhausted):
        tripped = tripped or shown.bound
        if facts.operation_key is not None and not facts.looked_up:
            decision = Decision.UNKNOWN  # a write we cannot look up is not a partial answer
    batch = facts.batch
    if _PRECEDENCE[decision] > _PRECEDENCE[batch.decision]:
        reason = shown.bound.value if isinstance(shown, BudgetExhausted) else shown.kind
        batch = Batch(decision=decision, reason=reason, key=facts.operation_key)
    exit_ = _exit(batch, facts.unsettled, tripped) if facts.last else None
    return Verdict(
        decision=decision,
        reason=why(shown),
        shown=shown,
        tripped=tripped,
        batch=batch,
        exit=exit_,
        then=Trigger.NEXT_CALL if exit_ is None else exit_.move.trigger,
    )


def _exit(batch: Batch, unsettled: str | None, tripped: Bound | None) -> Exit:
    """The batch's way out of `observe`: its strongest decision, or `unknown` while a write of
    this run is still open (the only way to `complete` goes through `plan`)."""
    final, reason, key = batch.decision, batch.reason, batch.key
    if final is not Decision.UNKNOWN and unsettled is not None:
        final, reason, key = Decision.UNKNOWN, "write_not_settled", unsettled
    else:
        unsettled = None
    if final not in ENDING:
        move = Move(trigger=DECISION_TRIGGER[final], decision=final)
        return Exit(move=move, unsettled=None)
    ending = reason or final.value
    if final is Decision.UNKNOWN and tripped is not None:
        ending = tripped.value  # the bound that left the write unresolved
    move = Move(
        trigger=DECISION_TRIGGER[final],
        decision=final,
        operation_key=key if final is Decision.UNKNOWN else None,
        ending=Ending(ending),
    )
    return Exit(move=move, unsettled=unsettled)
