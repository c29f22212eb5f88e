"""The engine decides nothing: it carries out what the one decision (`core.decide.decide`) says.

Read from the engine's source (its syntax tree), so a new shortcut shows up here: no module of
`runner/engine` names a `Decision`, builds a verdict or an `Ending`, or fires a trigger it chose
itself (a trigger is named only to compare a verdict or a record with it, and `classify`, the move
that records a tool call's verdict); the run's `Ending` is set in one place, from a verdict.
"""

from __future__ import annotations

import ast

from runner.core import verdicts
from runner.core.decide import Batch, Exit, Verdict
from tests.support.paths import ROOT

ENGINE = ROOT / "runner" / "engine"
VERDICT_TYPES = {
    name
    for name in dir(verdicts)
    if isinstance(getattr(verdicts, name), type)
    and getattr(verdicts, name).__module__ == verdicts.__name__
} | {Verdict.__name__, Exit.__name__, Batch.__name__}


def _modules() -> list[tuple[str, ast.Module]]:
    return [(path.name, ast.parse(path.read_text())) for path in sorted(ENGINE.glob("*.py"))]


def _parents(tree: ast.Module) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def test_the_verdict_types_are_known() -> None:
    assert {
        "Ending",
        "Move",
        "Trip",
        "FinalRequest",
        "AskAgain",
        "FallBack",
        "NoReply",
    } <= VERDICT_TYPES


def test_the_engine_names_no_decision() -> None:
    found = [
        f"{name}:{node.lineno}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Decision"
    ]
    assert found == []


def test_the_engine_builds_no_verdict() -> None:
    found = [
        f"{name}:{node.lineno} {node.func.id}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in VERDICT_TYPES
    ]
    assert found == []


def test_the_engine_fires_no_trigger_of_its_own_but_classify() -> None:
    found = []
    for name, tree in _modules():
        parents = _parents(tree)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "Trigger"
            ):
                continue
            compared = isinstance(parents.get(node), ast.Compare) or (
                isinstance(parents.get(node), ast.Attribute)  # `Trigger.X.value` compared
                and isinstance(parents.get(parents[node]), ast.Compare)
            )
            if not compared and node.attr != "CLASSIFY":
                found.append(f"{name}:{node.lineno} Trigger.{node.attr}")
    assert found == []


def test_the_ending_is_set_in_one_place() -> None:
    found = [
        f"{name}:{node.lineno}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute) and target.attr == "ending"
    ]
    assert len(found) == 1 and found[0].startswith("_core.py:"), found
