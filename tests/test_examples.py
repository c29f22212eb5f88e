"""The README's code cannot rot: the embedding example runs (silently), type-checks under
`mypy --strict`, and the README's test of a user's agent passes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "embed_service.py"
DECLARED = ROOT / "examples" / "declared_tools_service.py"
MARKER = "<!-- executed by tests/test_examples.py -->"


@pytest.mark.slow
@pytest.mark.parametrize("example", [EXAMPLE, DECLARED], ids=lambda path: path.stem)
def test_the_embedding_example_runs_and_prints_nothing(tmp_path: Path, example: Path) -> None:
    """Its own tools and model, SQLite, handles, a cancel, and every run replayed identical
    from inside its loop (the example asserts each); nothing printed, from any directory.
    `declared_tools_service.py`: tools declared in Python and from a JSON file in one `Toolset`,
    a cancel while a write whose response is lost is in flight (looked up first)."""
    done = subprocess.run(
        [sys.executable, str(example)],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.slow
def test_the_embedding_example_logs_when_it_configures_logging(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--verbose"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout == ""
    assert "event='transition'" in done.stderr and "reason='cancelled'" in done.stderr


@pytest.mark.slow
def test_mypy_strict_accepts_the_examples() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "examples/"],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _readme_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(re.escape(MARKER) + r"\s*```python\n(.*?)```", text, re.DOTALL)
    assert found is not None, "the README's testing-kit example is marked for this test"
    return found.group(1)


def test_the_readmes_ten_line_test_of_an_agent_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    code = _readme_block()
    assert len(code.strip().splitlines()) <= 16
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert len(tests) == 1
    tests[0]()
