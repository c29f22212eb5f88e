"""Drive one run: ask the machine, act, record. The async core of the runner.

The loop is `plan -> call -> observe -> ...` until a terminal state. `plan` asks the model; `call`
admits (counting the attempt first), validates, authorizes and dispatches a batch of calls
concurrently, then classifies their outcomes one at a time in call order; `observe` applies the
policy's decision. Every move goes through the shared machine and leaves one `TransitionRecord`.
Bounds are checked at the top of every iteration and again before every sleep and dispatch; when one
is spent, outstanding calls are answered with `budget_exhausted`, the model gets one tool-free
request, and the run ends `abstain` with the bound as its reason.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

from . import budget as bounds
from ._render import model_view
from .budget import Bound, Limits, Usage
from .classifier import classify
from .clock import Clock, within
from .contracts import CompiledContract, ContractSet
from .machine import Decision, Lifecycle, Trigger, attach, decide, detach, fire
from .models.base import ModelAdapter, ModelReply, ToolCall, ToolChoice, ToolSpec
from .observations import (
    AccessDenied,
    ArgumentsRejected,
    BudgetExhausted,
    RepeatRefused,
    ToolFailedPermanently,
    ToolFailedTransiently,
    ToolFoundNothing,
    ToolObservation,
    ToolSucceeded,
    ToolUnknown,
)
from .policy import Policy, retry_delay
from .states import TERMINAL, State
from .store.base import Store
from .tools import Principal, ToolBox, ToolInvocation, ToolResponse
from .trace import RunHeader, RunSummary, TransitionRecord
from .transcript import AssistantMessage, SystemMessage, Transcript, UserMessage, render_json

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
_ENDING: Final = frozenset({Decision.ABSTAIN, Decision.ESCALATE, Decision.UNKNOWN})


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """Everything the runtime decides about a run. Nothing here comes from the model."""

    task: str
    tenant: str
    principal: Principal
    tools: tuple[str, ...]
    """Tools the task may use; only those the principal's scopes allow are offered."""
    limits: Limits = field(default_factory=Limits)
    credentials: Mapping[str, str] = field(default_factory=dict, repr=False)
    context: Mapping[str, Any] = field(default_factory=dict)
    """Passed to semantic rules as pydantic validation context (e.g. the authorized dates)."""
    name: str = "run"
    seed: int | None = None


@dataclass(slots=True, kw_only=True)
class RunResult:
    """What a run came to; returned, never raised, whatever the outcome."""

    run_id: str
    name: str
    terminal: State
    reason: str
    answer: str | None
    attempts: int
    model_steps: int
    tokens_in: int
    tokens_out: int
    elapsed_s: float
    waits_s: list[float]
    transitions: list[TransitionRecord]
    evidence: list[dict[str, Any]]
    """Every ok or empty tool result, in the order they arrived: the partial answer's basis."""

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


@dataclass(slots=True, kw_only=True)
class _Slot:
    """One proposed call on its way through admission, dispatch and classification."""

    call: ToolCall
    contract: CompiledContract | None = None
    operation_key: str | None = None
    observation: ToolObservation | None = None
    """Set at admission when the call is answered without dispatch."""
    task: asyncio.Task[tuple[ToolResponse | BaseException, float]] | None = None
    started: float = 0.0
    retries: int = 0
    validated: bool = False


@dataclass(slots=True, kw_only=True)
class _Current:
    slot: _Slot
    observation: ToolObservation
    decision: Decision
    latency_ms: float | None


@dataclass(slots=True)
class _Run:
    """Mutable state of one run; owned by one `Engine.run` call."""

    run_id: str
    spec: RunSpec
    lifecycle: Lifecycle
    usage: Usage
    offered: tuple[ToolSpec, ...]
    offered_names: frozenset[str]
    log: Any
    transcript: Transcript = field(default_factory=Transcript)
    records: list[TransitionRecord] = field(default_factory=list)
    queue: deque[_Slot] = field(default_factory=deque)
    fresh_batch: bool = False
    retry_slot: _Slot | None = None
    current: _Current | None = None
    pending: Decision = Decision.CONTINUE
    pending_reason: str | None = None
    tripped: Bound | None = None
    settled: dict[str, tuple[str, str]] = field(default_factory=dict)
    invalid_streak: dict[str, int] = field(default_factory=dict)
    waits: list[float] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    answer: str | None = None
    reason: str = ""


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
        case _:
            return None


def call_fingerprint(tool: str, arguments: Mapping[str, Any]) -> str:
    """Hash of a tool name and its canonical arguments."""
    return hashlib.sha256(render_json({"tool": tool, "args": arguments}).encode()).hexdigest()


