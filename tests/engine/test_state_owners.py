"""Each part of a run's state is written by one module: the one `_state.WRITERS` names.

Read from the source (its syntax tree) of `runner/engine` and `runner/tools/children.py`: every
assignment, augmented assignment, `del` and mutating call (`append`, `pop`, `setdefault`, `[k] =`
...) on a field of a part names the field, and the field's part must be written from the module
doing it. So a new writer anywhere else fails here. A field is known by its name: the names of
parts with different writers never coincide (checked too), so `spending.usage.attempts += 1`
is the spending module's wherever the `Spending` came from. A field handed on under another
name (`waits = meters.waits`, then `waits.append`) is not followed: spell writes on the part.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from pathlib import Path

from runner.core.machine import Lifecycle
from runner.engine import _state
from runner.engine._state import WRITERS, RunSetup, RunState
from tests.support.paths import ROOT

SOURCES = [*sorted((ROOT / "runner" / "engine").glob("*.py")), ROOT / "runner/tools/children.py"]
MUTATORS = frozenset(
    {
        "append",
        "appendleft",
        "extend",
        "extendleft",
        "insert",
        "pop",
        "popleft",
        "popitem",
        "remove",
        "discard",
        "clear",
        "setdefault",
        "update",
        "add",
        "sort",
        "reverse",
    }
)


def _field_names(cls: type) -> tuple[str, ...]:
    if dataclasses.is_dataclass(cls):
        return tuple(field.name for field in dataclasses.fields(cls))
    return tuple(getattr(cls, "__slots__", ()))  # `Lifecycle`: a plain class with slots


def _owners() -> dict[str, str]:
    """Field name -> the module that writes it."""
    owners: dict[str, str] = {}
    for cls, writer in WRITERS.items():
        for name in _field_names(cls):
            owners.setdefault(name, writer)
    return owners


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _written(target: ast.expr) -> list[ast.Attribute]:
    """The attributes an assignment (or `del`) to `target` writes: `x.f = `, `x.f[k] = `,
    `x.f.g = ` (`g`), and each of a tuple's."""
    if isinstance(target, ast.Tuple | ast.List):
        return [attribute for element in target.elts for attribute in _written(element)]
    if isinstance(target, ast.Starred):
        return _written(target.value)
    while isinstance(target, ast.Subscript):
        target = target.value
    return [target] if isinstance(target, ast.Attribute) else []


def writes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, field name) of every write to an attribute in `tree`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
        ):
            targets = [node.func.value]
        found += [(node.lineno, attribute.attr) for t in targets for attribute in _written(t)]
    return found


def misplaced(module: str, tree: ast.AST, owners: dict[str, str]) -> list[str]:
    return [
        f"{module}:{line} writes {name} (written by {owners[name]} alone)"
        for line, name in writes(tree)
        if name in owners and owners[name] != module
    ]


def test_every_write_to_a_part_is_in_its_writing_module() -> None:
    owners = _owners()
    found = [
        problem
        for path in SOURCES
        for problem in misplaced(_module_name(path), ast.parse(path.read_text()), owners)
    ]
    assert found == []


def test_each_writer_writes_what_it_owns() -> None:
    """Every writing module named exists and writes some of its part (none is named in vain)."""
    owners = _owners()
    by_module = {_module_name(path): ast.parse(path.read_text()) for path in SOURCES}
    for writer in set(WRITERS.values()) - {_state.Transcript.__module__}:
        assert writer in by_module, writer
        written = {name for _, name in writes(by_module[writer])}
        assert any(owners.get(name) == writer for name in written), writer


def test_no_field_name_is_shared_by_parts_with_different_writers() -> None:
    seen: dict[str, tuple[type, str]] = {}
    shared = []
    for cls, writer in WRITERS.items():
        for name in _field_names(cls):
            other = seen.setdefault(name, (cls, writer))
            if other[1] != writer:
                shared.append(f"{name}: {other[0].__name__}, {cls.__name__}")
    assert shared == []


def test_the_run_and_its_setup_are_frozen_and_every_other_part_has_a_writer() -> None:
    for frozen in (RunState, RunSetup):
        params = frozen.__dataclass_params__
        assert params.frozen, frozen.__name__
    fixed = {"setup", "clock", "rng", "retriever"}  # set once, at the run's start
    parts = {field.name: field for field in dataclasses.fields(RunState)}
    assert set(parts) >= fixed
    for name in set(parts) - fixed:
        kind = getattr(_state, str(parts[name].type))
        assert kind in WRITERS, f"RunState.{name}: {kind.__name__} has no writer"


def test_the_check_sees_a_writer_elsewhere() -> None:
    owners = _owners()
    source = textwrap.dedent(
        """
        def elsewhere(run, spending, slot):
            run.spending.usage.attempts += 1
            spending.meters.waits.append(0.5)
            run.calls.operations["k"] = ("tool", None)
            del run.calls.invalid_streak["tool"]
            run.calls.batch.calls.popleft()
            spending.held_by_children, slot.held = None, None
            run.moves.ending = None
            run.planning.offering: int = 0
            run.calls.work = None
        """
    )
    found = misplaced("runner.engine._elsewhere", ast.parse(source), owners)
    assert sorted(problem.split(" ")[2] for problem in found) == [
        "attempts",
        "calls",
        "ending",
        "held",
        "held_by_children",
        "invalid_streak",
        "offering",
        "operations",
        "waits",
        "work",
    ]


def test_the_machine_is_fired_by_the_writer_of_the_moves_alone() -> None:
    """`Lifecycle` is moved by `machine.fire` (the `transitions` library keeps its state)."""
    firing = {
        _module_name(path)
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "fire"
    }
    assert firing == {WRITERS[Lifecycle]}
