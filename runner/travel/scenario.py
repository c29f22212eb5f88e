"""Run a fixture on its fake clock with its scripted tools and model; check its `expect`.

With a live model, real time is in the loop: the run keeps time on the system clock (the
fixture's clock start does not apply), so the deadline bounds the real requests and every wait
really happens; the simulated tools then answer at once (see `InstantLatency`).

Also resumes a fixture run that was killed: everything needed (the fixture, policy, seed, where the
supplier database lives, which model drove it) is in the run's header; the fixture and its world
are kept in the header's `annotations` (older headers had them as fields; they are read back there).
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..base.clock import Clock, FakeClock, InstantLatency, SystemClock
from ..base.errors import ResumeRefused, StoreCorrupt, StoreError
from ..core.confirm import ApprovalSecret
from ..core.policy import Policy
from ..core.states import State
from ..engine.engine import Engine
from ..engine.handle import RunHandle
from ..models.base import ModelAdapter
from ..models.identity import model_for_resume
from ..models.scripted import ScriptedModel
from ..record.spec import RunResult, RunSpec
from ..record.trace import Durability, RunHeader, states_visited
from ..store.base import Store
from ..tools.contracts import ContractSet
from ..tools.invocation import Principal
from ..tools.mcp import McpConfig, McpTools, with_recorded
from ..tools.mcp.pinning import recorded_pin
from ..tools.retrieval import RetrieverFactory
from .environment import HoldRoom, LookupHold, ScriptedEnvironment
from .fixtures import Expect, Fixture
from .prompt import SYSTEM_PROMPT
from .supplier import SupplierDatabase, has_schema, locate

SUPPLIER_TOOLS = frozenset({HoldRoom.name, LookupHold.name})


@dataclass(slots=True, kw_only=True)
class ScenarioRun:
    fixture: Fixture
    result: RunResult
    failures: list[str]
    environment: ScriptedEnvironment
    holds: int | None
    """Active holds in the supplier database at the end (None: the fixture has no supplier)."""

    @property
    def passed(self) -> bool:
        return not self.failures


def spec_for(fixture: Fixture, seed: int | None, world: dict[str, Any] | None = None) -> RunSpec:
    return RunSpec(
        task=fixture.task,
        tenant=fixture.tenant,
        principal=Principal(id=fixture.principal.id, scopes=frozenset(fixture.principal.scopes)),
        tools=tuple(fixture.tools),
        limits=fixture.budget,
        # The runtime's credential for the simulated suppliers; never shown to the model.
        credentials={"supplier_token": f"sim-{fixture.tenant}"},
        context={"task": fixture.constraints},
        name=fixture.name,
        seed=seed,
        system_prompt=SYSTEM_PROMPT,
        required_evidence=tuple(fixture.required_evidence),
        price=fixture.price,  # None: the scripted model's configured price (or a live model's)
        tool_retrieval=fixture.retrieval,
        annotations={
            "fixture": fixture.model_dump(mode="json", exclude_unset=True),
            "world": world or {},
        },
    )


def stored_fixture(header: RunHeader) -> dict[str, Any] | None:
    """The fixture document a stored run was started from (None: not a fixture run)."""
    document = header.annotations.get("fixture")
    return document if isinstance(document, dict) else None


def stored_world(header: RunHeader) -> dict[str, Any]:
    """Where a stored fixture run's simulated world lives (e.g. `supplier_db`)."""
    world = header.annotations.get("world")
    return world if isinstance(world, dict) else {}


def _open_supplier(fixture: Fixture, world_dir: Path | None) -> SupplierDatabase | None:
    if not SUPPLIER_TOOLS & set(fixture.tools):
        return None
    # Absolute: a resume from another working directory must find this very database.
    folder = (world_dir or Path(tempfile.mkdtemp(prefix="runner-world-"))).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return SupplierDatabase(folder / f"supplier-{uuid.uuid4().hex[:12]}.sqlite")


