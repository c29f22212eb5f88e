"""The core never imports the travel world (issue 10: the demo world out of the core).

The boundary: the travel world is the `runner.travel` package. The core is every other module
under `runner/`, `runner/sim/` included (domain-free simulation policies, which `policy.py` loads),
except the outermost ones, the `runner/cli/` package and `runner/__main__.py`: the command line
is where the travel world is wired to the core. Checked twice: statically (every import statement,
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
    assert {"runner", "runner.engine", "runner.contracts", "runner.sim.naive"} <= core.keys()
    assert not any(_is_world(name) for name in core)
    assert not OUTERMOST & core.keys()
    world = {_module_name(path) for path in (PACKAGE / "travel").rglob("*.py")}
    assert {"runner.travel", "runner.travel.rules", "runner.travel.scenario"} <= world


def test_the_check_sees_an_import_of_the_world(tmp_path: Path) -> None:
    """The detector itself: the CLI (outermost) does import the world, and so would these."""
    cli = imported_names("runner.cli", PACKAGE / "cli" / "__init__.py")
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
