"""A run's calls (`_state.Calls`, and each `Slot` of the batch): the one module that changes them.

`plan` takes a batch the model proposed, admission answers, claims and dispatches its calls,
`call` and `observe` take their outcomes, hand the work on and settle what each came to; each
through these functions, named for what happened.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Iterable
from typing import Any

from ..core.decide import Batch
from ..core.observations import ToolObservation
from ..core.states import OperationStatus
from ..models.base import ToolCall
from ..tools.contracts import CompiledContract
from ..tools.invocation import BudgetLeft
from ._call_ids import unique_calls
from ._state import AdmitBatch, Calls, InFlight, NextCall, Outcome, Slot, Work, WriteProgress


def take_batch(calls: Calls, proposed: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    """The batch the model proposed becomes the one in flight, to be admitted next; its calls,
    each with an id unique in the run."""
    unique = unique_calls(proposed, calls.ids)
    calls.batch = InFlight(calls=deque([Slot(call=call) for call in unique]))
    calls.work = AdmitBatch()
    return unique


def take_work(calls: Calls) -> Work:
    """The work left for this phase (the next call, until the phase hands on other work)."""
    work, calls.work = calls.work, NextCall()
    return work


def hand_on(calls: Calls, work: Work) -> None:
    """Leave `work` for the next phase."""
    calls.work = work


def first_claim(calls: Calls, key: str, slot: Slot) -> Slot:
    """The call of the batch that claims `key`: `slot`, unless an earlier one did."""
    return calls.batch.writes.setdefault(key, slot)


def note_operation(calls: Calls, key: str, tool: str, status: OperationStatus) -> None:
    """The status of a write key this run minted."""
    calls.operations[key] = (tool, status)


def mark_unknown(calls: Calls, key: str) -> None:
    """A write key whose outcome stays unknown."""
    calls.operations[key] = (calls.operations[key][0], OperationStatus.UNKNOWN)


def count_correction(calls: Calls, tool: str, *, invalid: bool, validated: bool) -> None:
    """A call's arguments were invalid (one more correction in a row for its tool), or passed
    validation (the streak ends)."""
    if invalid:
        calls.invalid_streak[tool] = calls.invalid_streak.get(tool, 0) + 1
    elif validated:
        calls.invalid_streak.pop(tool, None)


def keep_evidence(calls: Calls, item: dict[str, Any]) -> None:
    """A result the model was shown, for the run's result."""
    calls.evidence.append(item)


def settle(calls: Calls, fingerprint: str, call_id: str, result_class: str) -> None:
    """A call that settled (the first of its fingerprint is kept): it is not sent again."""
    calls.settled.setdefault(fingerprint, (call_id, result_class))


def close_call(calls: Calls, standing: Batch) -> None:
    """The front call of the batch is answered; the batch's standing decision is `standing`."""
    batch = calls.batch
    batch.standing = standing
    batch.calls.popleft()


# -- one call of the batch (`Slot`), as it goes through admission, dispatch and classification


def answer_now(slot: Slot, observation: ToolObservation) -> None:
    """Admission answered the call without dispatch (or the batch's first call refused it as a
    duplicate): `call` classifies this answer."""
    slot.observation = observation


def known_tool(slot: Slot, contract: CompiledContract) -> None:
    """The call names a tool the model may call: its contract."""
    slot.contract = contract


def validated(slot: Slot, fingerprint: str) -> None:
    """Its arguments passed validation: the tool and its canonical arguments."""
    slot.fingerprint = fingerprint


def duplicates(slot: Slot, first: Slot) -> None:
    """An earlier call of the batch holds the same write key: this one is never dispatched."""
    slot.duplicate_of = first


def claimed(slot: Slot, key: str, params_hash: str) -> None:
    """The write's intent is committed under `key`."""
    slot.operation_key, slot.params_hash = key, params_hash


def traced(slot: Slot, provenance: dict[str, str]) -> None:
    """Where the write's argument values first appeared (some came from a tool result)."""
    slot.provenance = provenance


def approval_noted(slot: Slot, approval: dict[str, str], *, proposed: str | None = None) -> None:
    """The approval decision the write goes (or does not go) out under; `proposed`: the key it
    was recorded under as a proposal instead of being claimed."""
    if proposed is not None:
        slot.proposed_key = proposed
    slot.approval = approval


def dispatched(
    slot: Slot, task: Awaitable[Outcome], started: float, held: BudgetLeft | None
) -> None:
    """The call (or its lookup) is on its way; `held`: what a child-run call was carved."""
    if held is not None:
        slot.held = held
    slot.sent_at = started
    slot.sending = task


def resend(slot: Slot) -> None:
    """The call goes out again (a retry): a new dispatch may need its own lookup."""
    slot.retries += 1
    slot.progress = WriteProgress.SENT


def looked_up(slot: Slot) -> None:
    """A lookup by key has been made since the write was last sent (or none can be)."""
    slot.progress = WriteProgress.LOOKED_UP


def outcome_taken(slot: Slot, came_at: float | None) -> None:
    """`call` has taken the call's outcome (or its answer), which came at `came_at`."""
    slot.came_at = came_at
    slot.sending = None
    slot.observation = None


def released(slot: Slot) -> None:
    """The child-run call ended: it holds nothing of the run's budget any more."""
    slot.held = None


def charged(slot: Slot) -> None:
    """Its child's spending has been charged (a later lookup of the same child is not)."""
    slot.charged = True


def answered(slot: Slot, result_class: str) -> None:
    """The call has its one result in the transcript, of this class."""
    slot.answered = result_class
