"""Drive one run: ask the machine, act through `Effects`, record. The async core of the runner.

The loop is `plan -> call -> observe -> ...` until a terminal state. `plan` asks the model; `call`
admits (counting the attempt first), validates, authorizes and dispatches a batch of calls
concurrently, then classifies their outcomes one at a time in call order; `observe` applies the
policy's decision. Every move goes through the shared machine and leaves one `TransitionRecord`.
Bounds are checked at the top of every iteration and again before every sleep and dispatch; when one
is spent, outstanding calls are answered with `budget_exhausted`, the model gets one tool-free
request, and the run ends `abstain` with the bound as its reason. A write whose outcome is unknown
is looked up by its operation key before anything else; if that cannot settle it, `unknown`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

import structlog
from pydantic_core import to_jsonable_python

from . import budget as bounds
from ._admission import admit, admit_lookup
from ._decisions import ENDING, decide
from ._render import model_view, render_for_model
from ._state import Current, RunState, Runtime, Slot
from .budget import Bound, Limits, Usage
from .classifier import classify
from .clock import Clock
from .contracts import ContractSet
from .effects import Effects, LiveEffects, ReplayEffects
from .errors import OutsideRecording, ReplayDivergence, RunFailure, StoreError
from .machine import Decision, Trigger, attach, detach, fire
from .machine import decide as trigger_for
from .models.base import (
    ModelAdapter,
    ModelRejected,
    ModelReply,
    ModelUnavailable,
    ToolChoice,
    ToolSpec,
)
from .models.scripted import estimate_tokens
from .observations import (
    AccessDenied,
    ArgumentsRejected,
    BudgetExhausted,
    OutcomeUnknown,
    ToolFailedPermanently,
    ToolFailedTransiently,
    ToolFoundNothing,
    ToolObservation,
    ToolSucceeded,
    WriteNotApplied,
)
from .operations import OperationStatus
from .policy import Policy, retry_after_or_backoff, retry_delay
from .recording import RecordedOutput, RecordedTurn
from .spec import RunResult, RunSpec
from .states import TERMINAL, State
from .store.base import Store
from .tools import ToolBox, ToolResponse
from .trace import OperationSummary, RunHeader, RunSummary, TransitionRecord
from .tracing import SpanSink, ToolSpan, summarize
from .transcript import AssistantMessage, SystemMessage, UserMessage

SYSTEM_PROMPT: Final = (
    "You plan tool calls for a travel assistant. Use only the tools offered. Tool results are "
    "JSON with a result_class; errors are typed. Never treat an unknown status as confirmed."
)

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


@dataclass(slots=True, kw_only=True)
class ReplayedRun:
    """What re-driving a recording came to."""

    records: list[TransitionRecord]
    result: RunResult | None
    """None when the replay stopped outside the recording."""
    outside: str | None = None
    """The input the recording had no answer for."""
    stood_in: bool = False
    """Whether the final tool-free answer was not in the recording (counterfactual only)."""


def _unusable(reply: ModelReply) -> str | None:
    """Why a reply cannot be acted on (a refusal, nothing at all, a cut-off answer), or None."""
    if reply.stop_reason == "refusal":
        return "model_refused"
    if reply.tool_calls:
        return None
    if not reply.text.strip():
        return "model_empty"
    if reply.stop_reason == "max_tokens":
        return "model_truncated"
    return None


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
        case _:
            return None


class Engine:
    """Runs tasks against a fixed set of contracts, tools, policy, store and clock.

    Build one per configuration and call `run` for each task; contracts are compiled and the
    machine is built once per process, never per run.
    """

    def __init__(
        self,
        *,
        contracts: ContractSet,
        toolbox: ToolBox,
        store: Store,
        clock: Clock,
        policy: Policy | None = None,
        rng: random.Random | None = None,
        retry_horizon: timedelta = timedelta(hours=24),
        render_limit: int = 4000,
        spans: Sequence[SpanSink] = (),
    ) -> None:
        """`render_limit`: the most characters of one tool result the model is shown (the full
        output is stored). `spans`: where per-call spans go besides structlog (e.g. `OtelSpans`)."""
        self.render_limit = render_limit
        self.spans = tuple(spans)
        self._policy_json = (policy or Policy()).model_dump(mode="json")
        self.runtime = Runtime(
            contracts=contracts,
            toolbox=toolbox,
            store=store,
            clock=clock,
            policy=policy or Policy(),
            rng=rng or random.Random(0),
            retry_horizon=retry_horizon,
        )

    @property
    def clock(self) -> Clock:
        return self.runtime.clock

    def run_sync(self, spec: RunSpec, model: ModelAdapter) -> RunResult:
        """Run to completion from synchronous code, on the clock's event loop."""
        with asyncio.Runner(loop_factory=self.clock.loop_factory) as runner:
            return runner.run(self.run(spec, model))

    async def run(self, spec: RunSpec, model: ModelAdapter) -> RunResult:
        """Drive one task to exactly one terminal state and return its result."""
        run_id = str(uuid.uuid4())
        started = self.clock.monotonic()
        effects = LiveEffects(run_id, model, self.clock, started)
        run = self._new_run(run_id, spec, effects, started, known=[])
        self.runtime.store.begin_run(self._header(run))
        return await self._drive(run)

    async def resume(self, run_id: str, spec: RunSpec, model: ModelAdapter) -> RunResult:
        """Continue a stored run that never finished: re-drive it from its recorded inputs (on
        this engine's clock, which must start where the run started), then go on live.

        Writes that were pending when it stopped are answered `ResponseLost` and reconciled by key
        before anything else; nothing already done is done again.
        """
        store = self.runtime.store
        if store.header(run_id) is None:
            raise StoreError(f"no run {run_id} in the store")
        if store.summary(run_id) is not None:
            raise StoreError(f"run {run_id} already ended")
        started = self.clock.monotonic()
        live = LiveEffects(run_id, model, self.clock, started)
        outputs = store.outputs(run_id)
        answered = {output.ordinal for output in outputs}
        in_flight = {op.dispatch for op in store.operations(run_id) if op.dispatch not in answered}
        effects = ReplayEffects(
            store.turns(run_id), outputs, self.clock, started, live=live, in_flight=in_flight
        )
        run = self._new_run(run_id, spec, effects, started, known=store.transitions(run_id))
        return await self._drive(run)

    async def replay(
        self,
        run_id: str,
        spec: RunSpec,
        turns: list[RecordedTurn],
        outputs: list[RecordedOutput],
        *,
        expected: list[TransitionRecord] | None,
    ) -> ReplayedRun:
        """Re-drive a recorded run with no live model or tool, on this engine's (fake) clock.

        With `expected` (an exact replay) every transition must equal the recorded one, or
        `ReplayDivergence` is raised. Without it (a counterfactual replay under another policy or
        budget) the run goes where the policy takes it, until it ends or needs an input the
        recording does not have.
        """
        started = self.clock.monotonic()
        effects = ReplayEffects(
            turns, outputs, self.clock, started, counterfactual=expected is None
        )
        run = self._new_run(run_id, spec, effects, started, known=expected or [])
        self.runtime.store.begin_run(self._header(run))
        for record in expected or []:  # the (throwaway) store holds what the re-drive checks
            self.runtime.store.append(record)
        try:
            result = await self._drive(run)
        except OutsideRecording as exc:
            return ReplayedRun(records=run.records, result=None, outside=exc.what)
        if expected is not None and len(run.records) != len(expected):
            seq = min(len(run.records), len(expected)) + 1
            got = brief(run.records[seq - 1]) if seq <= len(run.records) else "the run ended"
            want = brief(expected[seq - 1]) if seq <= len(expected) else "the run ended"
            raise ReplayDivergence(f"seq {seq}", want, got)
        return ReplayedRun(records=run.records, result=result, stood_in=effects.stood_in)

    # -- lifecycle ------------------------------------------------------------------------------

    def _new_run(
        self,
        run_id: str,
        spec: RunSpec,
        effects: Effects,
        started: float,
        known: list[TransitionRecord],
    ) -> RunState:
        contracts = self.runtime.contracts
        offered = tuple(
            ToolSpec(
                name=contract.name,
                description=contract.contract.description,
                parameters=contract.contract.input_schema,
            )
            for name in spec.tools
            if (contract := contracts.get(name)) is not None
            and contract.contract.audience == "model"
            and contract.contract.scope in spec.principal.scopes
        )
        run = RunState(
            run_id=run_id,
            spec=spec,
            lifecycle=attach(),
            usage=Usage(started_at=started),
            offered=offered,
            offered_names=frozenset(tool.name for tool in offered),
            log=structlog.get_logger("runner").bind(
                run_id=run_id, tenant=spec.tenant, fixture=spec.name
            ),
            effects=effects,
            known=known,
            started_wall=self.clock.now(),
        )
        # Building events nobody will see is the costliest part of logging: ask once per run.
        enabled = getattr(run.log, "is_enabled_for", None)
        run.logging = enabled(logging.INFO) if callable(enabled) else True
        run.transcript.append(SystemMessage(text=SYSTEM_PROMPT))
        run.transcript.append(UserMessage(text=spec.task))
        return run

    def _header(self, run: RunState) -> RunHeader:
        spec = run.spec
        return RunHeader(
            run_id=run.run_id,
            name=spec.name,
            tenant=spec.tenant,
            principal=spec.principal.id,
            started_at=self.clock.now(),
            task=spec.task,
            tools=list(spec.tools),
            scopes=sorted(spec.principal.scopes),
            context=to_jsonable_python(dict(spec.context)),
            limits=_limits_json(spec.limits),
            policy=self._policy_json,
            seed=spec.seed,
            fixture=spec.fixture,
            world=dict(spec.world),
        )

    async def _drive(self, run: RunState) -> RunResult:
        try:
            while run.lifecycle.current not in TERMINAL:
                state = run.lifecycle.current
                if state is State.PLAN:
                    await self._plan(run)
                elif state is State.CALL:
                    await self._call(run)
                else:
                    await self._observe(run)
        finally:
            for slot in run.queue:
                if isinstance(slot.task, asyncio.Future):
                    slot.task.cancel()
                elif slot.task is not None:
                    slot.task.close()  # type: ignore[attr-defined]  # a never-awaited coroutine
            detach(run.lifecycle)
        return self._finish(run)

    def _finish(self, run: RunState) -> RunResult:
        summary = RunSummary(
            run_id=run.run_id,
            terminal=run.lifecycle.state,
            reason=run.reason,
            attempts=run.usage.attempts,
            model_steps=run.usage.model_steps,
            tokens_in=run.usage.tokens_in,
            tokens_out=run.usage.tokens_out,
            elapsed_s=self.clock.monotonic() - run.usage.started_at,
            waits_s=run.waits,
            answer=run.answer,
            operations=[
                OperationSummary(key=key, tool=tool, status=status.value)
                for key, (tool, status) in run.operations.items()
            ],
            prefill_per_step=run.prefill,
            prefill_untruncated=sum(run.prefill_untruncated),
        )
        self.runtime.store.end_run(summary)
        return RunResult.of(
            summary, name=run.spec.name, transitions=run.records, evidence=run.evidence
        )

    def _move(self, run: RunState, trigger: Trigger, **fields: Any) -> None:
        """Fire `trigger` on the machine and record the transition it made."""
        source = run.lifecycle.state
        dest = fire(run.lifecycle, trigger)
        record = TransitionRecord(
            run_id=run.run_id,
            seq=len(run.records) + 1,
            time=self.clock.now(),
            from_state=source,
            to_state=dest.value,
            trigger=trigger.value,
            attempt=run.usage.attempts,
            **fields,
        )
        run.records.append(record)
        if record.seq <= len(run.known):  # re-driving a stored run: it must say the same
            stored = run.known[record.seq - 1]
            if not same_transition(stored, record):
                raise ReplayDivergence(f"seq {record.seq}", brief(stored), brief(record))
        else:
            self.runtime.store.append(record, run.effects.drain())
        if not run.logging:
            return
        run.log.info(
            "transition",
            seq=record.seq,
            state=source,
            to=record.to_state,
            trigger=record.trigger,
            tool=record.tool,
            call_id=record.call_id,
            result_class=record.result_class,
            attempt=record.attempt,
            decision=record.decision,
            latency_ms=record.latency_ms,
            operation_key=record.operation_key,
            reason=record.reason,
        )

    # -- plan -----------------------------------------------------------------------------------

    async def _ask(
        self, run: RunState, tools: tuple[ToolSpec, ...], choice: ToolChoice, *, bounded: bool
    ) -> tuple[ModelReply | None, float, str | None]:
        """One model request, asked again per the policy while the provider is unavailable.

        Returns (reply or None, latency_ms, why there is no reply). A 429/5xx is retried after its
        Retry-After (or backoff) only when the wait fits before the deadline, then once more on the
        adapter's same-family fallback model; a rejected request (400/401/403...) is not retried.
        """
        started = self.clock.monotonic()
        policy, limits = self.runtime.policy, run.spec.limits
        retries, fell_back = 0, False
        while True:
            run.model_requests += 1
            now = self.clock.monotonic()
            timeout = bounds.time_left(limits, run.usage, now) if bounded else None
            try:
                reply = await run.effects.ask(
                    run.model_requests, run.transcript, tools, choice, timeout
                )
                break
            except TimeoutError:
                return None, self._ms_since(started), "deadline"
            except RunFailure:
                raise
            except ModelRejected as exc:
                return None, self._ms_since(started), f"model_rejected: {exc.status} {exc}"
            except ModelUnavailable as exc:
                if retries < policy.max_retries:
                    retries += 1
                    wait = retry_after_or_backoff(
                        policy, exc.retry_after, retries, self.runtime.rng, self.clock.now()
                    )
                    if self.clock.monotonic() + wait >= bounds.deadline(limits, run.usage):
                        return None, self._ms_since(started), "deadline"
                    await self.clock.sleep(wait)
                    run.waits.append(wait)
                    continue
                if not fell_back and run.effects.use_fallback():
                    retries, fell_back = 0, True
                    continue
                return None, self._ms_since(started), f"model_unavailable: {exc.status}"
            except Exception as exc:  # an adapter bug must still end the run in a declared state
                name = getattr(exc, "type_name", type(exc).__name__)
                return None, self._ms_since(started), f"model_error: {name}"
        run.usage.model_steps += 1
        run.usage.tokens_in += reply.usage.input_tokens
        run.usage.tokens_out += reply.usage.output_tokens
        run.model_tokens = (reply.usage.input_tokens, reply.usage.output_tokens)
        elided = run.transcript.full_chars - run.transcript.chars
        run.prefill.append(reply.usage.input_tokens)
        run.prefill_untruncated.append(reply.usage.input_tokens + estimate_tokens(elided))
        return reply, self._ms_since(started), None

    def _ms_since(self, started: float) -> float:
        return round((self.clock.monotonic() - started) * 1000, 3)

    async def _plan(self, run: RunState) -> None:
        now = self.clock.monotonic()
        bound = run.tripped or bounds.spent(run.spec.limits, run.usage, now)
        if bound is not None:
            await self._final_request(run, bound)
            return
        reply, latency, failure = await self._ask(run, run.offered, "auto", bounded=True)
        if reply is None:
            if failure == "deadline":
                run.tripped = Bound.DEADLINE  # the next iteration makes the final request
                return
            run.reason = failure or "model_error"
            self._move(run, Trigger.GIVE_UP, latency_ms=latency, reason=run.reason)
            return
        tokens = {"tokens_in": reply.usage.input_tokens, "tokens_out": reply.usage.output_tokens}
        unusable = _unusable(reply)
        if unusable is not None:  # what the provider sent cannot be acted on: say so and stop
            run.transcript.append(AssistantMessage(text=reply.text))
            run.answer, run.reason = reply.text or None, unusable
            self._move(run, Trigger.GIVE_UP, latency_ms=latency, reason=unusable, **tokens)
            return
        if reply.tool_calls:
            run.transcript.append(AssistantMessage(text=reply.text, tool_calls=reply.tool_calls))
            run.queue = deque(Slot(call=call) for call in reply.tool_calls)
            run.fresh_batch = True
            run.pending, run.pending_reason, run.pending_key = Decision.CONTINUE, None, None
            self._move(run, Trigger.PROPOSE, latency_ms=latency, **tokens)
            return
        run.transcript.append(AssistantMessage(text=reply.text))
        run.answer = reply.text
        run.reason = "model_final"
        self._move(
            run,
            Trigger.ANSWER,
            result_class="model_final",
            latency_ms=latency,
            reason=run.reason,
            **tokens,
        )

    async def _final_request(self, run: RunState, bound: Bound) -> None:
        """The one tool-free request after a bound is spent; then `abstain`.

        It is outside the model-step cap. Under the deadline it gets only the time left, and none
        when none is left (the run then abstains with its evidence and no final text).
        """
        run.transcript.append(
            UserMessage(
                text=f"The {bound.value} budget is spent and no more tools can be called. Answer "
                "from the evidence you have, and say what you could not determine."
            )
        )
        left = bounds.time_left(run.spec.limits, run.usage, self.clock.monotonic())
        deadline = bound is Bound.DEADLINE
        reply: ModelReply | None = None
        latency: float | None = None
        if not deadline or left > 0:  # the tools stay declared; tool_choice none forbids them
            reply, latency, _ = await self._ask(run, run.offered, "none", bounded=deadline)
        if reply is not None:
            run.transcript.append(AssistantMessage(text=reply.text))
            run.answer = reply.text
        run.reason = bound.value
        self._move(
            run,
            Trigger.GIVE_UP,
            result_class="budget_exhausted",
            decision=Decision.ABSTAIN.value,
            latency_ms=latency,
            tokens_in=reply.usage.input_tokens if reply else None,
            tokens_out=reply.usage.output_tokens if reply else None,
            reason=run.reason,
        )

    # -- call -----------------------------------------------------------------------------------

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
        final = run.pending
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
        if observation.kind in _SETTLING and slot.fingerprint is not None:
            run.settled.setdefault(slot.fingerprint, (slot.call.id, observation.kind))


@functools.lru_cache(maxsize=64)
def _limits_json(limits: Limits) -> dict[str, Any]:
    """Limits repeat from run to run (they are frozen, so hashable): dump each once."""
    dumped: dict[str, Any] = limits.model_dump(mode="json")
    return dumped


_TIMING: Final = frozenset({"time", "latency_ms"})


def same_transition(recorded: TransitionRecord, again: TransitionRecord) -> bool:
    """Whether a re-driven transition says what the recorded one says.

    Timing is left out: it is replayed from the recorded inputs' times, but on a real clock the
    engine's own time between inputs is not an input, so it cannot come out to the microsecond.
    """
    a, b = recorded.to_json(), again.to_json()
    return all(a[key] == b[key] for key in a if key not in _TIMING)


def brief(record: TransitionRecord) -> str:
    """One line for a transition: `from->to trigger tool result decision`."""
    parts = [f"{record.from_state}->{record.to_state}", record.trigger]
    parts += [str(v) for v in (record.tool, record.result_class, record.decision) if v is not None]
    return " ".join(parts)
