"""Drive one run: ask the machine, act through `Effects`, record. The async core of the runner.

The loop is `plan -> call -> observe -> ...` until a terminal state. `plan` asks the model; `call`
admits (counting the attempt first), validates, authorizes and dispatches a batch of calls
concurrently, then classifies their outcomes one at a time in call order; `observe` applies the
policy's decision. Every move goes through the shared machine and leaves one `TransitionRecord`.
Bounds are checked at the top of every iteration and again before every sleep and dispatch; when one
is spent, outstanding calls are answered with `budget_exhausted`, the model gets one tool-free
request, and the run ends `abstain` with the bound as its reason. A write whose outcome is unknown
is looked up by its operation key before anything else; if that cannot settle it, `unknown`.

This module holds the public `Engine` (run, resume, replay) and a run's lifecycle; the states'
work lives in `_planning.py` (plan) and `_acting.py` (call, observe), and `_core.py` holds the one
way to make a move.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import structlog
from pydantic_core import to_jsonable_python

from ._acting import Acting
from ._core import brief
from ._planning import SYSTEM_PROMPT, Planning
from ._state import RunState, Runtime
from .budget import Limits, Usage
from .clock import Clock
from .contracts import ContractSet
from .effects import Effects, LiveEffects, ReplayEffects
from .errors import OutsideRecording, ReplayDivergence, StoreError
from .machine import attach, detach
from .models.base import (
    ModelAdapter,
    ToolSpec,
)
from .models.identity import ModelIdentity, identity_of
from .policy import Policy
from .recording import RecordedOutput, RecordedTurn
from .redaction import Redactor
from .spec import RunResult, RunSpec
from .states import TERMINAL, State
from .store.base import Store
from .tools import ToolBox
from .trace import OperationSummary, RunHeader, RunSummary, TransitionRecord
from .tracing import SpanSink
from .transcript import SystemMessage, UserMessage


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


class Engine(Planning, Acting):
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

    def run_sync(self, spec: RunSpec, model: ModelAdapter) -> RunResult:
        """Run to completion from synchronous code, on the clock's event loop."""
        with asyncio.Runner(loop_factory=self.clock.loop_factory) as runner:
            return runner.run(self.run(spec, model))

    async def run(self, spec: RunSpec, model: ModelAdapter) -> RunResult:
        """Drive one task to exactly one terminal state and return its result."""
        run_id = str(uuid.uuid4())
        started = self.clock.monotonic()
        effects = LiveEffects(
            run_id, model, self.clock, started, Redactor(spec.credentials.values())
        )
        run = self._new_run(run_id, spec, effects, started, known=[])
        self.runtime.store.begin_run(self._header(run, identity_of(model)))
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
        live = LiveEffects(run_id, model, self.clock, started, Redactor(spec.credentials.values()))
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
        recorded_seconds: float | None = None,
    ) -> ReplayedRun:
        """Re-drive a recorded run with no live model or tool, on this engine's (fake) clock.

        With `expected` (an exact replay) every transition must equal the recorded one, or
        `ReplayDivergence` is raised. Without it (a counterfactual replay under another policy or
        budget) the run goes where the policy takes it, until it ends or needs an input the
        recording does not have. `recorded_seconds`: the recorded run's deadline, which tells a
        timeout the deadline cut (and a longer one might not have) from one that comes again.
        """
        started = self.clock.monotonic()
        effects = ReplayEffects(
            turns,
            outputs,
            self.clock,
            started,
            counterfactual=expected is None,
            recorded_seconds=recorded_seconds,
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
        unserved = effects.unserved() if expected is not None else []
        if unserved:
            raise ReplayDivergence(
                "the end of the run", f"{', '.join(unserved)} used", "the run ended without them"
            )
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

    def _header(self, run: RunState, model: ModelIdentity | None = None) -> RunHeader:
        spec = run.spec
        return RunHeader(
            run_id=run.run_id,
            name=spec.name,
            tenant=spec.tenant,
            principal=spec.principal.id,
            started_at=run.started_wall,  # the instant a replay's clock starts from
            task=spec.task,
            tools=list(spec.tools),
            scopes=sorted(spec.principal.scopes),
            context=to_jsonable_python(dict(spec.context)),
            limits=_limits_json(spec.limits),
            policy=self._policy_json,
            seed=spec.seed,
            fixture=spec.fixture,
            world=dict(spec.world),
            model=model,
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


@functools.lru_cache(maxsize=64)
def _limits_json(limits: Limits) -> dict[str, Any]:
    """Limits repeat from run to run (they are frozen, so hashable): dump each once."""
    dumped: dict[str, Any] = limits.model_dump(mode="json")
    return dumped