def operation_key(tenant: str, tool: str, arguments: Mapping[str, Any]) -> str:
    """One key per logical write intent: tenant, operation, canonical parameter hash."""
    digest = hashlib.sha256(render_json([tenant, tool, arguments]).encode()).hexdigest()
    return f"op_{tool}_{digest[:24]}"


class Engine:
    """Runs tasks against a fixed set of contracts, tools, policy, store and clock.

    Build one per process (or per configuration) and call `run` for each task; contracts are
    compiled and the machine is built once, never per run.
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
    ) -> None:
        self.contracts = contracts
        self.toolbox = toolbox
        self.store = store
        self.clock = clock
        self.policy = policy or Policy()
        self.rng = rng or random.Random(0)

    def run_sync(self, spec: RunSpec, model: ModelAdapter) -> RunResult:
        """Run to completion from synchronous code, on the clock's event loop."""
        with asyncio.Runner(loop_factory=self.clock.loop_factory) as runner:
            return runner.run(self.run(spec, model))

    async def run(self, spec: RunSpec, model: ModelAdapter) -> RunResult:
        """Drive one task to exactly one terminal state and return its result."""
        run = self._start(spec)
        try:
            while run.lifecycle.current not in TERMINAL:
                state = run.lifecycle.current
                if state is State.PLAN:
                    await self._plan(run, model)
                elif state is State.CALL:
                    await self._call(run)
                else:
                    await self._observe(run)
        finally:
            for slot in run.queue:
                if slot.task is not None:
                    slot.task.cancel()
            detach(run.lifecycle)
        return self._finish(run)

    # -- lifecycle ------------------------------------------------------------------------------

    def _start(self, spec: RunSpec) -> _Run:
        run_id = str(uuid.uuid4())
        offered = tuple(
            ToolSpec(
                name=contract.name,
                description=contract.contract.description,
                parameters=contract.contract.input_schema,
            )
            for name in spec.tools
            if (contract := self.contracts.get(name)) is not None
            and contract.contract.audience == "model"
            and contract.contract.scope in spec.principal.scopes
        )
        run = _Run(
            run_id=run_id,
            spec=spec,
            lifecycle=attach(),
            usage=Usage(started_at=self.clock.monotonic()),
            offered=offered,
            offered_names=frozenset(tool.name for tool in offered),
            log=structlog.get_logger("runner").bind(
                run_id=run_id, tenant=spec.tenant, fixture=spec.name
            ),
        )
        run.transcript.append(SystemMessage(text=SYSTEM_PROMPT))
        run.transcript.append(UserMessage(text=spec.task))
        self.store.begin_run(
            RunHeader(
                run_id=run_id,
                name=spec.name,
                tenant=spec.tenant,
                principal=spec.principal.id,
                started_at=self.clock.now(),
                limits=spec.limits.model_dump(),
                policy=self.policy.name,
                seed=spec.seed,
            )
        )
        return run

    def _finish(self, run: _Run) -> RunResult:
        elapsed = self.clock.monotonic() - run.usage.started_at
        summary = RunSummary(
            run_id=run.run_id,
            terminal=run.lifecycle.state,
            reason=run.reason,
            attempts=run.usage.attempts,
            model_steps=run.usage.model_steps,
            tokens_in=run.usage.tokens_in,
            tokens_out=run.usage.tokens_out,
            elapsed_s=elapsed,
            waits_s=list(run.waits),
            answer=run.answer,
        )
        self.store.end_run(summary)
        return RunResult(
            run_id=run.run_id,
            name=run.spec.name,
            terminal=run.lifecycle.current,
            reason=run.reason,
            answer=run.answer,
            attempts=run.usage.attempts,
            model_steps=run.usage.model_steps,
            tokens_in=run.usage.tokens_in,
            tokens_out=run.usage.tokens_out,
            elapsed_s=elapsed,
            waits_s=run.waits,
            transitions=run.records,
            evidence=run.evidence,
        )

    def _move(self, run: _Run, trigger: Trigger, **fields: Any) -> None:
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
        self.store.append(record)
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
        self,
        run: _Run,
        model: ModelAdapter,
        tools: tuple[ToolSpec, ...],
        choice: ToolChoice,
        timeout: float | None,
    ) -> tuple[ModelReply | None, float, str | None]:
        """One model request: (reply or None, latency_ms, why there is no reply)."""
        started = self.clock.monotonic()
        request = model.generate(run.transcript, tools, choice)
        try:
            reply = await (within(timeout, request) if timeout is not None else request)
        except TimeoutError:
            return None, self._ms_since(started), "deadline"
        except Exception as exc:  # an adapter bug must still end the run in a declared state
            return None, self._ms_since(started), f"model_error: {type(exc).__name__}"
        run.usage.model_steps += 1
        run.usage.tokens_in += reply.usage.input_tokens
        run.usage.tokens_out += reply.usage.output_tokens
        return reply, self._ms_since(started), None

    def _ms_since(self, started: float) -> float:
        return round((self.clock.monotonic() - started) * 1000, 3)

    async def _plan(self, run: _Run, model: ModelAdapter) -> None:
        now = self.clock.monotonic()
        bound = run.tripped or bounds.spent(run.spec.limits, run.usage, now)
        if bound is not None:
            await self._final_request(run, model, bound)
            return
        left = bounds.time_left(run.spec.limits, run.usage, now)
        reply, latency, failure = await self._ask(run, model, run.offered, "auto", left)
        if reply is None:
            if failure == "deadline":
                run.tripped = Bound.DEADLINE  # the next iteration makes the final request
                return
            run.reason = failure or "model_error"
            self._move(run, Trigger.GIVE_UP, latency_ms=latency, reason=run.reason)
            return
        tokens = {"tokens_in": reply.usage.input_tokens, "tokens_out": reply.usage.output_tokens}
        if reply.tool_calls:
            run.transcript.append(AssistantMessage(text=reply.text, tool_calls=reply.tool_calls))
            run.queue = deque(_Slot(call=call) for call in reply.tool_calls)
            run.fresh_batch = True
            run.pending, run.pending_reason = Decision.CONTINUE, None
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

    async def _final_request(self, run: _Run, model: ModelAdapter, bound: Bound) -> None:
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
        timeout = left if bound is Bound.DEADLINE else None
        reply: ModelReply | None = None
        latency: float | None = None
        if timeout is None or timeout > 0:
            reply, latency, _ = await self._ask(run, model, (), "none", timeout)
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

    async def _call(self, run: _Run) -> None:
        if run.fresh_batch:
            run.fresh_batch = False
            for slot in run.queue:  # admission in call order; dispatched calls run concurrently
                self._admit(run, slot)
        elif run.retry_slot is not None:
            slot, run.retry_slot = run.retry_slot, None
            slot.retries += 1
            self._admit(run, slot)
        slot = run.queue[0]
        latency: float | None = None
        if slot.observation is not None:
            observation = slot.observation
        else:
            assert slot.task is not None and slot.contract is not None
            outcome, ended = await slot.task
            slot.task = None
            latency = round((ended - slot.started) * 1000, 3)
            observation = classify(slot.contract, slot.call.id, outcome)
        slot.observation = None
        decision = self._decide(run, slot, observation)
        run.current = _Current(
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

    def _admit(self, run: _Run, slot: _Slot) -> None:
        """Count the attempt, then validate, authorize and dispatch, or answer without dispatch."""
        call, spec = slot.call, run.spec
        now = self.clock.monotonic()
        blocked = bounds.blocks_dispatch(spec.limits, run.usage, now)
        if blocked is not None:
            slot.observation = BudgetExhausted(
                bound=blocked, call_id=call.id, tool=call.name, detail="not dispatched"
            )
            return
        run.usage.attempts += 1
        contract = self.contracts.get(call.name)
        if contract is None or contract.contract.audience != "model":
            slot.observation = ToolUnknown(call_id=call.id, tool=call.name)
            return
        if contract.contract.scope not in spec.principal.scopes:
            slot.observation = AccessDenied(
                call_id=call.id,
                tool=call.name,
                source="runner",
                detail=f"scope {contract.contract.scope} is not granted to {spec.principal.id}",
            )
            return
        if call.name not in run.offered_names:
            slot.observation = ToolUnknown(call_id=call.id, tool=call.name)
            return
        slot.contract = contract
        problem = contract.check_arguments(call.arguments, spec.context)
        if problem is not None:
            slot.observation = ArgumentsRejected(
                call_id=call.id, tool=call.name, field=problem.field, reason=problem.reason
            )
            return
        slot.validated = True
        fingerprint = call_fingerprint(call.name, call.arguments)
        earlier = run.settled.get(fingerprint)
        if earlier is not None:
            slot.observation = RepeatRefused(
                call_id=call.id, tool=call.name, first_call_id=earlier[0], first_kind=earlier[1]
            )
            return
        implementation = self.toolbox.implementation(call.name)
        if implementation is None:
            slot.observation = ToolUnknown(call_id=call.id, tool=call.name)
            return
        if contract.contract.side_effect == "write":
            slot.operation_key = operation_key(spec.tenant, call.name, call.arguments)
        invocation = ToolInvocation(
            call_id=call.id,
            tool=call.name,
            arguments=call.arguments,
            tenant=spec.tenant,
            principal=spec.principal,
            credentials=spec.credentials,
            operation_key=slot.operation_key,
            timeout_s=min(
                contract.contract.timeout_s, bounds.time_left(spec.limits, run.usage, now)
            ),
        )
        slot.started = now
        slot.task = asyncio.ensure_future(
            self._dispatch(implementation(invocation), invocation.timeout_s)
        )

    async def _dispatch(
        self, call: Any, timeout: float
    ) -> tuple[ToolResponse | BaseException, float]:
        """Await one tool under its timeout; a failure becomes a value, never an exception."""
        try:
            outcome: ToolResponse | BaseException = await within(timeout, call)
        except Exception as exc:
            outcome = exc
        return outcome, self.clock.monotonic()

    def _decide(self, run: _Run, slot: _Slot, observation: ToolObservation) -> Decision:
        """The policy's decision, with the run-level rules the table alone cannot express."""
        kind = observation.kind
        decision = self.policy.decision_for(kind)
        tool = slot.call.name
        if kind == "invalid_arguments":
            streak = run.invalid_streak.get(tool, 0) + 1
            run.invalid_streak[tool] = streak
            if streak > self.policy.corrections_per_tool:
                return Decision.ABSTAIN
        elif slot.validated:
            run.invalid_streak.pop(tool, None)
        if decision is Decision.RETRY:
            contract = slot.contract
            if slot.retries >= self.policy.max_retries or run.pending in _ENDING:
                return Decision.BACK_TO_MODEL
            if (
                contract is not None
                and contract.contract.side_effect == "write"
                and not contract.contract.suppresses_duplicates
            ):
                return Decision.BACK_TO_MODEL  # never re-send a write the destination may duplicate
        return decision

    # -- observe --------------------------------------------------------------------------------

    async def _observe(self, run: _Run) -> None:
        assert run.current is not None
        current, run.current = run.current, None
        slot, observation, decision = current.slot, current.observation, current.decision
        spec = run.spec
        if decision is Decision.RETRY:
            wait = retry_delay(
                self.policy, observation, slot.retries + 1, self.rng, self.clock.now()
            )
            now = self.clock.monotonic()
            blocked = bounds.blocks_dispatch(spec.limits, run.usage, now)
            if blocked is None and now + wait >= bounds.deadline(spec.limits, run.usage):
                blocked = Bound.DEADLINE  # the wait would outlast the deadline: never retry early
            if blocked is None:
                await self.clock.sleep(wait)
                run.waits.append(wait)
                blocked = bounds.blocks_dispatch(spec.limits, run.usage, self.clock.monotonic())
            if blocked is None:
                run.retry_slot = slot
                self._move(
                    run,
                    Trigger.RETRY,
                    tool=slot.call.name,
                    call_id=slot.call.id,
                    decision=decision.value,
                    wait_s=round(wait, 6),
                    operation_key=slot.operation_key,
                )
                return
            run.tripped = blocked
            decision = Decision.FINAL_ANSWER
            observation = BudgetExhausted(
                bound=blocked,
                call_id=slot.call.id,
                tool=slot.call.name,
                detail=f"retry needed a wait of {wait:.3f} s; {observation.kind} not retried",
            )
        if isinstance(observation, BudgetExhausted):
            run.tripped = run.tripped or observation.bound
        self._answer_call(run, slot, observation)
        if _PRECEDENCE[decision] > _PRECEDENCE[run.pending]:
            run.pending, run.pending_reason = decision, observation.kind
            if isinstance(observation, BudgetExhausted):
                run.pending_reason = observation.bound.value
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
        if final in _ENDING:
            run.reason = run.pending_reason or final.value
        self._move(
            run,
            decide(final),
            decision=final.value,
            reason=run.reason if final in _ENDING else None,
        )

    def _answer_call(self, run: _Run, slot: _Slot, observation: ToolObservation) -> None:
        """Give the call its one result in the transcript, and remember what it settled."""
        attempts_left = max(0, run.spec.limits.max_attempts - run.usage.attempts)
        body, is_error = model_view(observation, attempts_left)
        run.transcript.tool_result(
            call_id=slot.call.id,
            tool=slot.call.name,
            result_class=observation.kind,
            body=body,
            is_error=is_error,
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
        if observation.kind in _SETTLING and slot.validated:
            fingerprint = call_fingerprint(slot.call.name, slot.call.arguments)
            run.settled.setdefault(fingerprint, (slot.call.id, observation.kind))
