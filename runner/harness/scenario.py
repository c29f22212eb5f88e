"""Run a fixture in its world, on its fake clock with its scripted tools and model; check its
`expect` (`expectations.py`).

With a live model, real time is in the loop: the run keeps time on the system clock (the
fixture's clock start does not apply), so the deadline bounds the real requests and every wait
really happens; the simulated tools then answer at once (see `InstantLatency`).

A fixture's child-run tools (`children:`) are played by child runs of their own, each on an engine
sharing the run's store, clock and world's place, their scripted tools played in that place;
each child that ends is checked against its script's `expect`.

Also resumes a fixture run that was killed: everything needed (the fixture, policy, seed, where the
world's place lives, which model drove it) is in the run's header; the fixture and its world's
place are kept in the header's `annotations` (older headers had them as fields; they are read back
there). Which world plays the tools (`world.py`) is the caller's to say: the harness knows none.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..base.clock import Clock, FakeClock, InstantLatency, SystemClock
from ..base.errors import ResumeRefused, StoreCorrupt, StoreError
from ..core.confirm import ApprovalSecret
from ..core.policy import Policy
from ..core.stored_policy import stored_policy
from ..engine.children import ChildRun
from ..engine.engine import Engine
from ..engine.handle import RunHandle
from ..models.base import ModelAdapter
from ..models.live import model_for_resume
from ..models.scripted import ScriptedModel
from ..record.spec import RunResult, RunSpec
from ..record.trace import Durability, RunHeader
from ..store.base import Store
from ..tools.children import children_of, lookup_name
from ..tools.contracts import ContractSet
from ..tools.invocation import Principal
from ..tools.mcp import McpConfig, McpTools, with_recorded
from ..tools.mcp.pinning import recorded_pin
from ..tools.retrieval import RetrieverFactory
from ..tools.toolbox import FirstOf, FunctionTools, ToolBox
from .expectations import check_expectations
from .fixtures import Expect, Fixture
from .world import ScriptedTools, Stage, World


@dataclass(slots=True, kw_only=True)
class ScenarioRun:
    fixture: Fixture
    result: RunResult
    failures: list[str]
    environment: ScriptedTools
    holds: int | None
    """What the run left in its world's place (`Stage.holds`; None: nothing to count)."""
    children: list[RunResult] = field(default_factory=list)
    """The child runs its child-run tools started that ended, in call order."""

    @property
    def passed(self) -> bool:
        return not self.failures


def spec_for(
    fixture: Fixture, seed: int | None, recorded: dict[str, Any] | None = None, *, world: World
) -> RunSpec:
    """The spec of a run of `fixture` in `world`; `recorded`: where its place is (the header's)."""
    return RunSpec(
        task=fixture.task,
        tenant=fixture.tenant,
        principal=Principal(id=fixture.principal.id, scopes=frozenset(fixture.principal.scopes)),
        tools=tuple(fixture.tools),
        limits=fixture.budget,
        credentials=world.credentials(fixture),
        context={"task": fixture.constraints},
        name=fixture.name,
        seed=seed,
        system_prompt=world.system_prompt,
        required_evidence=tuple(fixture.required_evidence),
        price=fixture.price,  # None: the scripted model's configured price (or a live model's)
        tool_retrieval=fixture.retrieval,
        annotations={
            "fixture": fixture.model_dump(mode="json", exclude_unset=True),
            "world": recorded or {},
        },
    )


def stored_fixture(header: RunHeader) -> dict[str, Any] | None:
    """The fixture document a stored run was started from (None: not a fixture run)."""
    document = header.annotations.get("fixture")
    return document if isinstance(document, dict) else None


def stored_world(header: RunHeader) -> dict[str, Any]:
    """Where a stored fixture run's world's place is (`World.stage`'s record, e.g.
    `supplier_db`)."""
    world = header.annotations.get("world")
    return world if isinstance(world, dict) else {}


