"""The tests' own tree: no test module (nor a conftest) is imported by another module of the tests;
what two of them share lives in `tests/support/`."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import ROOT

TESTS = ROOT / "tests"


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _imported(path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved, `from X import y` read as both X
    and X.y (y may be a module)."""
    package = _module(path).split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_no_test_module_imports_another() -> None:
    sources = [path for path in TESTS.rglob("*.py") if "data" not in path.relative_to(TESTS).parts]
    test_modules = {
        _module(path)
        for path in sources
        if path.name.startswith("test_") or path.name == "conftest.py"
    }
    found = {
        f"{_module(path)} imports {name}"
        for path in sources
        for name in _imported(path) & test_modules
    }
    assert not found, sorted(found)
