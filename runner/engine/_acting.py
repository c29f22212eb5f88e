"""The `call` and `observe` states: admit and dispatch a batch, classify each outcome in call
order, decide it once (`decide.decide`, recorded on the `classify` transition), then carry the
verdict out (retry, reconcile, back to the model, end the run), giving every call its one result
in the transcript.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Final, assert_never

from ..base.tracing import ToolSpan, summarize
from ..core import budget as bounds
from ..core.decide import Facts, Verdict, decide, why
from ..core.machine import Trigger
from ..core.observations import (
    OutcomeUnknown,
    ToolFoundNothing,
    ToolObservation,
    ToolSucceeded,
    WriteNotApplied,
)
from ..core.result_classes import CLASSES
from ..core.states import OperationStatus
from ..record._render import model_view, render_for_model
from ..record.recording import Recorded
from ..record.trace import recorded_observation
from ..tools.children import answer_of_child, child_in, is_child_contract
from ..tools.classifier import classify
from ..tools.invocation import ToolResponse
from ._admission import admit, admit_lookup, refuse_duplicate
from ._calls import (
    answer_now,
    answered,
    charged,
    close_call,
    count_correction,
    hand_on,
    keep_evidence,
    looked_up,
    mark_unknown,
    note_operation,
    outcome_taken,
    released,
    resend,
    settle,
    take_work,
)
from ._core import Core
from ._spending import charge_child, count_wait, release, trip
from ._state import (
    AdmitBatch,
    Decided,
    LookUp,
    NextCall,
    Retry,
    RunState,
    Slot,
    WriteProgress,
)

_RESULTS: Final = (ToolSucceeded, ToolFoundNothing)


async def call(core: Core, run: RunState) -> None:
    runtime = core.runtime
    work = take_work(run.calls)
    batch = run.calls.batch
    lookup = False
    match work:
        case AdmitBatch():
            # Admission in call order; the dispatched calls run concurrently.
            for slot in batch.calls:
                await admit(runtime, run, slot)
        case Retry(slot=slot):
            resend(slot)  # a new dispatch may need its own lookup
            await admit(runtime, run, slot)
        case LookUp(slot=slot):
            admit_lookup(runtime, run, slot)
            lookup = True
        case NextCall():
            pass
        case Decided():
            raise AssertionError("a decided outcome is observed, never called")
        case unreachable:
            assert_never(unreachable)
    slot = batch.calls[0]
    latency: float | None = None
    if slot.duplicate_of is not None and slot.observation is None:
        answer_now(slot, refuse_duplicate(slot))  # the first call has been answered by now
    answer = slot.observation
    if answer is not None:
        observation = answer
        outcome_taken(slot, None)
    else:
        assert slot.sending is not None and slot.contract is not None
        if len(batch.calls) > 1:  # later calls in flight: what they bring is stored meanwhile
            await _storing_meanwhile(core, run, slot.sending)
        outcome, ended, came_at = await slot.sending
        outcome_taken(slot, came_at)
        _account_child(run, slot, outcome)
        latency = round((ended - slot.sent_at) * 1000, 3)
        observation = _classify(core, slot, outcome, lookup=lookup)
    _settle_operation(core, run, slot, observation)
    verdict = decide(runtime.policy, observation, _facts(core, run, slot), run.rng)
    tool = slot.call.name
    count_correction(
        run.calls,
        tool,
        invalid=observation.kind == "invalid_arguments",
        validated=slot.fingerprint is not None,  # its arguments passed validation
    )
    hand_on(run.calls, Decided(slot=slot, verdict=verdict, latency_ms=latency))
    core.move(
        run,
        Trigger.CLASSIFY,  # the move that records the verdict
        tool=tool,
        call_id=slot.call.id,
        args=slot.call.arguments if slot.fingerprint is not None else None,
        result_class=observation.kind,
        decision=verdict.decision,
        latency_ms=latency,
        operation_key=slot.operation_key or slot.proposed_key,
        reason=verdict.reason,
        observation=recorded_observation(observation),
        approval=slot.approval,
        provenance=slot.provenance,
    )
    _trace_call(core, run, slot, observation, latency)


def _inputs_taker(core: Core, run: RunState) -> Callable[[str, list[Recorded]], None] | None:
    """The store's `append_inputs`, unless it has none or the run is being re-driven."""
    if len(run.moves.records) < len(run.setup.known):
        return None
    taker: Callable[[str, list[Recorded]], None] | None
    taker = getattr(core.runtime.store, "append_inputs", None)
    return taker


