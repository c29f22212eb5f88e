"""The layers keep their order, no modules import each other in a loop, and the core never
imports the travel world.

The layers are the packages of `runner/`, bottom up: `base`, `core`, `models`, `tools`, `record`,
`store`, `engine`, `proof`, `harness`, `travel`, then the faces (`cli`, `service`, `distributed`)
and the package's root; each package's docstring says what it may import. No import runs against
that order and no modules import each other in a loop, lazy and `TYPE_CHECKING` imports included.

The travel boundary (issue 10: the demo world out of the core):

The boundary: the travel world is the `runner.travel` package. The core is every other module
under `runner/`, `runner/core/sim/` included (domain-free simulation policies, which
`policy.py` loads),
except the outermost ones, the `runner/cli/` package and `runner/__main__.py`: the command line
is where the travel world is wired to the core (and the service's factories, which give the
service the travel world when told none: the service itself knows only the harness's world
protocol). Checked twice: statically (every import statement,
lazy ones inside functions and `TYPE_CHECKING` blocks included) and by importing every core module
in a fresh interpreter (what is really loaded, transitively).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "runner"
WORLD = "runner.travel"
OUTERMOST = {"runner.cli", "runner.__main__", "runner.service"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_world(name: str) -> bool:
    return name == WORLD or name.startswith(WORLD + ".")


def _is_outermost(name: str) -> bool:
    return any(name == top or name.startswith(top + ".") for top in OUTERMOST)


def core_modules() -> dict[str, Path]:
    modules = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    return {
        name: path
        for name, path in modules.items()
        if not _is_world(name) and not _is_outermost(name)
    }


def imported_names(module: str, path: Path) -> set[str]:
    """Every module `path` names in an import statement, resolved to its absolute name."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from . import x`
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value))
    return found


def test_the_boundary_is_what_the_docstring_says() -> None:
    core = core_modules()
    expected = {"runner", "runner.engine", "runner.tools.contracts", "runner.core.sim.naive"}
    assert expected <= core.keys()
    assert not any(_is_world(name) for name in core)
    assert not OUTERMOST & core.keys()
    world = {_module_name(path) for path in (PACKAGE / "travel").rglob("*.py")}
    assert {"runner.travel", "runner.travel.rules", "runner.travel.scenario"} <= world


def test_the_check_sees_an_import_of_the_world(tmp_path: Path) -> None:
    """The detector itself: the CLI (outermost) does import the world, and so would these."""
    cli = imported_names("runner.cli._common", PACKAGE / "cli" / "_common.py")
    assert any(_is_world(name) for name in cli)
    for source in (
        "def f():\n    from .travel.rules import SEMANTIC_RULES\n",  # lazy, relative
        "from . import travel\n",
        "import runner.travel.scenario\n",
        "import importlib\nimportlib.import_module('runner.travel')\n",
    ):
        path = tmp_path / "probe.py"
        path.write_text(source, encoding="utf-8")
        assert any(_is_world(name) for name in imported_names("runner.probe", path)), source


@pytest.mark.parametrize("module", sorted(core_modules()))
def test_no_core_module_names_the_travel_world(module: str) -> None:
    names = imported_names(module, core_modules()[module])
    assert not sorted(name for name in names if _is_world(name)), f"{module} imports the world"


@pytest.mark.slow
def test_importing_every_core_module_loads_nothing_of_the_travel_world() -> None:
    script = (
        "import importlib, json, sys\n"
        f"for name in {sorted(core_modules())!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m == {WORLD!r} "
        f"or m.startswith({WORLD + '.'!r}))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(done.stdout) == []


# The layers, bottom up: a module may import its own layer and those below it, never above.
# `faces` are the command line, the service and the workers; `facade` the package's root.
LAYERS = (
    "base",
    "core",
    "models",
    "tools",
    "record",
    "store",
    "engine",
    "proof",
    "harness",
    "travel",
    "faces",
    "facade",
)
FACES = {"cli", "service", "distributed", "__main__"}
FACADE = {"testing", "_moved"}

SERVICE_WIRING = "runner.service"
"""The service's factories (`build_app`, `build_queued_app`): its only module to name a world."""


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in FACADE:
        return "facade"
    return "faces" if parts[1] in FACES else parts[1]


def _import_graph() -> dict[str, set[str]]:
    """Module -> the runner modules it imports (lazy and `TYPE_CHECKING` imports included)."""
    modules = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    return {
        name: {found for found in imported_names(name, path) if found in modules} - {name}
        for name, path in modules.items()
    }


def test_every_module_sits_in_a_known_layer() -> None:
    unknown = sorted(name for name in _import_graph() if layer_of(name) not in LAYERS)
    assert unknown == []


def test_no_import_runs_against_the_layer_order() -> None:
    graph = _import_graph()
    upward = {
        (module, found)
        for module, imports in graph.items()
        for found in imports
        if LAYERS.index(layer_of(found)) > LAYERS.index(layer_of(module))
    }
    assert sorted(upward) == [], "imports against the layer order"


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected sets of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for root, imports in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(imports)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.add(frozenset(members))
    return found


def test_no_modules_import_each_other_in_a_loop() -> None:
    assert [sorted(c) for c in _cycles(_import_graph())] == [], "import cycles"


def test_the_service_knows_the_world_protocol_not_the_travel_world() -> None:
    """Its runs, reads and approvals take their world from the service's construction; only its
    factories name the travel world, as the default."""
    graph = _import_graph()
    naming = sorted(
        module
        for module, imports in graph.items()
        if module.startswith(SERVICE_WIRING) and any(_is_world(found) for found in imports)
    )
    assert naming == [SERVICE_WIRING]
    assert "runner.harness.world" in graph["runner.service.runs"]


def test_the_harness_is_a_layer_of_its_own_below_the_travel_world() -> None:
    graph = _import_graph()
    assert layer_of("runner.harness.scenario") == "harness"
    assert LAYERS.index("harness") < LAYERS.index("travel")
    assert "runner.harness.world" in graph["runner.travel.world"]  # travel implements it


def test_the_cycle_finder_finds_a_loop_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == {frozenset({"a", "b", "c"})}


def test_every_package_says_what_it_may_import() -> None:
    """Each package's docstring is the map: what it holds, and which layers it may import."""
    silent = [
        _module_name(init)
        for init in sorted(PACKAGE.rglob("__init__.py"))
        if init.parent != PACKAGE  # the facade: the README teaches what it exports
        and "may import"
        not in (ast.get_docstring(ast.parse(init.read_text("utf-8"))) or "").lower()
    ]
    assert silent == []
