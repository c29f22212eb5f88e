"""One way to hand an engine its tools: the `ToolBox` protocol, implementations that compose in
order, and the names the root no longer exports, each still importable for a release with a
warning naming where it went."""

from __future__ import annotations

import importlib
import warnings

import pytest

import runner
from runner import (
    DeclaredTools,
    Engine,
    FirstOf,
    FunctionTools,
    MemoryStore,
    Principal,
    RunSpec,
    ToolBox,
    ToolInvocation,
    ToolResponse,
    load_contracts,
)
from runner.testing import FakeClock, FunctionModel, ToolDouble, call, latest_results
from runner.tools import ToolImplementation
from runner.tools.mcp import McpTools
from tests.support.paths import ROOT

CONTRACTS = ROOT / "examples" / "contracts"


async def _answer(invocation: ToolInvocation) -> ToolResponse:
    return ToolResponse(payload={"status": "ok", "from": invocation.tool})


def test_the_first_box_that_has_a_tool_answers_it() -> None:
    first = FunctionTools({"a": _answer})
    second = FunctionTools({"a": ToolDouble({"status": "ok"}), "b": _answer})
    chained = first.before(second)
    assert isinstance(chained, FirstOf)
    assert chained.implementation("a") is _answer
    assert chained.implementation("b") is _answer
    assert chained.implementation("c") is None
    assert FirstOf(second, first).implementation("a") is second.implementations["a"]
    assert FirstOf().implementation("a") is None


def test_every_implementation_composes_before_any_other() -> None:
    declared = DeclaredTools()
    for box in (FunctionTools(), declared, FirstOf()):
        assert isinstance(box.before(FunctionTools()), FirstOf)
    assert McpTools.before is FunctionTools.before  # one way to put a toolbox first


def test_a_dict_handed_to_function_tools_is_kept_not_copied() -> None:
    """As `ToolRegistry` did: a tool registered on the dict later is found."""
    given: dict[str, ToolImplementation] = {}
    tools = FunctionTools(given)
    given["late"] = _answer
    assert tools.implementation("late") is _answer


def test_a_run_on_composed_tools_calls_the_first_that_has_it() -> None:
    shadowed = ToolDouble({"status": "ok", "order_id": "A-1", "state": "lost", "amount_cents": 1})
    lookup = ToolDouble(
        {"status": "ok", "order_id": "A-1", "state": "delivered", "amount_cents": 9}
    )
    tools: ToolBox = FunctionTools({"lookup_order": lookup}).before(
        FunctionTools({"lookup_order": shadowed})
    )
    agent = FunctionModel(
        lambda transcript, _tools: (
            "Delivered." if latest_results(transcript) else call("lookup_order", order_id="A-1")
        )
    )
    engine = Engine(
        contracts=load_contracts(CONTRACTS), toolbox=tools, store=MemoryStore(), clock=FakeClock()
    )
    spec = RunSpec(
        task="Where is A-1?",
        tenant="t",
        principal=Principal(id="bot", scopes=frozenset({"orders.read"})),
        tools=("lookup_order",),
    )
    assert engine.run_sync(spec, agent).answer == "Delivered."
    assert (len(lookup.calls), len(shadowed.calls)) == (1, 0)


@pytest.mark.parametrize(
    ("module", "old", "new_module", "new"),
    [
        ("runner", "ToolRegistry", "runner.tools.toolbox", "FunctionTools"),
        ("runner", "TERMINAL", "runner.core.states", "TERMINAL"),
        ("runner", "Decision", "runner.core.machine", "Decision"),
        ("runner", "Trigger", "runner.core.machine", "Trigger"),
        ("runner", "Bound", "runner.core.budget", "Bound"),
        ("runner", "Contract", "runner.tools.contracts", "Contract"),
        ("runner.tools", "ToolRegistry", "runner.tools.toolbox", "FunctionTools"),
        ("runner.tools.invocation", "ToolRegistry", "runner.tools.toolbox", "FunctionTools"),
        ("runner.tools.invocation", "ToolBox", "runner.tools.toolbox", "ToolBox"),
        ("runner.tools.declare", "Toolset", "runner.tools.declare", "DeclaredTools"),
    ],
)
def test_an_old_name_still_imports_with_a_warning(
    module: str, old: str, new_module: str, new: str
) -> None:
    with pytest.warns(DeprecationWarning, match=old):
        value = getattr(importlib.import_module(module), old)
    assert value is getattr(importlib.import_module(new_module), new)


def test_dropped_names_are_neither_listed_nor_offered() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        _ = runner.TERMINAL  # asked for once: still not kept at the top level
    for name in ("TERMINAL", "Decision", "Trigger", "Bound", "Contract", "ToolRegistry"):
        assert name not in runner.__all__
        assert name not in dir(runner)


def test_what_the_readme_and_examples_import_from_runner_is_exported() -> None:
    taught = {"FunctionModel", "DeclaredTools", "FunctionTools", "FirstOf", "ToolBox"}
    taught |= {"replay_run", "list_runs", "run_status", "RunStatus", "Transcript"}
    taught |= {"ModelUnavailable", "ModelRejected"}
    assert taught <= set(runner.__all__)