def run_fixture(
    fixture: Fixture,
    contracts: ContractSet,
    store: Store,
    *,
    world: World,
    seed: int = 0,
    policy: Policy | None = None,
    world_dir: Path | None = None,
    model: ModelAdapter | None = None,
    retrievers: Mapping[str, RetrieverFactory] | None = None,
    mcp: McpTools | None = None,
    run_id: str | None = None,
    durability: Durability = "transition",
    started: Callable[[RunHandle], None] | None = None,
) -> ScenarioRun:
    """Run one fixture in `world` from a clean state (fresh clock, script and world's place).

    `model` plans instead of the fixture's script (a live model); the tools stay simulated.
    `retrievers`: the tool retrievers its `retrieval` may name (default: the engine's).
    `mcp`: MCP servers' pinned tools, called for real (the pin is recorded in the header).
    `run_id`: the id minted when the run was queued (default: a new one).
    `started`: told the run's handle once its header is stored (to cancel it from elsewhere).
    """
    stage, recorded = world.stage(fixture, world_dir)
    spec = spec_for(fixture, seed, recorded, world=world)
    if fixture.approval is not None:  # the fixture's approval rules are part of its policy
        policy = (policy or Policy()).model_copy(update={"approval": fixture.approval.rules})
    if mcp is not None:
        spec = mcp.pinned_spec(spec)
    return _play(
        fixture,
        contracts=contracts,
        store=store,
        stage=stage,
        policy=policy,
        seed=seed,
        consumed={},
        drive=lambda engine, scripted: _drive_started(
            engine, spec, model or scripted, run_id, started
        ),
        live=model is not None,
        retrievers=retrievers,
        mcp=mcp,
        durability=durability,
        system_prompt=spec.system_prompt,
    )


async def _drive_started(
    engine: Engine,
    spec: RunSpec,
    model: ModelAdapter,
    run_id: str | None,
    started: Callable[[RunHandle], None] | None,
) -> RunResult:
    if started is None:
        return await engine.run(spec, model, run_id=run_id)
    handle = engine.start(spec, model, run_id=run_id)
    started(handle)
    return await handle.result()


def resume_fixture(
    run_id: str,
    contracts: ContractSet,
    store: Store,
    *,
    world: World,
    model: ModelAdapter | None = None,
    store_dir: Path | None = None,
    mcp: McpConfig | None = None,
    durability: Durability | None = None,
    started: Callable[[RunHandle], None] | None = None,
) -> ScenarioRun:
    """Continue a killed fixture run from its store (and its place in `world`).

    It goes on with the model its header names (the script, or a live model rebuilt from the
    record), or `model` if that is the same one; `store_dir` (the store file's folder) anchors
    world paths recorded by older runners. Raises `ResumeRefused` when either cannot be had.
    A run that used MCP servers goes on with the tools its header pinned, on the servers `mcp`
    says how to reach (never re-listed). `started`: as for `run_fixture`. `durability`: how the
    run commits from here on (default: as it began, the engine's default for a run stored
    before the runner recorded it).
    """
    stored = _stored_run(
        run_id,
        store,
        world,
        model,
        store_dir,
        refusal="resume it where it runs, with Engine.resume (its own tools, model and limits)",
    )
    header, live = stored.header, stored.live
    tools, contracts, spec = _pinned_tools(
        run_id, header, mcp, contracts, stored.spec, verb="resume"
    )
    if durability is not None:  # said for this resume: over the mode the run began in
        spec = dataclasses.replace(spec, durability=durability)
    return stored.play(
        contracts=contracts,
        store=store,
        drive=lambda engine, scripted: engine.resume(
            run_id, spec, live or scripted, started=started
        ),
        mcp=tools,
        continuation=header.continues is not None,
    )


@dataclass(frozen=True, slots=True)
class _StoredRun:
    """What resuming or continuing a stored fixture run starts from."""

    header: RunHeader
    fixture: Fixture
    policy: Policy
    live: ModelAdapter | None
    """The live model that planned it (None: its script)."""
    stage: Stage
    consumed: Counter[str]
    """The scripted outcomes each tool has already answered."""
    spec: RunSpec

    def play(
        self,
        *,
        contracts: ContractSet,
        store: Store,
        drive: Callable[[Engine, ScriptedModel], Coroutine[Any, Any, RunResult]],
        mcp: McpTools | None,
        continuation: bool,
    ) -> ScenarioRun:
        """Drive the stored run on in its fixture's world: its place, policy, seed and the
        outcomes already consumed; a live model goes on in real time, as the run began."""
        return _play(
            self.fixture,
            contracts=contracts,
            store=store,
            stage=self.stage,
            policy=self.policy,
            seed=self.header.seed,
            consumed=self.consumed,
            drive=drive,
            live=self.live is not None,
            mcp=mcp,
            continuation=continuation,
            system_prompt=self.spec.system_prompt,
        )


