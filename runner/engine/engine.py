"""Drive one run: ask the machine, act through `Effects`, record. The async core of the runner.

The loop is `plan -> call -> observe -> ...` until a terminal state. `plan` asks the model; `call`
admits (counting the attempt first), validates, authorizes and dispatches a batch of calls
concurrently, then classifies their outcomes one at a time in call order; `observe` applies the
policy's decision. Every move goes through the shared machine and leaves one `TransitionRecord`.
Bounds are checked at the top of every iteration and again before every sleep and dispatch; when one
is spent, outstanding calls are answered with `budget_exhausted`, the model gets one tool-free
request, and the run ends `abstain` with the bound as its reason. A write whose outcome is unknown
is looked up by its operation key before anything else; if that cannot settle it, `unknown`.

This module holds the public `Engine` (run, start, resume, continue_approved, replay); a run's loop
is `_driving.py`, the checks before a run is stored `_run_checks.py`, its price and tool retriever
`_run_resources.py`, building a run's state and header, and its summary at the end, `_run_ends.py`.
The states' work lives in plain functions, `_planning.plan` and `_acting.call`/`observe`, each
given the engine's `Core` (`_core.py`: its settings and the one way to make a move) and the run's
state. The one decision on each observation is `decide.decide`.
"""

from __future__ import annotations

