"""Admitting one call: count the attempt, then validate, authorize, claim (writes) and dispatch.

A call refused at any step is answered with an observation and never dispatched. Writes get their
operation key here, and their intent is committed to the store before the dispatch starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ..base.errors import StoreConflict
from ..core import budget as bounds
from ..core.observations import (
    AccessDenied,
    ArgumentsRejected,
    BudgetExhausted,
    OutcomeUnknown,
    RepeatRefused,
    ToolFailedPermanently,
    ToolObservation,
    ToolUnknown,
)
from ..core.states import OperationStatus
from ..models.transcript import render_json
from ..record.operations import Operation, canonical, mint_key, parameter_hash
from ..tools.children import budget_left, is_child_contract
from ..tools.contracts import CompiledContract
from ..tools.invocation import ToolImplementation, ToolInvocation
from ._approval_gate import gate
from ._calls import (
    answer_now,
    claimed,
    dispatched,
    duplicates,
    first_claim,
    known_tool,
    looked_up,
    note_operation,
    validated,
)
from ._spending import count_attempt, count_dispatch, hold
from ._state import RunState, Runtime, Slot


def call_fingerprint(tool: str, arguments: Mapping[str, Any]) -> str:
    """A tool name and its canonical arguments, as canonical JSON (for refusing repeats).

    The text itself, not a hash of it: it is only ever compared within the run, in memory.
    """
    return render_json({"tool": tool, "args": canonical(arguments)})


async def admit(runtime: Runtime, run: RunState, slot: Slot) -> None:
    """Count the attempt, then answer the call at once or start its dispatch."""
    answer = await _answer_or_dispatch(runtime, run, slot)
    if answer is not None:
        answer_now(slot, answer)


async def _answer_or_dispatch(
    runtime: Runtime, run: RunState, slot: Slot
) -> ToolObservation | None:
    """The answer to a call admission refuses; None when it is dispatched (or, a write
    repeating an earlier call of its batch, answered as that call is: `slot.duplicate_of`)."""
    call, spec = slot.call, run.setup.spec
    now = run.clock.monotonic()
    blocked = bounds.blocks_dispatch(spec.limits, run.spending.usage, now)
    if blocked is not None:
        return BudgetExhausted(
            bound=blocked, call_id=call.id, tool=call.name, detail="not dispatched"
        )
    count_attempt(run.spending)
    contract = runtime.contracts.get(call.name)
    selection = run.planning.selection
    may_use = selection or ()  # a narrowed offer: say what the model may call
    if contract is None or contract.contract.audience != "model":
        return ToolUnknown(call_id=call.id, tool=call.name, may_use=may_use)
    if contract.contract.scope not in spec.principal.scopes:
        return AccessDenied(
            call_id=call.id,
            tool=call.name,
            source="runner",
            detail=f"scope {contract.contract.scope} is not granted to {spec.principal.id}",
        )
    offered = run.setup.offered_names if selection is None else selection
    if call.name not in offered:
        return ToolUnknown(call_id=call.id, tool=call.name, may_use=may_use)
    known_tool(slot, contract)
    if call.arguments_error is not None:  # the provider's arguments were not even JSON
        return ArgumentsRejected(
            call_id=call.id,
            tool=call.name,
            field=None,
            reason=f"arguments are not a JSON object: {call.arguments_error}",
        )
    problem = contract.check_arguments(call.arguments, spec.context)
    if problem is not None:
        return ArgumentsRejected(
            call_id=call.id, tool=call.name, field=problem.field, reason=problem.reason
        )
    fingerprint = slot.fingerprint  # a retry's, worked out when it was first admitted
    if fingerprint is None:
        fingerprint = call_fingerprint(call.name, call.arguments)
        validated(slot, fingerprint)
    earlier = run.calls.settled.get(fingerprint)
    if earlier is not None:
        return RepeatRefused(
            call_id=call.id, tool=call.name, first_call_id=earlier[0], first_kind=earlier[1]
        )
    implementation = runtime.toolbox.implementation(call.name)
    if implementation is None:
        return ToolUnknown(call_id=call.id, tool=call.name)
    if contract.contract.side_effect == "write":
        params_hash = parameter_hash(call.arguments)
        key = _key(runtime, run, slot, params_hash)
        refused = gate(runtime, run, slot, contract=contract, key=key, params_hash=params_hash)
        if refused is not None:
            return refused
        if not await _claim_intent(runtime, run, slot, key, params_hash):
            return None  # a duplicate, or refused by the store (answered there)
        now = run.clock.monotonic()  # the claim may have waited on the store
    _dispatch(
        run,
        slot,
        now,
        tool=call.name,
        call_id=call.id,
        arguments=call.arguments,
        implementation=implementation,
        contract=contract,
    )
    return None


def unavailable(lookup: str) -> str:
    """Why a write's outcome stays unknown when the toolbox has no implementation of its lookup
    (replay reads it back: the recording then holds no outcome of that lookup)."""
    return f"{lookup} is not available"


def not_granted(lookup: str, scope: str, principal: str) -> str:
    """Why a write's outcome stays unknown when its lookup needs a scope the principal lacks."""
    return f"{lookup} needs scope {scope}, which is not granted to {principal}"