async def _storing_meanwhile(core: Core, run: RunState, waited: Awaitable[object]) -> None:
    """Wait for `waited` (the batch's first call, or its retry's wait); each outcome a later
    call of the batch brings meanwhile is stored at once, not with the next transition, so a
    crash before `waited` ends does not lose it (a resume serves it as recorded: a write is not
    looked up, a read not run again). Needs a store that takes inputs alone (`append_inputs`,
    `store/base.py`); a re-drive stores nothing (its inputs are stored already)."""
    setup = run.setup
    take = _inputs_taker(core, run)
    if take is None or not isinstance(waited, asyncio.Future):
        return
    others = {
        s.sending
        for s in itertools.islice(run.calls.batch.calls, 1, None)
        if isinstance(s.sending, asyncio.Future) and not s.sending.done()
    }
    pending = core.runtime.pending
    while others and not waited.done():
        done, _ = await asyncio.wait({waited, *others}, return_when=asyncio.FIRST_COMPLETED)
        if done == {waited}:
            return  # it came first: the outcomes go with its transition, as for a single call
        others -= done
        inputs = setup.effects.drain()
        if inputs:
            take(setup.run_id, inputs)
            if pending is not None:  # an awaited store: written now, not before the next phase
                await pending.flush(setup.run_id)


def _account_child(run: RunState, slot: Slot, outcome: object) -> None:
    """A child-run call has ended: release what it held, and charge what its child spent."""
    if slot.held is not None and run.spending.held_by_children is not None:
        release(run.spending, slot.held)
        released(slot)
    if not slot.charged and isinstance(outcome, ToolResponse) and is_child_contract(slot.contract):
        child = child_in(outcome.payload)
        if child is not None:
            charge_child(run.spending, child)
            charged(slot)


def _trace_call(
    core: Core, run: RunState, slot: Slot, observation: ToolObservation, latency: float | None
) -> None:
    """One span per tool call: to structlog, and to any other span sinks."""
    if not (run.setup.logging or core.spans):
        return
    ended = core.clock.now()
    started = ended if latency is None else ended - timedelta(milliseconds=latency)
    span = ToolSpan(
        run_id=run.setup.run_id,
        tenant=run.setup.spec.tenant,
        fixture=run.setup.spec.name,
        tool=slot.call.name,
        call_id=slot.call.id,
        arguments=summarize(slot.call.arguments),
        result_class=observation.kind,
        attempt=run.spending.usage.attempts,
        latency_ms=latency,
        operation_key=slot.operation_key,
        model_tokens_in=run.spending.meters.model_tokens[0],
        model_tokens_out=run.spending.meters.model_tokens[1],
        started_at=started,
        ended_at=ended,
    )
    if run.setup.logging:
        run.setup.log.info("tool_call", **span.fields())
    for sink in core.spans:
        sink.tool_span(span)