def run_fixture(
    fixture: Fixture,
    contracts: ContractSet,
    store: Store,
    *,
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
    """Run one fixture from a clean state (fresh clock, script and supplier database).

    `model` plans instead of the fixture's script (a live model); the tools stay simulated.
    `retrievers`: the tool retrievers its `retrieval` may name (default: the engine's).
    `mcp`: MCP servers' pinned tools, called for real (the pin is recorded in the header).
    `run_id`: the id minted when the run was queued (default: a new one).
    `started`: told the run's handle once its header is stored (to cancel it from elsewhere).
    """
    supplier = _open_supplier(fixture, world_dir)
    world = {"supplier_db": str(supplier.path)} if supplier is not None else {}
    spec = spec_for(fixture, seed, world)
    if fixture.approval is not None:  # the fixture's approval rules are part of its policy
        policy = (policy or Policy()).model_copy(update={"approval": fixture.approval.rules})
    if mcp is not None:
        spec = mcp.pinned_spec(spec)
    return _play(
        fixture,
        contracts=contracts,
        store=store,
        supplier=supplier,
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
    model: ModelAdapter | None = None,
    store_dir: Path | None = None,
    mcp: McpConfig | None = None,
    durability: Durability | None = None,
    started: Callable[[RunHandle], None] | None = None,
) -> ScenarioRun:
    """Continue a killed fixture run from its store (and its supplier database).

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
    supplier: SupplierDatabase | None
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
        """Drive the stored run on in its fixture's world: its supplier, policy, seed and the
        outcomes already consumed; a live model goes on in real time, as the run began."""
        return _play(
            self.fixture,
            contracts=contracts,
            store=store,
            supplier=self.supplier,
            policy=self.policy,
            seed=self.header.seed,
            consumed=self.consumed,
            drive=drive,
            live=self.live is not None,
            mcp=mcp,
            continuation=continuation,
        )


def _stored_run(
    run_id: str,
    store: Store,
    model: ModelAdapter | None,
    store_dir: Path | None,
    *,
    refusal: str,
    policy: Policy | None = None,
) -> _StoredRun:
    """A stored fixture run, read back: its fixture and policy (`policy` instead, if given), its
    model, its supplier database reopened, its spec. `refusal`: what to say of a run that was
    not started from a fixture."""
    header = store.header(run_id)
    if header is None:
        raise StoreError(f"no run {run_id} in the store")
    document = stored_fixture(header)
    if document is None:
        raise StoreError(f"run {run_id} was not started from a fixture; {refusal}")
    try:
        fixture = Fixture.model_validate(document)
        policy = policy or Policy.recorded(header.policy)
    except ValidationError as exc:
        raise StoreCorrupt(
            f"run {run_id}: its stored fixture or policy no longer loads: {exc.errors()[0]['msg']}"
        ) from exc
    replied_live = any(turn.model_state is None for turn in store.turns(run_id))
    live = model_for_resume(run_id, header.model, model, replied_live=replied_live)
    world = stored_world(header)
    supplier = _reopen_supplier(run_id, world.get("supplier_db"), store_dir)
    # Nothing counted here: re-driving the run serves each recorded output again, and each one
    # served tells its scripted tool (`ScriptedTool.answered_from_record`), in dispatch order.
    consumed: Counter[str] = Counter()
    spec = spec_for(fixture, header.seed, world)
    return _StoredRun(header, fixture, policy, live, supplier, consumed, spec)


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
        run_id, store, model, store_dir, refusal="continue it with Engine", policy=policy
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


def _reopen_supplier(
    run_id: str, recorded: str | None, store_dir: Path | None
) -> SupplierDatabase | None:
    """The run's own supplier database; a missing one is refused, never created empty."""
    if not recorded:
        return None
    path = locate(recorded, store_dir)
    if path is None:
        raise ResumeRefused(run_id, f"its supplier database {recorded} does not exist")
    if not has_schema(path):
        raise ResumeRefused(run_id, f"its supplier database {path} is empty (no schema)")
    return SupplierDatabase.open_existing(path)


def _play(
    fixture: Fixture,
    *,
    contracts: ContractSet,
    store: Store,
    supplier: SupplierDatabase | None,
    policy: Policy | None,
    seed: int | None,
    consumed: Mapping[str, int],
    drive: Callable[[Engine, ScriptedModel], Coroutine[Any, Any, RunResult]],
    live: bool = False,
    retrievers: Mapping[str, RetrieverFactory] | None = None,
    mcp: McpTools | None = None,
    durability: Durability = "transition",
    continuation: bool = False,
) -> ScenarioRun:
    """Build the fixture's world (clock, scripted tools and model) and drive one run in it.

    `live`: a live model plans, so the run keeps real time (see the module docstring).
    """
    clock: Clock = SystemClock() if live else FakeClock(fixture.clock.start)
    tool_clock: Clock = InstantLatency(clock) if live else clock
    environment = ScriptedEnvironment(
        fixture.environment, fixture.tools, tool_clock, supplier, consumed
    )
    mcp = mcp.on_clock(clock) if mcp is not None else None  # real I/O on a fake clock
    engine = Engine(
        contracts=contracts,
        toolbox=environment if mcp is None else mcp.before(environment),
        store=store,
        clock=clock,
        policy=policy,
        durability=durability,
        retrievers=retrievers,
    )
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
        return _scenario(fixture, result, environment, expect)
    finally:
        if supplier is not None:
            supplier.close()


def _scenario(
    fixture: Fixture, result: RunResult, environment: ScriptedEnvironment, expect: Expect | None
) -> ScenarioRun:
    supplier = environment.supplier
    holds = supplier.active_holds() if supplier is not None else None
    failures = check_expectations(expect, result, holds) if expect else []
    return ScenarioRun(
        fixture=fixture, result=result, failures=failures, environment=environment, holds=holds
    )


def preserved_key(result: RunResult) -> str | None:
    """The key a run ending `unknown` hands over (None otherwise)."""
    if result.terminal is not State.UNKNOWN or not result.transitions:
        return None
    key = result.transitions[-1].operation_key
    statuses = {op.key: op.status for op in result.operations}
    return key if key is not None and statuses.get(key) == "unknown" else None


def check_expectations(expect: Expect, result: RunResult, holds: int | None) -> list[str]:
    """Every way `result` differs from `expect`, as readable lines (empty: all met)."""
    failures: list[str] = []

    def compare(label: str, wanted: Any, got: Any) -> None:
        if wanted is not None and wanted != got:
            failures.append(f"{label}: expected {wanted!r}, got {got!r}")

    compare("terminal", expect.terminal.value, result.terminal.value)
    compare("reason", expect.reason, result.reason)
    compare("attempts", expect.attempts, result.attempts)
    compare("model_steps", expect.model_steps, result.model_steps)
    compare("holds", expect.holds, holds)
    if expect.cost_usd is not None:
        got = None if result.cost_usd is None else round(result.cost_usd, 9)
        compare("cost_usd", round(expect.cost_usd, 9), got)
    if expect.operation_key_preserved is not None:
        compare(
            "operation_key_preserved",
            expect.operation_key_preserved,
            preserved_key(result) is not None,
        )
    if expect.waits_s is not None:
        compare(
            "waits_s", [round(w, 3) for w in expect.waits_s], [round(w, 3) for w in result.waits_s]
        )
    if expect.transitions is not None:
        compare(
            "transitions",
            [s.value for s in expect.transitions],
            [s.value for s in states_visited(result.transitions)],  # both as plain names
        )
    for fragment in expect.answer_contains or ():
        if fragment not in (result.answer or ""):
            failures.append(f"answer: expected to contain {fragment!r}, got {result.answer!r}")
    return failures
