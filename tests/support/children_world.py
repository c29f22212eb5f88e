"""Parent-and-child scenarios (tests/data/children/*.yaml): a parent run whose tool
`research_trip` is a child run, each side scripted in the fixture format, on one fake clock and
one store."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from runner import Engine, FakeClock, Limits, ScriptedModel
from runner.engine.children import ChildRun
from runner.harness.expectations import check_expectations
from runner.harness.fixtures import Fixture
from runner.record.spec import RunResult
from runner.store.base import Store
from runner.tools.children import child_contracts, child_run_id, lookup_name
from runner.tools.contracts import ContractSet
from runner.tools.invocation import ToolImplementation
from runner.tools.toolbox import ToolBox
from runner.travel import load_travel_contracts
from runner.travel.environment import ScriptedEnvironment
from runner.travel.prompt import SYSTEM_PROMPT
from runner.travel.scenario import spec_for
from runner.travel.supplier import SupplierDatabase
from tests.support.paths import DATA

CHILD_TOOL = "research_trip"
FAMILIES = DATA / "children"


class Family(BaseModel):
    """A parent fixture and its child's: the child's `task` is a template for the call's
    `question` argument, its `budget` the most it may ever have. A `grandchild` is the child's
    own `research_trip` (the child's tools then name it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    parent: Fixture
    child: Fixture
    grandchild: Fixture | None = None


def family_contracts() -> ContractSet:
    travel = load_travel_contracts()
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "required": ["question"],
        "properties": {"question": {"type": "string", "minLength": 3, "maxLength": 500}},
    }
    extra = child_contracts(
        CHILD_TOOL,
        "Research one part of the trip with a sub-agent that has its own tools; it answers the "
        "question or says why it could not.",
        schema,
        scope="travel.read",
        timeout_s=120,
    )
    return ContractSet([*travel.values(), *extra])


def load_family(path: Path) -> Family:
    return Family.model_validate(yaml.safe_load(path.read_text()))


class FamilyToolbox:
    """The parent's tools: the child-run tool and its lookup, then the scripted ones."""

    def __init__(self, child: ChildRun, environment: ToolBox) -> None:
        self.child, self.environment = child, environment

    def implementation(self, tool: str) -> ToolImplementation | None:
        if tool == CHILD_TOOL:
            return self.child
        if tool == lookup_name(CHILD_TOOL):
            return self.child.lookup
        return self.environment.implementation(tool)


@dataclass(slots=True)
class FamilyRun:
    parent: RunResult
    child: RunResult | None
    failures: list[str]
    child_engine: Engine
    parent_engine: Engine


def _child_result(store: Store, run_id: str) -> RunResult | None:
    header, summary = store.header(run_id), store.summary(run_id)
    if header is None or summary is None:
        return None
    return RunResult.of(
        summary, name=header.name, transitions=store.transitions(run_id), evidence=[]
    )


def build(
    family: Family, store: Store, clock: FakeClock, world: Path | None = None
) -> tuple[Engine, Engine, Any]:
    """The child's and the parent's engines (sharing `store` and `clock`), and the parent's spec."""
    contracts = family_contracts()
    folder = world or Path(tempfile.mkdtemp(prefix="runner-family-"))
    folder.mkdir(parents=True, exist_ok=True)
    supplier = (
        SupplierDatabase(folder / "supplier.sqlite") if "hold_room" in family.child.tools else None
    )
    grandchild = None
    if family.grandchild is not None:
        grand_tools = ScriptedEnvironment(
            family.grandchild.environment, family.grandchild.tools, clock
        )
        grand_engine = Engine(contracts=contracts, toolbox=grand_tools, store=store, clock=clock)
        grandchild = _child_run(family.grandchild, grand_engine)
    scripted = [t for t in family.child.tools if t != CHILD_TOOL]
    child_tools: ToolBox = ScriptedEnvironment(family.child.environment, scripted, clock, supplier)
    if grandchild is not None:
        child_tools = FamilyToolbox(grandchild, child_tools)
    child_engine = Engine(contracts=contracts, toolbox=child_tools, store=store, clock=clock)
    child = _child_run(family.child, child_engine)
    scripted = [t for t in family.parent.tools if t != CHILD_TOOL]
    parent_tools = FamilyToolbox(
        child, ScriptedEnvironment(family.parent.environment, scripted, clock)
    )
    parent_engine = Engine(contracts=contracts, toolbox=parent_tools, store=store, clock=clock)
    return child_engine, parent_engine, spec_for(family.parent, 0)


def _child_run(fixture: Fixture, engine: Engine) -> ChildRun:
    return ChildRun(
        name=CHILD_TOOL,
        engine=engine,
        task=lambda arguments: fixture.task.format(**arguments),
        tools=fixture.tools,
        model=lambda: ScriptedModel(fixture.model),
        limits=fixture.budget,
        system_prompt=SYSTEM_PROMPT,
    )


def run_family(family: Family, store: Store, *, world: Path | None = None) -> FamilyRun:
    clock = FakeClock(family.parent.clock.start)
    child_engine, parent_engine, spec = build(family, store, clock, world)
    return _drive(
        family, store, clock, child_engine, parent_engine,
        lambda: parent_engine.run(spec, ScriptedModel(family.parent.model)),
    )  # fmt: skip


def resume_family(family: Family, store: Store, run_id: str, *, world: Path) -> FamilyRun:
    """Resume a parent (and through it its child) with fresh engines on the same store."""
    header = store.header(run_id)
    assert header is not None
    clock = FakeClock(header.started_at)
    child_engine, parent_engine, spec = build(family, store, clock, world)
    return _drive(
        family, store, clock, child_engine, parent_engine,
        lambda: parent_engine.resume(run_id, spec, ScriptedModel(family.parent.model)),
    )  # fmt: skip


def _drive(  # noqa: PLR0917  # one private helper of two callers
    family: Family,
    store: Store,
    clock: FakeClock,
    child_engine: Engine,
    parent_engine: Engine,
    drive: Callable[[], Coroutine[Any, Any, RunResult]],
) -> FamilyRun:
    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        parent = runner.run(drive())
    children = [o for o in store.outputs(parent.run_id) if o.tool.startswith(CHILD_TOOL)]
    child = None
    if children and children[0].operation_key is not None:
        child = _child_result(store, child_run_id(children[0].operation_key))
    failures = []
    if family.parent.expect is not None:
        failures += [f"parent {f}" for f in check_expectations(family.parent.expect, parent, None)]
    if family.child.expect is not None:
        if child is None:
            failures.append("child: no child run ended")
        else:
            found = check_expectations(family.child.expect, child, None)
            failures += [f"child {f}" for f in found]
    return FamilyRun(parent, child, failures, child_engine, parent_engine)


def limits_of(result: RunResult, store: Store) -> Limits:
    header = store.header(result.run_id)
    assert header is not None
    return Limits.model_validate(header.limits)