def _stored_run(
    run_id: str,
    store: Store,
    world: World,
    model: ModelAdapter | None,
    store_dir: Path | None,
    *,
    refusal: str,
    policy: Policy | None = None,
) -> _StoredRun:
    """A stored fixture run, read back: its fixture and policy (`policy` instead, if given), its
    model, its place in `world` reopened, its spec. `refusal`: what to say of a run that was
    not started from a fixture."""
    header = store.header(run_id)
    if header is None:
        raise StoreError(f"no run {run_id} in the store")
    document = stored_fixture(header)
    if document is None:
        raise StoreError(f"run {run_id} was not started from a fixture; {refusal}")
    try:
        fixture = Fixture.model_validate(document)
        policy = policy or stored_policy(header.policy)
    except ValidationError as exc:
        raise StoreCorrupt(
            f"run {run_id}: its stored fixture or policy no longer loads: {exc.errors()[0]['msg']}"
        ) from exc
    replied_live = any(turn.model_state is None for turn in store.turns(run_id))
    live = model_for_resume(run_id, header.model, model, replied_live=replied_live)
    recorded = stored_world(header)
    stage = world.restage(run_id, recorded, store_dir)
    # Nothing counted here: re-driving the run serves each recorded output again, and each one
    # served tells its scripted tool (`ScriptedTool.answered_from_record`), in dispatch order.
    consumed: Counter[str] = Counter()
    spec = spec_for(fixture, header.seed, recorded, world=world)
    return _StoredRun(header, fixture, policy, live, stage, consumed, spec)


def _pinned_tools(
    run_id: str,
    header: RunHeader,
    mcp: McpConfig | None,
    contracts: ContractSet,
    spec: RunSpec,
    *,
    verb: str,
) -> tuple[McpTools | None, ContractSet, RunSpec]:
    """The MCP tools a stored run pinned (None: it pinned none), with the contracts and spec that
    go with them; refused when the run pinned some and no config says how to reach them."""
    pin = recorded_pin(header.annotations)
    if pin is None:
        return None, contracts, spec
    if mcp is None:
        raise ResumeRefused(run_id, f"it called MCP servers: {verb} it with --mcp CONFIG")
    tools = McpTools(mcp, pin)
    return tools, with_recorded(contracts, header.annotations), tools.pinned_spec(spec)


def continue_fixture(
    run_id: str,
    contracts: ContractSet,
    store: Store,
    *,
    world: World,
    secret: ApprovalSecret,
    now: datetime,
    token: str | None = None,
    tenant: str | None = None,
    policy: Policy | None = None,
    store_dir: Path | None = None,
    mcp: McpConfig | None = None,
    model: ModelAdapter | None = None,
    started: Callable[[RunHandle], None] | None = None,
) -> ScenarioRun:
    """Continue a fixture run that ended waiting for approval, its proposals decided.

    `tenant`: continue under another tenant than the fixture's (which the token refuses);
    `policy`: the policy in force now, if not the run's (a token given under another is refused);
    `mcp`: how to reach the MCP servers of a run that pinned some (as for `resume_fixture`);
    `model`: the live model that planned the waiting run (default: rebuilt from its header, as
    `resume_fixture` does); a live run goes on with it, in real time, never with the script;
    `started`: told the continuation's handle (as for `run_fixture`).
    Raises `ApprovalRefused` (nothing stored or sent) when a decision cannot be used.
    """
    stored = _stored_run(
        run_id, store, world, model, store_dir, refusal="continue it with Engine", policy=policy
    )
    model, spec = stored.live, stored.spec
    if tenant is not None:
        spec = dataclasses.replace(spec, tenant=tenant)
    tools, contracts, spec = _pinned_tools(
        run_id, stored.header, mcp, contracts, spec, verb="continue"
    )
    return stored.play(
        contracts=contracts,
        store=store,
        drive=lambda engine, scripted: engine.continue_approved(
            run_id, spec, model or scripted, secret=secret, now=now, token=token, started=started
        ),
        mcp=tools,
        continuation=True,
    )