import asyncio
import random
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from ..base.clock import CatchUp, Clock
from ..base.errors import ConfigError, OutsideRecording, ReplayDivergence, StoreError
from ..base.tracing import SpanSink
from ..core.confirm import ApprovalSecret
from ..core.machine import detach
from ..core.policy import Policy
from ..models.base import ModelAdapter
from ..models.identity import ModelIdentity, identity_of
from ..models.pricing import PriceTable
from ..record.recording import RecordedOutput, RecordedTurn
from ..record.redaction import Redactor
from ..record.spec import (
    DEFAULT_SYSTEM_PROMPT,
    RunResult,
    RunSpec,
    check_render_limit,
    check_text,
)
from ..record.trace import Durability, RunHeader, TransitionRecord
from ..store.adapters import as_async, is_async_store
from ..store.base import AsyncStore, Store
from ..store.step_commits import StepCommits
from ..store.writebehind import PendingWrites
from ..tools.contracts import ContractSet, contract_digests
from ..tools.retrieval import DEFAULT_RETRIEVERS, RetrieverFactory
from ..tools.toolbox import ToolBox
from ._continuation import begin_continuation, inputs_then
from ._core import Core, brief
from ._driving import drive
from ._ownership import (
    Held,
    Renewed,
    drop_renewed,
    holds_of,
    let_go,
    let_go_renewed,
    renewed_holds_of,
    stays_ended,
    take,
    take_renewed,
)
from ._replay_effects import ReplayEffects, recorded_horizon
from ._run_checks import as_resumed, check_durability, check_start
from ._run_ends import header, new_run, run_secrets
from ._run_resources import Indexes, priced, retriever_for
from ._state import RunState, Runtime
from .effects import Effects, LiveEffects
from .handle import RunHandle


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
        store: Store | AsyncStore,
        clock: Clock,
        policy: Policy | None = None,
        rng: random.Random | None = None,
        retry_horizon: timedelta = timedelta(hours=24),
        render_limit: int = 4000,
        spans: Sequence[SpanSink] = (),
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        durability: Durability = "transition",
        prices: PriceTable | None = None,
        retrievers: Mapping[str, RetrieverFactory] | None = None,
    ) -> None:
        """`render_limit`: the most characters of one tool result the model is shown (the full
        output is stored). `spans`: where per-call spans go besides structlog (e.g. `OtelSpans`).
        `system_prompt`: what the model is told first, unless a run's spec gives its own.
        `store`: a synchronous `Store` (memory, SQLite), written in place, or an `AsyncStore`
        (PostgreSQL), awaited at each phase of a run (store/writebehind.py).
        `durability`: how often a run commits on a synchronous store, unless its spec says
        (`runner.record.spec.Durability`); an `AsyncStore` commits what a run wrote at each phase.
        `prices`: where a run's price is found when neither its spec nor its adapter gives one
        (default: genai-prices when installed, see `runner.models.pricing`). `retrievers`: the tool
        retrievers a spec's `tool_retrieval` may name, by name (default: `bm25`)."""
        check_durability(durability, "Engine(durability=...)")
        check_render_limit(render_limit, "Engine(render_limit=...)")
        if not timedelta(0) < retry_horizon <= MAX_RETRY_HORIZON:  # a key's expiry must fit
            raise ConfigError(
                f"Engine(retry_horizon=...) is more than 0 and at most "
                f"{MAX_RETRY_HORIZON.days} days, not {retry_horizon}"
            )
        check_text(system_prompt, "Engine(system_prompt=...)")
        if rng is not None:
            warnings.warn(
                "Engine(rng=...) is ignored: each run draws from its own random.Random, seeded "
                "with RunSpec.seed (or a seed drawn and recorded in its header)",
                DeprecationWarning,
                stacklevel=2,
            )
        self.system_prompt = system_prompt
        self.durability: Durability = durability
        self.prices = prices
        self.retrievers = dict(retrievers) if retrievers is not None else dict(DEFAULT_RETRIEVERS)
        self._indexes: Indexes = {}
        """Retrievers built so far, by retriever and catalogue: one index per catalogue."""
        self._policy_json = (policy or Policy()).model_dump(mode="json")
        pending = PendingWrites(store) if is_async_store(store) else None
        # holds only the runs in `step` durability (a sync store; PendingWrites batches its own)
        self._commits = StepCommits(store) if pending is None else None  # type: ignore[arg-type]
        self._reader = as_async(store)
        self._holds = holds_of(store)
        """Where a run's lease is taken for each drive, in place (SQLite, memory)."""
        self._held: dict[str, Held] = {}
        """The leases of the runs this engine drives now (SQLite, memory)."""
        self._renewed = renewed_holds_of(store) if pending is not None else None
        """Where a run's lease is taken for each drive and renewed while it drives (PostgreSQL):
        awaited, so when the run is driven (`_drive`), before its header is queued."""
        self.runtime = Runtime(
            contracts=contracts,
            toolbox=toolbox,
            store=pending or self._commits,  # type: ignore[arg-type]  # a sync Store when not pending
            pending=pending,
            clock=clock,
            policy=policy or Policy(),
            retry_horizon=retry_horizon,
        )
        self._core = Core(self.runtime, render_limit=render_limit, spans=tuple(spans))

    @property
    def clock(self) -> Clock:
        return self.runtime.clock

    def run_sync(self, spec: RunSpec, model: ModelAdapter) -> RunResult:
        """Run to completion from synchronous code, on the clock's event loop."""
        outside_a_loop("Engine.run_sync", "await engine.run(...) or use engine.start(...)")
        with asyncio.Runner(loop_factory=self.clock.loop_factory) as runner:
            return runner.run(self.run(spec, model))

    async def run(
        self, spec: RunSpec, model: ModelAdapter, *, run_id: str | None = None
    ) -> RunResult:
        """Drive one task to exactly one terminal state and return its result. `run_id`: one
        minted beforehand (a queued run's, or a child run's, derived from its parent's call so a
        resumed parent finds it); by default a new UUID. On a store that keeps leases in place
        (SQLite, memory), or renews them (PostgreSQL), the run's lease is held while it is driven
        (`_ownership.py`): `RunDriven` while another driver holds the given `run_id`."""
        run, _, header = self._begin_live(spec, model, run_id, asyncio.get_running_loop())
        return await self._drive(run, header=header)

    def start(self, spec: RunSpec, model: ModelAdapter, *, run_id: str | None = None) -> RunHandle:
        """Start a run on the running event loop and return its handle at once (`run_id`: as
        for `run`).

        The run's header is stored before this returns, so `handle.run_id` can be looked up
        (`runner.run_status`) straight away; on an awaited store (PostgreSQL) it is queued,
        and stored once the run's lease is taken in its task (a refusal, `RunDriven`, is then
        the handle's result). Call it from a coroutine on this engine's clock's loop (any loop
        for `SystemClock`).
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise ConfigError("Engine.start needs a running event loop (use run_sync)") from None
        run, effects, header = self._begin_live(spec, model, run_id, loop)
        run_id = run.setup.run_id
        task = loop.create_task(self._drive(run, header=header), name=f"runner run {run_id}")
        held = self._held.get(run_id)
        task.add_done_callback(lambda _: self._let_go(run_id, held))  # also if it never began
        effects.run_task = run.setup.cancel.task = task
        effects.cancellation = run.setup.cancel
        return RunHandle(run_id=run_id, task=task, cancellation=run.setup.cancel)

    async def resume(
        self,
        run_id: str,
        spec: RunSpec,
        model: ModelAdapter,
        *,
        started: Callable[[RunHandle], None] | None = None,
    ) -> RunResult:
        """Continue a stored run that never finished: re-drive it from its recorded inputs (on
        this engine's clock: a `FakeClock` must start where the run started; on a real one the
        recorded waits take no time, see `clock.CatchUp`), then go on live.

        Writes that were pending when it stopped are answered as lost and reconciled by key
        before anything else; nothing already done is done again. The model is told the system
        prompt recorded when the run began, unless `spec` gives one; `spec.limits`, tenant,
        principal, scopes, task, tools and context, and this engine's policy, must be the run's
        own (`ResumeRefused` otherwise, `_run_checks.check_same_run`). A run another driver holds
        (a process, or a task of this one) is refused with `RunDriven` (`_ownership.py`), before
        anything is read or sent. `started`: told the run's handle before it is driven (to
        cancel it from elsewhere, as `start`'s).
        """
        if spec.durability is not None:
            check_durability(spec.durability, "RunSpec.durability")
        store = self._reader
        stored = await store.header(run_id)
        if stored is None:
            raise StoreError(f"no run {run_id} in the store")
        if await store.summary(run_id) is not None:
            raise StoreError(f"run {run_id} already ended")
        spec = as_resumed(spec, stored, self.runtime.policy, self.runtime.contracts)
        if self._renewed is not None:
            return await self._resume_renewed(run_id, spec, model, stored, started)
        self._own(run_id, spec)  # nothing read from here on moves under another driver
        try:
            return await self._resume_held(run_id, spec, model, stored, started)
        except BaseException:
            self._let_go(run_id)
            raise

    async def _resume_renewed(
        self,
        run_id: str,
        spec: RunSpec,
        model: ModelAdapter,
        stored: RunHeader,
        started: Callable[[RunHandle], None] | None,
    ) -> RunResult:
        """`resume` under a renewed lease (PostgreSQL), taken before anything is read."""
        assert self._renewed is not None
        renewed = await take_renewed(self._renewed, run_id)
        try:
            return await self._resume_held(run_id, spec, model, stored, started, renewed=renewed)
        except BaseException:
            if renewed is not None and not renewed.driven:  # else the drive lets go itself
                await let_go_renewed(renewed)
            raise

    async def _resume_held(
        self,
        run_id: str,
        spec: RunSpec,
        model: ModelAdapter,
        stored: RunHeader,
        started: Callable[[RunHandle], None] | None,
        *,
        renewed: Renewed | None = None,
    ) -> RunResult:
        store = self._reader
        if await store.summary(run_id) is not None:  # ended by the driver just gone
            raise StoreError(f"run {run_id} already ended")
        outputs = await store.outputs(run_id)
        answered = {output.ordinal for output in outputs}
        operations = await store.operations(run_id)
        in_flight = {op.dispatch for op in operations if op.dispatch not in answered}
        turns, record_as = await store.turns(run_id), None
        if stored.continues is not None:  # then what it had not yet re-driven of the waiting run
            waited = str(stored.continues.get("run_id"))
            turns, outputs = inputs_then(
                turns, await store.turns(waited), outputs, await store.outputs(waited)
            )
            record_as = run_id
        known = await store.transitions(run_id)
        clock = self._catching_up(turns, outputs, known)
        began = clock.monotonic()
        live = LiveEffects(run_id, model, clock, began, Redactor(run_secrets(spec, model)))
        effects = ReplayEffects(
            turns, outputs, clock, began, live=live, in_flight=in_flight, record_as=record_as
        )
        # It began when its header says: the times its record derives from (a Retry-After
        # date read at an outcome's recorded end) are read from there, on any clock.
        run = self._new_run(
            run_id, spec, effects, began, known=known, clock=clock, started_wall=stored.started_at
        )
        if self.runtime.pending is not None:  # claims made again while re-driving settle here
            for op in operations:
                self.runtime.pending.adopt(op.key, run_id)
        self._hold(run)
        return await self._drive_handed(run, live, started, renewed=renewed)

    async def _drive_handed(
        self,
        run: RunState,
        live: LiveEffects,
        started: Callable[[RunHandle], None] | None,
        *,
        header: RunHeader | None = None,
        renewed: Renewed | None = None,
    ) -> RunResult:
        """Drive `run`; with `started`, in a task of its own whose handle `started` is given
        (`header`, `renewed`: as for `_drive`)."""
        if started is None:
            return await self._drive(run, header=header, renewed=renewed)
        run_id = run.setup.run_id
        driving = self._drive(run, header=header, renewed=renewed)
        task = asyncio.get_running_loop().create_task(driving, name=f"runner run {run_id}")
        held = self._held.get(run_id)
        task.add_done_callback(lambda _: self._let_go(run_id, held))  # also if it never began
        if renewed is not None:  # the task's: its drive lets go of it, or this if it never began
            renewed.driven = True
            task.add_done_callback(lambda _: drop_renewed(renewed))
        live.run_task = run.setup.cancel.task = task
        live.cancellation = run.setup.cancel
        handle = RunHandle(run_id=run_id, task=task, cancellation=run.setup.cancel)
        started(handle)
        return await handle.result()

    async def continue_approved(
        self,
        run_id: str,
        spec: RunSpec,
        model: ModelAdapter,
        *,
        secret: ApprovalSecret,
        now: datetime,
        token: str | None = None,
        started: Callable[[RunHandle], None] | None = None,
    ) -> RunResult:
        """Continue a run that ended waiting for approval, once its proposals are decided.

        Every approval's confirm token (`token`, or the one the ledger holds) is checked against
        its proposal, `spec.tenant` and the policy now in force, at `now` (the approver's clock,
        not the run's); a refusal raises `ApprovalRefused` and nothing is stored or sent. The
        continuation is a new run (its header names `run_id` in `continues`) that re-drives the
        waiting run's recorded inputs on this engine's clock (as `resume` does), then goes on
        live: an approved write is sent once, under the key it was
        proposed with; a denied one ends the run `abstain`. Asked again for the same decisions, it
        resumes (or reports) the continuation already made. `started`: as for `resume`.
        """
        new_id, continuing = await begin_continuation(
            self.runtime, self._reader, run_id, spec, secret=secret, now=now, token=token
        )
        if continuing is None:  # made already (asked again after a crash): go on with it
            return await self.resume(new_id, spec, model, started=started)
        check_start(
            self.runtime, continuing, asyncio.get_running_loop(), self.retrievers, continuing=True
        )
        turns, outputs = await self._reader.turns(run_id), await self._reader.outputs(run_id)
        clock = self._catching_up(turns, outputs, [])
        began = clock.monotonic()
        redactor = Redactor(run_secrets(continuing, model))
        live = LiveEffects(new_id, model, clock, began, redactor)
        effects = ReplayEffects(turns, outputs, clock, began, live=live, record_as=new_id)
        run, header = self._begin(new_id, continuing, effects, began, model, clock=clock)
        return await self._drive_handed(run, live, started, header=header)

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
            return ReplayedRun(records=run.moves.records, result=None, outside=exc.what)
        records = run.moves.records
        if expected is not None and len(records) != len(expected):
            seq = min(len(records), len(expected)) + 1
            got = brief(records[seq - 1]) if seq <= len(records) else "the run ended"
            want = brief(expected[seq - 1]) if seq <= len(expected) else "the run ended"
            raise ReplayDivergence(f"seq {seq}", want, got)
        unserved = effects.unserved() if expected is not None else []
        if unserved:
            raise ReplayDivergence(
                "the end of the run", f"{', '.join(unserved)} used", "the run ended without them"
            )
        return ReplayedRun(records=records, result=result, stood_in=effects.stood_in)

    # -- lifecycle ------------------------------------------------------------------------------

    def _catching_up(
        self,
        turns: Sequence[RecordedTurn],
        outputs: Sequence[RecordedOutput],
        known: Sequence[TransitionRecord],
    ) -> Clock:
        """The clock a re-driven run keeps time on: the engine's, its recorded waits skipped
        (`CatchUp`), so a real clock does not sleep through the recorded run again. A clock with
        a virtual loop (`FakeClock`) re-drives at once already and is kept as it is: its time
        (wall stamps included) then moves through the recorded waits, as an exact replay's does,
        so what a run derives from the wall clock (a tool's Retry-After date) comes out the same.
        """
        clock = self.clock
        if clock.loop_factory is not None:
            return clock
        return CatchUp(clock, recorded_horizon(turns, outputs, known))

    def _hold(self, run: RunState) -> None:
        """A run in `step` durability: its transitions are committed a step at a time."""
        if self._commits is not None and (run.setup.spec.durability or self.durability) == "step":
            self._commits.hold(run.setup.run_id)

    def _begin_live(
        self,
        spec: RunSpec,
        model: ModelAdapter,
        run_id: str | None,
        loop: asyncio.AbstractEventLoop,
    ) -> tuple[RunState, LiveEffects, RunHeader | None]:
        """A new live run (`run`, `start`): priced, checked, stored and held; not yet driven
        (its header, when it is stored as it is driven: `_begin`)."""
        spec = self._priced(spec, model)
        check_start(self.runtime, spec, loop, self.retrievers, prices=self.prices, model=model)
        if run_id is not None:
            check_text(run_id, "run_id")
        run_id = run_id or str(uuid.uuid4())
        started = self.clock.monotonic()
        redactor = Redactor(run_secrets(spec, model))
        effects = LiveEffects(run_id, model, self.clock, started, redactor)
        run, header = self._begin(run_id, spec, effects, started, model)
        return run, effects, header

    def _begin(
        self,
        run_id: str,
        spec: RunSpec,
        effects: Effects,
        started: float,
        model: ModelAdapter,
        *,
        clock: Clock | None = None,
    ) -> tuple[RunState, RunHeader | None]:
        """A run's state, its lease taken and its header stored (nothing is left attached or
        held if that fails), held. On a store whose leases are renewed (PostgreSQL) the lease is
        taken, and then the header queued, when the run is driven: its header is returned for
        `_drive` (None: stored already)."""
        self._own(run_id, spec)
        try:
            run = self._new_run(run_id, spec, effects, started, known=[], clock=clock)
        except BaseException:
            self._let_go(run_id)
            raise
        if self._renewed is not None:
            return run, self._header(run, identity_of(model))
        try:
            self.runtime.store.begin_run(self._header(run, identity_of(model)))
        except BaseException:
            detach(run.moves.lifecycle)
            self._let_go(run_id)
            raise
        self._hold(run)
        return run, None

    def _own(self, run_id: str, spec: RunSpec) -> None:
        """Take the run's lease for this drive (`RunDriven` while another driver holds it)."""
        if self._holds is not None:
            held = take(self._holds, run_id, spec.limits)
            if held is not None:
                self._held[run_id] = held

    def _let_go(self, run_id: str, held: Held | None = None, *, ended: bool = False) -> None:
        """End the hold of the drive of `run_id` now going (or of `held`: its task's, once
        done, which a later drive's hold is not), unless ended already (`ownership.let_go`)."""
        if held is None or self._held.get(run_id) is held:
            held = self._held.pop(run_id, None)
        let_go(held, ended=ended)

    def _priced(self, spec: RunSpec, model: ModelAdapter) -> RunSpec:
        """`spec` with the run's price: its own, the adapter's declared one, or the table's."""
        return priced(spec, model, self.prices, self.clock)

    def _prompt(self, spec: RunSpec) -> str:
        return spec.system_prompt if spec.system_prompt is not None else self.system_prompt

    def _new_run(
        self,
        run_id: str,
        spec: RunSpec,
        effects: Effects,
        started: float,
        *,
        known: list[TransitionRecord],
        clock: Clock | None = None,
        started_wall: datetime | None = None,
    ) -> RunState:
        return new_run(
            self.runtime,
            run_id=run_id,
            spec=spec,
            effects=effects,
            started=started,
            known=known,
            system_prompt=self._prompt(spec),
            render_limit=self._core.render_limit,
            choose_retriever=lambda offered: retriever_for(
                spec, offered, self.retrievers, self._indexes
            ),
            clock=clock,
            started_wall=started_wall,
        )

    def _header(self, run: RunState, model: ModelIdentity | None = None) -> RunHeader:
        spec = run.setup.spec
        return header(
            run,
            policy=self._policy_json,
            system_prompt=self._prompt(spec),
            model=model,
            durability=spec.durability or self.durability,
            contracts=contract_digests(self.runtime.contracts, spec.tools),
        )

    async def _drive(
        self, run: RunState, *, header: RunHeader | None = None, renewed: Renewed | None = None
    ) -> RunResult:
        """Drive `run` to its end. On a store whose leases are renewed (PostgreSQL): `header`,
        a new run's, stored once its lease is taken here; `renewed`, a resumed run's lease;
        let go of when the drive stops, however it stops."""
        if self._renewed is not None:
            return await self._drive_renewed(run, header, renewed)
        try:
            result = await drive(self._core, self._commits, run)
        except BaseException:
            self._let_go(run.setup.run_id)
            raise
        self._let_go(run.setup.run_id, ended=stays_ended(result.terminal.value, result.reason))
        return result

    async def _drive_renewed(
        self, run: RunState, header: RunHeader | None, renewed: Renewed | None
    ) -> RunResult:
        assert self._renewed is not None
        if header is not None:  # nothing of it is queued before its lease is taken
            try:
                renewed = await take_renewed(self._renewed, header.run_id)
            except BaseException:
                detach(run.moves.lifecycle)
                raise
            self.runtime.store.begin_run(header)
        if renewed is not None:
            renewed.driven = True
        try:
            result = await drive(self._core, self._commits, run)
        except BaseException:
            await let_go_renewed(renewed)
            raise
        await let_go_renewed(renewed, ended=stays_ended(result.terminal.value, result.reason))
        return result


MAX_RETRY_HORIZON: Final = timedelta(days=3650)
"""The longest a write's operation key may stay claimed (`Engine(retry_horizon=...)`): its
expiry is a stamp plus this, and must fit the dates Python holds (see `clock.LATEST_START`)."""


def outside_a_loop(call: str, instead: str) -> None:
    """A sync wrapper called from a running loop: say what to await instead (asyncio would
    raise a bare RuntimeError and warn of a coroutine never awaited)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise ConfigError(f"{call} cannot run inside a running event loop: {instead}")
