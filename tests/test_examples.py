"""The examples users run: each program in `examples/` runs from any directory, exits 0 and
prints what it did (the lines checked here); they type-check under `mypy --strict` (`make
typecheck` covers them too). The docs' blocks are run by `tests/docs/`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"

PRINTS: dict[str, list[str]] = {
    # Its own tools and model, SQLite, handles, a cancel, every run replayed from its loop.
    "embed_service": [
        "order A-100: complete (model_final): No refund is due.",
        "order A-101: complete (model_final): Refunded as R-1.",
        "order A-102: abstain (cancelled)",
        "replayed 3 runs from the store alone: all identical",
    ],
    # Tools declared in Python and from a JSON file in one DeclaredTools; a cancel while a write
    # whose response is lost is in flight (looked up by its key first).
    "declared_tools_service": [
        "declared tools: find_reservation, lookup_order, reserve_stock",
        "t-cancelled: abstain (cancelled)",
        "t-reserves: complete (model_final): Reserved.",
        "t-looks: complete (model_final): Shipped.",
        "t-cancelled: its write's response was lost; looked up by its key first: "
        "reserve_stock committed",
        "replayed 3 runs from the store alone: all identical",
    ],
    # An MCP server of your own, started over stdio; the run replayed with no server.
    "mcp_tools": [
        "pinned from the server: docs__search",
        "run: complete (model_final), 1 attempt",
        "answer: From the docs: Retry a transient failure with backoff and jitter, never past "
        "the deadline.",
        "replayed with the server stopped: identical",
    ],
    # A write under approval: proposed, approved (sent once) or denied.
    "approvals": [
        "A-1: escalate (approval_required), refunds sent: 0",
        "pending: refund_order: amount_cents=4200, order_id=A-1",
        "A-1 continued: complete (model_final)",
        "A-2 continued: abstain (approval_denied)",
        "refunds sent: 1 (the approved one, once)",
    ],
    # 30 tools, 3 offered at each request, the needed one among them.
    "tool_retrieval": [
        "catalogue: 30 tools; each request offered 3 of them",
        "request 1 offered: convert_currency, weather_forecast, historical_weather",
        "calls: convert_currency ok, weather_forecast ok; run: complete (model_final)",
        "replayed, offering the same: identical",
    ],
    # Two children carved from what the parent has left, charged to it.
    "child_runs": [
        "child 1: complete (model_final), carved to 4 of its own 4 attempts (what the parent "
        "had left), used 2",
        "child 2: abstain (attempts), carved to 1 of its own 4 attempts (what the parent had "
        "left), used 1",
        "parent: abstain (attempts), 5 of its 5 attempts spent: its 2 calls and its children's "
        "3 searches",
    ],
    # A runaway model stopped by its money budget, its final answer within the cap.
    "cost_budget": [
        "requests: 4, each $0.023; searches: 3",
        "run: abstain (cost) at $0.092",
        "answer: Nothing found; nothing is confirmed.",
        "replayed at the recorded price: identical",
    ],
}


def _run(example: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / f"{example}.py"), *args],
        cwd=cwd,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_example_program_is_run_here() -> None:
    assert sorted(PRINTS) == sorted(path.stem for path in EXAMPLES.glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(PRINTS))
def test_an_example_runs_from_anywhere_and_prints_what_it_did(tmp_path: Path, example: str) -> None:
    done = _run(example, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for expected in PRINTS[example]:
        assert expected in lines, done.stdout
    assert list(tmp_path.iterdir()) == []  # nothing left behind in the working directory


@pytest.mark.slow
def test_the_embedding_example_logs_when_it_configures_logging(tmp_path: Path) -> None:
    """The library is silent until the application configures logging: then every transition."""
    done = _run("embed_service", "--verbose", cwd=tmp_path)
    assert done.returncode == 0 and PRINTS["embed_service"][0] in done.stdout
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