def _classify(
    core: Core, slot: Slot, outcome: ToolResponse | BaseException, *, lookup: bool
) -> ToolObservation:
    assert slot.contract is not None
    if not lookup:
        return classify(slot.contract, slot.call.id, outcome)
    # A reconciliation lookup: its answer says what became of the write.
    looked_up(slot)
    lookup_name = slot.contract.contract.reconcile_with or ""
    found = classify(core.runtime.contracts[lookup_name], f"{slot.call.id}~lookup", outcome)
    key = slot.operation_key or ""
    if isinstance(found, ToolSucceeded) and found.result.get("found") is True:
        answered = answer_of_child(found.result) if is_child_contract(slot.contract) else None
        if answered is not None:  # the child ended: the call answers as it would have
            return classify(slot.contract, slot.call.id, answered)
        result = {"status": "ok", "reconciled_by": lookup_name, **found.result}
        return ToolSucceeded(call_id=slot.call.id, tool=slot.call.name, result=result)
    if isinstance(found, ToolSucceeded) and found.result.get("found") is False:
        return WriteNotApplied(call_id=slot.call.id, tool=slot.call.name, operation_key=key)
    return OutcomeUnknown(
        call_id=slot.call.id,
        tool=slot.call.name,
        reason=f"reconciliation inconclusive ({lookup_name}: {why(found) or found.kind})",
    )


def _settle_operation(core: Core, run: RunState, slot: Slot, observation: ToolObservation) -> None:
    """Write the status an outcome gives the slot's operation, if it has one."""
    key = slot.operation_key
    if key is None:
        return
    status = CLASSES[observation.kind].write_status
    if status is None:
        return  # still pending: a lookup (or the run's end) settles it
    result = (
        observation.result if isinstance(observation, ToolSucceeded | ToolFoundNothing) else None
    )
    core.runtime.store.settle(key, status, result)
    note_operation(run.calls, key, slot.call.name, status)


# -- observe --------------------------------------------------------------------------------


def _facts(core: Core, run: RunState, slot: Slot) -> Facts:
    """What the decision on `slot`'s outcome needs to know about the run."""
    limits, usage, clock = run.setup.spec.limits, run.spending.usage, run.clock
    contract = slot.contract.contract if slot.contract is not None else None
    now = clock.monotonic()
    batch = run.calls.batch
    last = len(batch.calls) == 1
    return Facts(
        call_id=slot.call.id,
        tool=slot.call.name,
        retries=slot.retries,
        corrections=run.calls.invalid_streak.get(slot.call.name, 0),
        resend_unsafe=contract is not None
        and contract.side_effect == "write"
        and not contract.suppresses_duplicates,
        can_look_up=slot.progress is WriteProgress.SENT
        and contract is not None
        and contract.reconcile_with is not None,
        operation_key=slot.operation_key,
        looked_up=slot.progress is WriteProgress.LOOKED_UP,
        # A child-run call is reconciled whatever is spent: its lookup reads the child from the
        # store and admits no attempt (`_admission.admit_lookup`); nothing else of it is re-sent.
        blocked=None
        if is_child_contract(slot.contract)
        else bounds.blocks_dispatch(limits, usage, now),
        now=now,
        deadline=bounds.deadline(limits, usage),
        wall=_answered_wall(core, run, slot),
        tripped=run.spending.tripped,
        batch=batch.standing,
        last=last,
        unsettled=_unsettled(run) if last else None,
    )


def _answered_wall(core: Core, run: RunState, slot: Slot) -> datetime:
    """The wall time `slot`'s outcome came at, as the record has it: the run's recorded start
    plus the outcome's recorded end, so a Retry-After date is read at the same instant when the
    run is replayed or resumed (the clock's `now` at the decision is microseconds later, and on
    a resume hours later). The clock's now for an outcome no dispatch recorded."""
    if slot.came_at is None:
        return core.clock.now()
    return run.setup.started_wall + timedelta(seconds=slot.came_at)


