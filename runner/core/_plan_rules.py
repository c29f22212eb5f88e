"""The decision's rules for the `plan` state and the model's requests (`decide.decide` asks).

- A reply with calls proposes them; a final answer completes the run, unless the task's required
  evidence does not exist yet: then the model is told once what is missing (`insist`), and a
  second such answer abstains with the answer kept as partial and the evidence named.
- A reply cut off at the budget's output limit abstains with that bound, its text kept; a reply
  that cannot be acted on (refused, truncated by the provider, incomplete, malformed, empty) ends
  the run for that reason, its text kept; one that came after the deadline abstains, `deadline`.
- No reply: a bound ran out while asking trips it (the next `plan` makes the final request);
  otherwise the run ends for the request's reason.
- A spent bound makes the one final tool-free request, after which the run abstains with it.
- A cancel abstains, `cancelled`.
- A failed request: a rejected one is not asked again; an unavailable provider is asked again
  after its Retry-After (or backoff) while retries are left and the wait fits before the
  deadline, then the fallback model is asked (once a run); a timeout is the deadline.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from typing import assert_never

from .budget import Bound
from .machine import Decision, Trigger
from .observations import (
    AdapterFailed,
    BoundSpent,
    CancelRequested,
    FinalAnswered,
    ModelAnswered,
    ModelCutOff,
    ModelGaveNoReply,
    ModelLate,
    ModelOutOfBudget,
    ModelProposed,
    ModelRejectedRequest,
    ModelTimedOut,
    ModelUnusable,
    ModelWasUnavailable,
    PlanObservation,
    RequestFailure,
)
from .policy import Policy, retry_after_or_backoff
from .verdicts import (
    CANCELLED,
    AskAgain,
    Ending,
    FallBack,
    FinalRequest,
    Move,
    NoReply,
    PlanVerdict,
    RequestVerdict,
    Trip,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanFacts:
    """What a decision in `plan` needs to know about the run (a final answer only)."""

    missing: tuple[str, ...] = ()
    """The task's required evidence that does not exist yet."""
    refused_answers: int = 0
    """Final answers the completion gate has refused so far."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFacts:
    """What the decision on a failed model request needs to know."""

    retries: int
    """Times this request has been asked again already (of the model now asked)."""
    now: float
    """Monotonic seconds now."""
    deadline: float
    """Monotonic seconds at the deadline."""
    came: datetime
    """Wall time the failure came at, as recorded (a Retry-After date is read against it)."""


def decide_plan(observation: PlanObservation, facts: PlanFacts) -> PlanVerdict:
    match observation:
        case ModelProposed():
            return Move(trigger=Trigger.PROPOSE)
        case ModelAnswered(text=text):
            return _answered(text, facts)
        case ModelCutOff(bound=bound, text=text):
            return Move(
                trigger=Trigger.GIVE_UP,
                decision=Decision.ABSTAIN,
                result_class="budget_exhausted",
                ending=Ending(bound.value, answer=text or None),
            )
        case ModelUnusable(reason=reason, text=text):
            return Move(trigger=Trigger.GIVE_UP, ending=Ending(reason, answer=text or None))
        case ModelLate():
            return Move(
                trigger=Trigger.GIVE_UP,
                decision=Decision.ABSTAIN,
                result_class="budget_exhausted",
                ending=Ending("deadline"),
            )
        case ModelOutOfBudget(bound=bound):
            return Trip(bound)
        case ModelGaveNoReply(reason=reason):
            return Move(trigger=Trigger.GIVE_UP, ending=Ending(reason))
        case BoundSpent(bound=bound):
            return FinalRequest(bound)
        case FinalAnswered(bound=bound, text=text):
            return Move(
                trigger=Trigger.GIVE_UP,
                decision=Decision.ABSTAIN,
                result_class="budget_exhausted",
                ending=Ending(bound.value, answer=text),
            )
        case CancelRequested():
            return Move(
                trigger=Trigger.GIVE_UP, decision=Decision.ABSTAIN, ending=Ending(CANCELLED)
            )
        case unreachable:
            assert_never(unreachable)


def _answered(text: str, facts: PlanFacts) -> Move:
    """The completion gate on a final answer."""
    if not facts.missing:
        return Move(
            trigger=Trigger.ANSWER,
            result_class="model_final",
            ending=Ending("model_final", answer=text),
        )
    reason = "missing_evidence: " + "; ".join(facts.missing)
    if facts.refused_answers == 0:
        return Move(
            trigger=Trigger.INSIST,
            decision=Decision.BACK_TO_MODEL,
            result_class="model_final",
            reason=reason,
        )
    return Move(
        trigger=Trigger.GIVE_UP,
        decision=Decision.ABSTAIN,
        result_class="model_final",
        ending=Ending(reason, answer=text),
    )


def decide_request(
    policy: Policy, failure: RequestFailure, facts: RequestFacts, rng: random.Random
) -> RequestVerdict:
    match failure:
        case ModelTimedOut():
            return NoReply(ModelOutOfBudget(bound=Bound.DEADLINE))
        case ModelRejectedRequest(status=status, message=message):
            return NoReply(ModelGaveNoReply(reason=f"model_rejected: {status} {message}"))
        case AdapterFailed(name=name):
            return NoReply(ModelGaveNoReply(reason=f"model_error: {name}"))
        case ModelWasUnavailable(status=status, retry_after=retry_after):
            if facts.retries >= policy.max_retries:
                return FallBack(ModelGaveNoReply(reason=f"model_unavailable: {status}"))
            wait = retry_after_or_backoff(policy, retry_after, facts.retries + 1, rng, facts.came)
            if facts.now + wait >= facts.deadline:
                return FallBack(ModelOutOfBudget(bound=Bound.DEADLINE))  # the wait does not fit
            return AskAgain(wait)
        case unreachable:
            assert_never(unreachable)
