"""Kill a family (parent, child, grandchild) with SIGKILL after every durable commit, resume the
parent from another folder, and check that the family still ends as declared within the
parent's caps: no crash lets a lookup of a child's call, at any depth, take an attempt more."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runner import SqliteStore
from runner.api import grade_run_sync
from runner.children import family_ids, parent_of

from .children_world import FAMILIES, family_contracts, load_family

ROOT = Path(__file__).resolve().parent.parent
TERMINAL = {"complete", "abstain", "escalate", "unknown"}
SWEPT = [FAMILIES / "child_exhausts_carved_budget.yaml", FAMILIES / "nested" / "grandchild.yaml"]


def _driver(
    args: list[str], cwd: Path, kill_after: int | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RUNNER_KILL_AFTER_COMMITS"}
    env["PYTHONPATH"] = str(ROOT)
    if kill_after is not None:
        env["RUNNER_KILL_AFTER_COMMITS"] = str(kill_after)
    return subprocess.run(
        [sys.executable, "-m", "tests.children_driver", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _check(path: Path, folder: Path, point: int) -> list[str]:
    family = load_family(path)
    where = f"{path.stem} crash point {point}"
    db, world = folder / "runs.sqlite", folder / "world"
    store = SqliteStore(db)
    parents = [item.header.run_id for item in store.runs() if parent_of(item.header) is None]
    ended = bool(parents) and store.summary(parents[0]) is not None
    levels = 1 if family.grandchild is None else 2
    started = sum(parent_of(item.header) is not None for item in store.runs()) == levels
    store.close()
    if not parents:
        return []
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir()
    if not ended:  # killed after the parent's last commit: nothing to resume
        resumed = _driver(["resume", str(path), str(db), str(world), parents[0]], elsewhere)
        if resumed.returncode != 0:
            return [f"{where}: resume failed: {resumed.stderr[-2000:]}"]
    problems = []
    store = SqliteStore(db)
    try:
        summary = store.summary(parents[0])
        expect = family.parent.expect
        assert summary is not None and expect is not None
        ending = (summary.terminal, summary.reason)
        # Killed before a child started, its caller's call is proven not applied and handed
        # back to the model (a child-run tool is a write the runner does not re-send): the
        # script then answers. Once every level started, the family ends as it would have.
        if started and ending != (expect.terminal.value, expect.reason):
            problems.append(f"{where}: parent ended {summary.terminal} ({summary.reason})")
        if summary.terminal not in TERMINAL:
            problems.append(f"{where}: parent ended {summary.terminal!r}")
        cap = family.parent.budget
        if summary.attempts > cap.max_attempts:
            problems.append(f"{where}: {summary.attempts} attempts, cap {cap.max_attempts}")
        for run_id in family_ids(store, parents[0]):
            trial = grade_run_sync(store, run_id, family_contracts())
            problems += [f"{where}: {run_id} fails {c.name}: {c.detail}" for c in trial.failed]
    finally:
        store.close()
    return problems


@pytest.mark.parametrize("path", SWEPT, ids=[p.stem for p in SWEPT])
def test_no_crash_lets_a_family_pass_its_parents_caps(path: Path, tmp_path: Path) -> None:
    problems: list[str] = []
    point = 1
    while True:
        folder = tmp_path / str(point)
        folder.mkdir()
        args = ["run", str(path), str(folder / "runs.sqlite"), str(folder / "world")]
        ran = _driver(args, folder, kill_after=point)
        if ran.returncode == 0:
            break  # the family ended before this many commits: every point was swept
        assert ran.returncode == -signal.SIGKILL, ran.stderr[-2000:]
        problems += _check(path, folder, point)
        point += 1
    assert point > 10, "the sweep crashed the family at fewer points than it commits"
    assert problems == [], "\n".join(problems)