async def observe(core: Core, run: RunState) -> None:
    """Carry out the verdict `call` recorded: nothing here decides."""
    work = take_work(run.calls)
    assert isinstance(work, Decided), work
    slot, verdict = work.slot, work.verdict
    if verdict.then is Trigger.RETRY:
        await _retry(core, run, slot, verdict)
        return
    if verdict.then is Trigger.RECONCILE:
        _reconcile(core, run, slot, verdict)
        return
    trip(run.spending, verdict.tripped)
    if verdict.leaves_unknown and slot.operation_key is not None:
        _mark_unknown(core, run, slot.operation_key)
    _answer_call(core, run, slot, verdict.shown)
    close_call(run.calls, verdict.batch)
    if verdict.exit is None:
        following = run.calls.batch.calls[0].call
        core.move(
            run,
            verdict.then,
            tool=following.name,
            call_id=following.id,
            decision=verdict.decision,
        )
        return
    if verdict.exit.unsettled is not None:
        _mark_unknown(core, run, verdict.exit.unsettled)
    core.carry(run, verdict.exit.move)  # back to the model, or the batch ends the run


def _mark_unknown(core: Core, run: RunState, key: str) -> None:
    core.runtime.store.settle(key, OperationStatus.UNKNOWN)
    mark_unknown(run.calls, key)


async def _retry(core: Core, run: RunState, slot: Slot, verdict: Verdict) -> None:
    """Sleep the verdict's wait (it fits before the deadline) and go back to `call`; the
    retry's admission checks the bounds again before it dispatches."""
    assert verdict.wait is not None
    if len(run.calls.batch.calls) > 1 and _inputs_taker(core, run) is not None:  # as in `call`
        sleeping = asyncio.ensure_future(run.clock.sleep(verdict.wait))
        try:
            await _storing_meanwhile(core, run, sleeping)
        except BaseException:  # the run was cancelled meanwhile: so is its wait
            sleeping.cancel()
            raise
        await sleeping
    else:
        await run.clock.sleep(verdict.wait)
    count_wait(run.spending, verdict.wait)
    hand_on(run.calls, Retry(slot))
    core.move(
        run,
        verdict.then,
        tool=slot.call.name,
        call_id=slot.call.id,
        decision=verdict.decision,
        wait_s=round(verdict.wait, 6),
        operation_key=slot.operation_key,
    )


def _reconcile(core: Core, run: RunState, slot: Slot, verdict: Verdict) -> None:
    """Go back to `call` to look the write up by its key."""
    assert slot.contract is not None
    hand_on(run.calls, LookUp(slot))
    core.move(
        run,
        verdict.then,
        tool=slot.contract.contract.reconcile_with,
        call_id=slot.call.id,
        decision=verdict.decision,
        operation_key=slot.operation_key,
    )


def _answer_call(core: Core, run: RunState, slot: Slot, observation: ToolObservation) -> None:
    """Give the call its one result in the transcript, and remember what it settled."""
    attempts_left = max(0, run.setup.spec.limits.max_attempts - run.spending.usage.attempts)
    body, is_error = model_view(observation, attempts_left)
    content, full_size = render_for_model(
        body, limit=run.setup.render_limit, run_id=run.setup.run_id, call_id=slot.call.id
    )
    run.transcript.tool_result(
        call_id=slot.call.id,
        tool=slot.call.name,
        result_class=observation.kind,
        content=content,
        is_error=is_error,
        full_size=full_size,
        fingerprint=content.replace(f'"attempts_left":{attempts_left},', "", 1),
    )
    if isinstance(observation, _RESULTS):
        stamp = observation.result.get("source_timestamp")
        keep_evidence(  # untrusted data with its provenance: which call, from when
            run.calls,
            {
                "call_id": slot.call.id,
                "tool": slot.call.name,
                "result_class": observation.kind,
                "result": observation.result,
                "source_timestamp": stamp if isinstance(stamp, str) else None,
            },
        )
    answered(slot, observation.kind)
    if CLASSES[observation.kind].settles_call and slot.fingerprint is not None:
        settle(run.calls, slot.fingerprint, slot.call.id, observation.kind)


def _unsettled(run: RunState) -> str | None:
    """The key of a write of this run whose outcome is still open, if any."""
    for key, (_, status) in run.calls.operations.items():
        if status in (OperationStatus.PENDING, OperationStatus.UNKNOWN):
            return key
    return None