def _play(
    fixture: Fixture,
    *,
    contracts: ContractSet,
    store: Store,
    stage: Stage,
    policy: Policy | None,
    seed: int | None,
    consumed: Mapping[str, int],
    drive: Callable[[Engine, ScriptedModel], Coroutine[Any, Any, RunResult]],
    live: bool = False,
    retrievers: Mapping[str, RetrieverFactory] | None = None,
    mcp: McpTools | None = None,
    durability: Durability = "transition",
    continuation: bool = False,
    system_prompt: str | None = None,
) -> ScenarioRun:
    """Build the fixture's world (clock, scripted tools and model, child runs) and drive one run
    in it.

    `live`: a live model plans, so the run keeps real time (see the module docstring).
    `system_prompt`: what the children are told (the run's own is in its spec).
    """
    clock: Clock = SystemClock() if live else FakeClock(fixture.clock.start)
    tool_clock: Clock = InstantLatency(clock) if live else clock
    environment = stage.toolbox(fixture, tool_clock, consumed)
    mcp = mcp.on_clock(clock) if mcp is not None else None  # real I/O on a fake clock
    toolbox: ToolBox = environment if mcp is None else mcp.before(environment)

    def engine_on(tools: ToolBox) -> Engine:
        return Engine(
            contracts=contracts,
            toolbox=tools,
            store=store,
            clock=clock,
            policy=policy,
            durability=durability,
            retrievers=retrievers,
        )

    children = FunctionTools()
    for tool in fixture.children:
        child = fixture.child(tool)
        run = _child_run(tool, child, engine_on(stage.toolbox(child, tool_clock, {})))
        run.system_prompt = system_prompt
        children.register(tool, run)
        children.register(lookup_name(tool), run.lookup)
    engine = engine_on(FirstOf(children, toolbox) if fixture.children else toolbox)
    try:
        with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
            try:
                scripted = ScriptedModel(fixture.model, price=fixture.price)
                result = runner.run(drive(engine, scripted))
            finally:
                if mcp is not None:  # its connections live on this run's loop
                    runner.run(mcp.aclose())
        expect = fixture.expect
        if continuation:  # what the run comes to after the decision
            expect = fixture.approval.expect if fixture.approval is not None else None
        outcome = _scenario(fixture, result, environment, stage.holds(), expect)
        if fixture.children:
            _check_children(outcome, store)
        return outcome
    finally:
        stage.close()


def _child_run(tool: str, child: Fixture, engine: Engine) -> ChildRun:
    """The child-run tool `tool`, each call a run of `child` (its task made from the call's
    arguments, a fresh scripted model each) on `engine`."""

    def task(arguments: Mapping[str, Any]) -> str:
        return child.task.format(**arguments)

    def model() -> ScriptedModel:
        return ScriptedModel(child.model, price=child.price)

    return ChildRun(
        name=tool, engine=engine, task=task, tools=child.tools, model=model, limits=child.budget
    )


def _scenario(
    fixture: Fixture,
    result: RunResult,
    environment: ScriptedTools,
    holds: int | None,
    expect: Expect | None,
) -> ScenarioRun:
    failures = check_expectations(expect, result, holds) if expect else []
    return ScenarioRun(
        fixture=fixture, result=result, failures=failures, environment=environment, holds=holds
    )


def _check_children(outcome: ScenarioRun, store: Store) -> None:
    """Find the child runs the run started (linked by its outputs) and check each that ended
    against its script's `expect`; a tool whose script expects something and started no child
    is a failure too."""
    started: set[str] = set()
    for _, run_id in children_of(store.outputs(outcome.result.run_id)):
        header, summary = store.header(run_id), store.summary(run_id)
        if header is None or summary is None:
            continue
        transitions = store.transitions(run_id)
        child = RunResult.of(summary, name=header.name, transitions=transitions, evidence=[])
        outcome.children.append(child)
        parent = header.annotations.get("parent")
        tool = parent.get("tool") if isinstance(parent, dict) else None
        script = outcome.fixture.children.get(tool) if isinstance(tool, str) else None
        if script is None or script.expect is None:
            continue
        started.add(str(tool))
        found = check_expectations(script.expect, child, None)
        outcome.failures.extend(f"child {child.name} {failure}" for failure in found)
    for tool, script in outcome.fixture.children.items():
        if script.expect is not None and tool not in started:
            outcome.failures.append(f"child of {tool}: no child run ended")
