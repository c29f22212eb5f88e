"""The `call` and `observe` states: admit and dispatch a batch, classify each outcome in call
order, apply the policy's decision (retry, reconcile, back to the model, end the run), and give
every call its one result in the transcript.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from . import budget as bounds
from ._admission import admit, admit_lookup, refuse_duplicate
from ._core import EngineCore
from ._decisions import ENDING, decide
from ._render import model_view, render_for_model
from ._state import Current, RunState, Slot
from .budget import Bound
from .classifier import classify, malformed_reason
from .machine import Decision, Trigger
from .machine import decide as trigger_for
from .observations import (
    AccessDenied,
    ArgumentsRejected,
    BudgetExhausted,
    OutcomeUnknown,
    RepeatRefused,
    ResultMalformed,
    ToolFailedPermanently,
    ToolFailedTransiently,
    ToolFoundNothing,
    ToolObservation,
    ToolSucceeded,
    WriteNotApplied,
)
from .operations import OperationStatus
from .policy import retry_delay
from .tools import ToolResponse
from .tracing import ToolSpan, summarize

# Which outcomes settle a call for good: the same call again would bring no new information.
_SETTLING: Final = frozenset({"ok", "empty", "permanent", "malformed_result"})

# When several calls in one batch decide differently, the run follows the strongest.
_PRECEDENCE: Final[dict[Decision, int]] = {
    Decision.CONTINUE: 0,
    Decision.BACK_TO_MODEL: 1,
    Decision.FINAL_ANSWER: 2,
    Decision.ABSTAIN: 3,
    Decision.ESCALATE: 4,
    Decision.UNKNOWN: 5,
}


def _why(observation: ToolObservation) -> str | None:
    """A short, secret-free reason for the log where the class alone does not say enough."""
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
        case RepeatRefused(first_call_id=first, first_kind=kind, in_same_reply=True):
            return f"duplicate of {first} in the same reply ({kind})"
        case _:
            return None


class Acting(EngineCore):
    async def _call(self, run: RunState) -> None:
        runtime = self.runtime
        if run.fresh_batch:
            run.fresh_batch = False
            for slot in run.queue:  # admission in call order; dispatched calls run concurrently
                admit(runtime, run, slot)
        elif run.redo is not None:
            slot, run.redo = run.redo, None
            if slot.looking_up:
                admit_lookup(runtime, run, slot)
            else:
                slot.retries += 1
                slot.reconciled = False  # a new dispatch may need its own lookup
                admit(runtime, run, slot)
        slot = run.queue[0]
        latency: float | None = None
        if slot.duplicate_of is not None and slot.observation is None:
            slot.observation = refuse_duplicate(slot)  # the first call has been answered by now
        if slot.observation is not None:
            observation = slot.observation
            slot.looking_up = False
        else:
            assert slot.task is not None and slot.contract is not None
            outcome, ended = await slot.task
            slot.task = None
            latency = round((ended - slot.started) * 1000, 3)
            observation = self._classify(run, slot, outcome)
        slot.observation = None
        self._settle_operation(run, slot, observation)
        decision = decide(runtime.policy, run, slot, observation)
        run.current = Current(
            slot=slot, observation=observation, decision=decision, latency_ms=latency
        )
        self._move(
            run,
            Trigger.CLASSIFY,
            tool=slot.call.name,
            call_id=slot.call.id,
            args=slot.call.arguments if slot.validated else None,
            result_class=observation.kind,
            decision=decision.value,
            latency_ms=latency,
            operation_key=slot.operation_key,
            reason=_why(observation),
        )
        self._trace_call(run, slot, observation, latency)

    def _trace_call(
        self, run: RunState, slot: Slot, observation: ToolObservation, latency: float | None
    ) -> None:
        """One span per tool call: to structlog, and to any other span sinks."""
        if not (run.logging or self.spans):
            return
        ended = self.clock.now()
        started = ended if latency is None else ended - timedelta(milliseconds=latency)
        span = ToolSpan(
            run_id=run.run_id,
            tenant=run.spec.tenant,
            fixture=run.spec.name,
            tool=slot.call.name,
            call_id=slot.call.id,
            arguments=summarize(slot.call.arguments),
            result_class=observation.kind,
            attempt=run.usage.attempts,
            latency_ms=latency,
            operation_key=slot.operation_key,
            model_tokens_in=run.model_tokens[0],
            model_tokens_out=run.model_tokens[1],
            started_at=started,
            ended_at=ended,
        )
        if run.logging:
            run.log.info("tool_call", **span.fields())
        for sink in self.spans:
            sink.tool_span(span)

    def _classify(
        self, run: RunState, slot: Slot, outcome: ToolResponse | BaseException
    ) -> ToolObservation:
        assert slot.contract is not None
        if not slot.looking_up:
            return classify(slot.contract, slot.call.id, outcome)
        # A reconciliation lookup: its answer says what became of the write.
        slot.looking_up, slot.reconciled = False, True
        lookup_name = slot.contract.contract.reconcile_with or ""
        found = classify(self.runtime.contracts[lookup_name], f"{slot.call.id}~lookup", outcome)
        key = slot.operation_key or ""
        if isinstance(found, ToolSucceeded) and found.result.get("found") is True:
            result = {"status": "ok", "reconciled_by": lookup_name, **found.result}
            return ToolSucceeded(call_id=slot.call.id, tool=slot.call.name, result=result)
        if isinstance(found, ToolSucceeded) and found.result.get("found") is False:
            return WriteNotApplied(call_id=slot.call.id, tool=slot.call.name, operation_key=key)
        return OutcomeUnknown(
            call_id=slot.call.id,
            tool=slot.call.name,
            reason=f"reconciliation inconclusive ({lookup_name}: {_why(found) or found.kind})",
        )

    def _settle_operation(self, run: RunState, slot: Slot, observation: ToolObservation) -> None:
        """Write the status an outcome gives the slot's operation, if it has one."""
        key = slot.operation_key
        if key is None:
            return
        if isinstance(observation, ToolSucceeded | ToolFoundNothing):
            status, result = OperationStatus.COMMITTED, observation.result
        elif isinstance(observation, OutcomeUnknown | BudgetExhausted):
            return  # still pending: a lookup (or the run's end) settles it
        else:
            status, result = OperationStatus.FAILED, None
        self.runtime.store.settle(key, status, result)
        run.operations[key] = (slot.call.name, status)

    # -- observe --------------------------------------------------------------------------------

    async def _observe(self, run: RunState) -> None:
        assert run.current is not None
        current, run.current = run.current, None
        slot, observation, decision = current.slot, current.observation, current.decision
        if decision is Decision.RETRY:
            decision, observation = await self._retry_or_stop(run, slot, observation)
            if decision is Decision.RETRY:
                return
        elif decision is Decision.RECONCILE:
            decision, observation = self._reconcile_or_stop(run, slot, observation)
            if decision is Decision.RECONCILE:
                return
        if isinstance(observation, BudgetExhausted):
            run.tripped = run.tripped or observation.bound
            if slot.operation_key is not None and not slot.reconciled:
                decision = Decision.UNKNOWN  # a write we cannot look up is not a partial answer
        if decision is Decision.UNKNOWN and slot.operation_key is not None:
            self.runtime.store.settle(slot.operation_key, OperationStatus.UNKNOWN)
            run.operations[slot.operation_key] = (slot.call.name, OperationStatus.UNKNOWN)
        self._answer_call(run, slot, observation)
        if _PRECEDENCE[decision] > _PRECEDENCE[run.pending]:
            run.pending, run.pending_key = decision, slot.operation_key
            run.pending_reason = (
                observation.bound.value
                if isinstance(observation, BudgetExhausted)
                else observation.kind
            )
        run.queue.popleft()
        if run.queue:
            following = run.queue[0].call
            self._move(
                run,
                Trigger.NEXT_CALL,
                tool=following.name,
                call_id=following.id,
                decision=decision.value,
            )
            return
        final = self._unless_unsettled(run, run.pending)
        ending = final in ENDING
        if ending:
            run.reason = run.pending_reason or final.value
            if final is Decision.UNKNOWN and run.tripped is not None:
                run.reason = run.tripped.value  # the bound that left the write unresolved
        self._move(
            run,
            trigger_for(final),
            decision=final.value,
            reason=run.reason if ending else None,
            operation_key=run.pending_key if final is Decision.UNKNOWN else None,
        )

    def _unless_unsettled(self, run: RunState, final: Decision) -> Decision:
        """The batch's decision, or `unknown` while a write of this run is still unsettled.

        The last guard before `plan`, the only way to `complete`: whatever the policy said, a
        run that started a write whose outcome it does not know hands over that write's key.
        """
        if final is Decision.UNKNOWN:
            return final
        for key, (tool, status) in run.operations.items():
            if status in (OperationStatus.PENDING, OperationStatus.UNKNOWN):
                self.runtime.store.settle(key, OperationStatus.UNKNOWN)
                run.operations[key] = (tool, OperationStatus.UNKNOWN)
                run.pending, run.pending_key = Decision.UNKNOWN, key
                run.pending_reason = "write_not_settled"
                return Decision.UNKNOWN
        return final

    async def _retry_or_stop(
        self, run: RunState, slot: Slot, observation: ToolObservation
    ) -> tuple[Decision, ToolObservation]:
        """Wait and go back to `call`, unless a bound forbids it (checked before the sleep)."""
        runtime, limits = self.runtime, run.spec.limits
        wait = retry_delay(
            runtime.policy, observation, slot.retries + 1, runtime.rng, self.clock.now()
        )
        now = self.clock.monotonic()
        blocked = bounds.blocks_dispatch(limits, run.usage, now)
        if blocked is None and now + wait >= bounds.deadline(limits, run.usage):
            blocked = Bound.DEADLINE  # the wait would outlast the deadline: never retry early
        if blocked is None:
            await self.clock.sleep(wait)
            run.waits.append(wait)
            blocked = bounds.blocks_dispatch(limits, run.usage, self.clock.monotonic())
        if blocked is None:
            run.redo = slot
            self._move(
                run,
                Trigger.RETRY,
                tool=slot.call.name,
                call_id=slot.call.id,
                decision=Decision.RETRY.value,
                wait_s=round(wait, 6),
                operation_key=slot.operation_key,
            )
            return Decision.RETRY, observation
        stopped = BudgetExhausted(
            bound=blocked,
            call_id=slot.call.id,
            tool=slot.call.name,
            detail=f"retry needed a wait of {wait:.3f} s; {observation.kind} not retried",
        )
        return Decision.FINAL_ANSWER, stopped

    def _reconcile_or_stop(
        self, run: RunState, slot: Slot, observation: ToolObservation
    ) -> tuple[Decision, ToolObservation]:
        """Go back to `call` to look the write up by its key, unless a bound forbids it."""
        blocked = bounds.blocks_dispatch(run.spec.limits, run.usage, self.clock.monotonic())
        if blocked is not None:
            run.tripped = blocked
            stopped = OutcomeUnknown(
                call_id=slot.call.id,
                tool=slot.call.name,
                reason=f"not reconciled: the {blocked.value} budget is spent",
            )
            return Decision.UNKNOWN, stopped
        assert slot.contract is not None
        slot.looking_up = True
        run.redo = slot
        self._move(
            run,
            Trigger.RECONCILE,
            tool=slot.contract.contract.reconcile_with,
            call_id=slot.call.id,
            decision=Decision.RECONCILE.value,
            operation_key=slot.operation_key,
        )
        return Decision.RECONCILE, observation

    def _answer_call(self, run: RunState, slot: Slot, observation: ToolObservation) -> None:
        """Give the call its one result in the transcript, and remember what it settled."""
        attempts_left = max(0, run.spec.limits.max_attempts - run.usage.attempts)
        body, is_error = model_view(observation, attempts_left)
        content, full_size = render_for_model(
            body, limit=self.render_limit, run_id=run.run_id, call_id=slot.call.id
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
        if isinstance(observation, ToolSucceeded | ToolFoundNothing):
            run.evidence.append(
                {
                    "call_id": slot.call.id,
                    "tool": slot.call.name,
                    "result_class": observation.kind,
                    "result": observation.result,
                }
            )
        slot.answered = observation.kind
        if observation.kind in _SETTLING and slot.fingerprint is not None:
            run.settled.setdefault(slot.fingerprint, (slot.call.id, observation.kind))