def admit_lookup(runtime: Runtime, run: RunState, slot: Slot) -> None:
    """Count and dispatch the reconciliation lookup for `slot`'s write, by its operation key.

    The lookup of a child-run call admits no attempt of its own, and no bound blocks it: it
    reads the child from the store (or resumes it, within what it was carved), and the child's
    attempts are charged in its place. Counted, it took the family past the parent's cap after
    a crash, one attempt a level; blocked, the calls of a batch whose first child spent what
    was left stayed unknown, though no child of theirs had ever started."""
    assert slot.contract is not None and slot.operation_key is not None
    now = run.clock.monotonic()
    if not is_child_contract(slot.contract):
        blocked = bounds.blocks_dispatch(run.setup.spec.limits, run.spending.usage, now)
        if blocked is not None:
            answer_now(
                slot,
                BudgetExhausted(
                    bound=blocked,
                    call_id=slot.call.id,
                    tool=slot.call.name,
                    detail="lookup not dispatched",
                ),
            )
            return
        count_attempt(run.spending)
    lookup = slot.contract.contract.reconcile_with or ""
    lookup_contract = runtime.contracts.get(lookup)
    implementation = runtime.toolbox.implementation(lookup)
    if lookup_contract is None or implementation is None:
        reason: str | None = unavailable(lookup)
    else:  # the lookup reads with the run's authority: no read the principal may not make
        needed, principal = lookup_contract.contract.scope, run.setup.spec.principal
        reason = None if needed in principal.scopes else not_granted(lookup, needed, principal.id)
    if reason is not None:
        looked_up(slot)  # nothing can: the outcome stays unknown
        answer_now(slot, OutcomeUnknown(call_id=slot.call.id, tool=slot.call.name, reason=reason))
        return
    assert lookup_contract is not None and implementation is not None
    _dispatch(
        run,
        slot,
        now,
        tool=lookup,
        call_id=f"{slot.call.id}~lookup",
        arguments={},
        implementation=implementation,
        contract=lookup_contract,
    )


def refuse_duplicate(slot: Slot) -> RepeatRefused:
    """The answer to a write that repeats an earlier call of its batch: that call's outcome."""
    first = slot.duplicate_of
    assert first is not None
    return RepeatRefused(
        call_id=slot.call.id,
        tool=slot.call.name,
        first_call_id=first.call.id,
        first_kind=first.answered or "unanswered",
        in_same_reply=True,
    )


def _key(runtime: Runtime, run: RunState, slot: Slot, params_hash: str) -> str:
    """The write's operation key: tenant, tool, the run it is scoped by, parameter hash."""
    generation = runtime.policy.key_generation(slot.retries)
    return mint_key(
        run.setup.spec.tenant, slot.call.name, run.setup.key_scope, params_hash, generation
    )


async def _claim_intent(
    runtime: Runtime, run: RunState, slot: Slot, key: str, params_hash: str
) -> bool:
    """Commit the write's intent under `key` before dispatch; False if refused (or if an
    earlier call of the batch holds the key: then `slot.duplicate_of` says which)."""
    call, spec = slot.call, run.setup.spec
    first = first_claim(run.calls, key, slot)
    if first is not slot:  # the same write twice in one reply: it goes out once
        duplicates(slot, first)
        return False
    wall = runtime.clock.now()
    intent = Operation(
        key=key,
        tenant=spec.tenant,
        tool=call.name,
        run_id=run.setup.run_id,
        params_hash=params_hash,
        status=OperationStatus.PENDING,
        created_at=wall,
        expires_at=wall + runtime.retry_horizon,
        dispatch=run.spending.meters.dispatches + 1,  # the ordinal `_dispatch` is about to take
    )
    try:
        pending = runtime.pending  # an awaited store: the claim is awaited before dispatch
        stored = await pending.claim_awaited(intent) if pending else runtime.store.claim(intent)
    except StoreConflict as exc:
        answer_now(
            slot,
            ToolFailedPermanently(
                call_id=call.id, tool=call.name, reason="idempotency_mismatch", detail=str(exc)
            ),
        )
        return False
    del stored  # the claim itself marked the intent pending for this dispatch
    claimed(slot, key, params_hash)
    note_operation(run.calls, key, call.name, OperationStatus.PENDING)
    return True


def _dispatch(
    run: RunState,
    slot: Slot,
    now: float,
    *,
    tool: str,
    call_id: str,
    arguments: Mapping[str, Any],
    implementation: ToolImplementation,
    contract: CompiledContract,
) -> None:
    """Start the call's dispatch; `now` is when admission read the clock (nothing since has
    waited), the dispatch's start and what its timeout is worked out from."""
    spec, spending = run.setup.spec, run.spending
    batch = run.calls.batch
    left = None
    if is_child_contract(contract):  # carved for the child, held till it ends
        # Calls of the batch not admitted yet will each take an attempt: never carve those.
        waiting = sum(1 for s in batch.calls if s.sending is None and s.observation is None)
        held = spending.held_by_children
        left = budget_left(spec.limits, spending.usage, now, held, waiting=waiting - 1)
        hold(spending, left)
    invocation = ToolInvocation(
        call_id=call_id,
        tool=tool,
        arguments=arguments,
        tenant=spec.tenant,
        principal=spec.principal,
        credentials=spec.credentials,
        operation_key=slot.operation_key,
        timeout_s=min(
            contract.contract.timeout_s, bounds.time_left(spec.limits, spending.usage, now)
        ),
        run_id=run.setup.run_id,
        budget_left=left,
        cancel_requested=run.setup.cancel.signal,
    )
    ordinal = count_dispatch(spending)
    outcome = _outcome(run, ordinal, invocation, implementation)
    sending = asyncio.ensure_future(outcome) if len(batch.calls) > 1 else outcome
    dispatched(slot, sending, now, left)


async def _outcome(
    run: RunState,
    ordinal: int,
    invocation: ToolInvocation,
    implementation: ToolImplementation,
) -> tuple[Any, float, float | None]:
    effects = run.setup.effects
    outcome = await effects.call(ordinal, invocation, implementation)
    return outcome, run.clock.monotonic(), effects.output_ended(ordinal)
