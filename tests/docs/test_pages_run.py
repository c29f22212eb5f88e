"""Every code block of the README and the docs site is checked by what it is
(`tests/support/doc_examples.py` holds the rules; `docs/reference/how-the-docs-are-tested.md`
states them for writers): Python runs, fragments are found in their files, typecheck-only blocks
pass mypy strict, console blocks print what the page shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_examples import PAGES, blocks, run_page, typecheck_sources
from tests.support.paths import ROOT

CHECKED = [path for path in PAGES if any(block.kind != "shown" for block in blocks(path))]


@pytest.mark.parametrize("page", CHECKED, ids=lambda path: str(path.relative_to(ROOT)))
def test_the_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    run_page(page, tmp_path)


def test_typecheck_only_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    sources = typecheck_sources()
    assert sources, "no typecheck-only block: this test checks nothing"
    for name, source in sources:
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    # From the checkout, so mypy finds `runner` there (an editable install is an import hook).
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental"]
        + [str(tmp_path / f"{name}.py") for name, _ in sources],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_page_with_python_or_console_is_checked() -> None:
    """A page nobody checks would drift: the README and the how-to pages carry runnable blocks."""
    names = {str(path.relative_to(ROOT)) for path in CHECKED}
    assert "README.md" in names
    assert {"docs/how-to/writing-a-fixture.md", "docs/how-to/cost-budgets.md"} <= names
