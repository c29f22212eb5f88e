"""Kill a family (parent, child, grandchild; or children in one reply) with SIGKILL after every
durable commit, resume the parent from another folder, and check that the family ends as the
uncrashed one does, within the parent's caps: no crash lets a lookup of a child's call, at any
depth, take an attempt more, read an abstained or escalated child as a success, or leave a
call unknown whose child never started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner import MemoryStore, SqliteStore
from runner.proof.api import grade_run_sync
from runner.store.base import RunListing, Store
from runner.tools.children import family_ids, parent_of
from tests.support.children_world import FAMILIES, family_contracts, load_family, run_family
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow

SWEPT = [
    FAMILIES / "child_exhausts_carved_budget.yaml",
    FAMILIES / "child_escalates.yaml",
    FAMILIES / "nested" / "grandchild.yaml",
    FAMILIES / "batch" / "three_in_one_reply.yaml",
]


@dataclass(frozen=True, slots=True)
class Ending:
    """What a family comes to: the parent's terminal and reason, its attempts, and the statuses
    of its operations (one per child-run call)."""

    terminal: str
    reason: str
    attempts: int
    operations: Counter[str]


def _ending(store: Store, run_id: str) -> Ending:
    summary = store.summary(run_id)
    assert summary is not None
    statuses = Counter(str(op.status) for op in store.operations(run_id))
    return Ending(summary.terminal, summary.reason, summary.attempts, statuses)


def _children(store: Store) -> int:
    return sum(
        isinstance(item, RunListing) and parent_of(item.header) is not None for item in store.runs()
    )


def _driver(
    args: list[str], cwd: Path, kill_after: int | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RUNNER_KILL_AFTER_COMMITS"}
    env["PYTHONPATH"] = str(ROOT)
    if kill_after is not None:
        env["RUNNER_KILL_AFTER_COMMITS"] = str(kill_after)
    return subprocess.run(
        [sys.executable, "-m", "tests.support.children_driver", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _check(path: Path, folder: Path, point: int, uncrashed: tuple[Ending, int]) -> list[str]:
    where = f"{path.stem} crash point {point}"
    db, world = folder / "runs.sqlite", folder / "world"
    store = SqliteStore(db)
    parents = [item.header.run_id for item in store.runs() if parent_of(item.header) is None]
    ended = bool(parents) and store.summary(parents[0]) is not None
    started = _children(store) == uncrashed[1]
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
        ending = _ending(store, parents[0])
        # Killed before every child started, a child-run call is proven not applied and handed
        # back to the model (a child-run tool is a write the runner does not re-send): the
        # script then answers otherwise. Once every child started, it ends as it would have.
        if started and ending != uncrashed[0]:
            problems.append(f"{where}: ended {ending}, uncrashed {uncrashed[0]}")
        if ending.operations["unknown"] and not uncrashed[0].operations["unknown"]:
            problems.append(f"{where}: operations left unknown: {ending.operations}")
        cap = load_family(path).parent.budget.max_attempts
        if ending.attempts > cap:
            problems.append(f"{where}: {ending.attempts} attempts, cap {cap}")
        for run_id in family_ids(store, parents[0]):
            trial = grade_run_sync(store, run_id, family_contracts())
            problems += [f"{where}: {run_id} fails {c.name}: {c.detail}" for c in trial.failed]
    finally:
        store.close()
    return problems


@pytest.mark.parametrize("path", SWEPT, ids=[p.stem for p in SWEPT])
def test_a_family_killed_anywhere_ends_as_uncrashed_within_the_parents_caps(
    path: Path, tmp_path: Path
) -> None:
    memory = MemoryStore()
    outcome = run_family(load_family(path), memory)
    assert outcome.failures == [], outcome.failures
    uncrashed = (_ending(memory, outcome.parent.run_id), _children(memory))
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
        problems += _check(path, folder, point, uncrashed)
        point += 1
    assert point > 10, "the sweep crashed the family at fewer points than it commits"
    assert problems == [], "\n".join(problems)
