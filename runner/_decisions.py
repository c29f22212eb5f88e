"""Run-level rules on top of the policy table: what the table alone cannot express.

- a second invalid-argument call to the same tool (past `corrections_per_tool`) abstains;
- retries are bounded per call, never happen once another call has ended the run, and never
  re-send a write whose destination does not suppress duplicates;
- an unknown write outcome is reconciled once by key; inconclusive after that means `unknown`;
  a table that says to retry it on a write that may not be re-sent gets the lookup instead.
"""

from __future__ import annotations

from ._state import RunState, Slot
from .machine import Decision
from .observations import ToolObservation
from .policy import Policy

ENDING = frozenset({Decision.ABSTAIN, Decision.ESCALATE, Decision.UNKNOWN})


def decide(policy: Policy, run: RunState, slot: Slot, observation: ToolObservation) -> Decision:
    kind = observation.kind
    decision = policy.decision_for(kind)
    tool = slot.call.name
    contract = slot.contract.contract if slot.contract is not None else None
    if kind == "invalid_arguments":
        streak = run.invalid_streak.get(tool, 0) + 1
        run.invalid_streak[tool] = streak
        if streak > policy.corrections_per_tool:
            return Decision.ABSTAIN
    elif slot.validated:
        run.invalid_streak.pop(tool, None)
    resend_unsafe = (
        contract is not None
        and contract.side_effect == "write"
        and not contract.suppresses_duplicates
    )
    if kind == "unknown_outcome" and decision is Decision.RETRY and resend_unsafe:
        decision = Decision.RECONCILE  # a write that may not be re-sent is looked up instead
    if decision is Decision.RECONCILE and (
        slot.reconciled or contract is None or contract.reconcile_with is None
    ):
        return Decision.UNKNOWN
    if decision is Decision.RETRY:
        if slot.retries >= policy.max_retries or run.pending in ENDING:
            return Decision.UNKNOWN if kind == "unknown_outcome" else Decision.BACK_TO_MODEL
        if resend_unsafe:
            return Decision.BACK_TO_MODEL  # never re-send a write the destination may duplicate
    return decision
