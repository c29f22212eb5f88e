"""Real `runner` subprocesses killed with SIGKILL after a chosen durable commit
(`RUNNER_KILL_AFTER_COMMITS`), resumed, and checked: one declared end, the right number of
holds, a transition log without a gap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runner.harness.fixtures import load_fixture
from runner.store import SqliteStore
from runner.travel import load_travel_contracts
from runner.travel.supplier import SupplierDatabase
from tests.support.llm_server import RecordedLLMServer, load_recordings
from tests.support.paths import FIXTURES

HOLD_FIXTURES = sorted(FIXTURES.glob("hold_*.yaml"))


TERMINAL = {"complete", "abstain", "escalate", "unknown"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """How each run of a sweep is started and resumed (the default: as the first sweep does)."""

    run_args: tuple[str, ...] = ()
    """Extra `run` flags, e.g. a live model: `resume` must then find the model in the header."""
    resume_args: tuple[str, ...] = ()
    """Extra `resume` flags (`--durability` is not one: the header records the mode)."""
    elsewhere: bool = False
    """Run with a relative `--db` inside the run's folder; resume from another folder."""
    stride: int = 1
    """Crash at every stride-th point only (first, first + stride, ...), to keep a sweep short."""
    first: int = 1


@dataclass(slots=True)
class Sweep:
    fixture: str
    points: int = 0
    problems: list[str] = field(default_factory=list)


def runner_process(
    args: list[str],
    cwd: Path,
    kill_after: int | None = None,
    env_extra: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python -m runner ARGS` in `cwd`, SIGKILLed after its `kill_after`-th durable commit."""
    env = {k: v for k, v in os.environ.items() if k != "RUNNER_KILL_AFTER_COMMITS"}
    env.update(env_extra or {})
    if kill_after is not None:
        env["RUNNER_KILL_AFTER_COMMITS"] = str(kill_after)
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def holds_in(world: Path) -> int:
    total = 0
    for path in world.glob("supplier-*.sqlite"):
        supplier = SupplierDatabase(path)
        total += supplier.active_holds()
        supplier.close()
    return total


def _check(
    sweep: Sweep,
    point: int,
    expected_holds: int,
    db: Path,
    world: Path,
    *,
    elsewhere: Path | None,
    resume_args: tuple[str, ...] = (),
) -> None:
    where = f"{sweep.fixture} crash point {point}"
    store = SqliteStore(db)
    runs = store.runs()
    store.close()
    if not runs:  # died before the run began: nothing may have happened anywhere
        if holds_in(world) != 0:
            sweep.problems.append(f"{where}: holds before the run began")
        return
    run_id = runs[0].header.run_id
    resume = ["resume", run_id, "--db", str(db), "--json", *resume_args]
    resumed = runner_process(resume, elsewhere or db.parent)
    if resumed.returncode not in (0, 1) or not resumed.stdout.strip().startswith(("{", "run ")):
        sweep.problems.append(f"{where}: resume failed ({resumed.returncode}): {resumed.stderr}")
        return
    store = SqliteStore(db)
    summary = store.summary(run_id)
    records = store.transitions(run_id)
    store.close()
    holds = holds_in(world)
    if elsewhere is not None and any(elsewhere.rglob("*.sqlite")):
        sweep.problems.append(f"{where}: resume created a database in its working directory")
        holds += sum(holds_in(folder) for folder in elsewhere.rglob("*.world"))
    terminal = summary.terminal if summary else None
    if terminal not in TERMINAL:
        sweep.problems.append(f"{where}: ended in {terminal!r}")
    if holds > expected_holds or (terminal != "unknown" and holds != expected_holds):
        sweep.problems.append(f"{where}: {holds} holds, expected {expected_holds} ({terminal})")
    if [r.seq for r in records] != list(range(1, len(records) + 1)):
        sweep.problems.append(f"{where}: transition log has a gap")
    ends = [r for r in records if r.to_state in TERMINAL]
    if len(ends) != 1 or ends[0] is not records[-1]:
        sweep.problems.append(f"{where}: {len(ends)} terminal transitions")
    if resumed.stdout.startswith("{"):
        reported = json.loads(resumed.stdout)
        if reported["holds"] != holds or reported["terminal"] != terminal:
            sweep.problems.append(
                f"{where}: resume reported {reported['terminal']}/{reported['holds']}"
            )


def sweep_fixture(path: Path, workdir: Path, variant: Variant = Variant()) -> Sweep:
    fixture = load_fixture(path, load_travel_contracts())
    assert fixture.expect is not None and fixture.expect.holds is not None
    sweep = Sweep(fixture=fixture.name)
    point = variant.first
    while True:
        folder = workdir / f"{fixture.name}-{point}"
        folder.mkdir()
        db = folder / "runs.sqlite"
        elsewhere = workdir / f"{fixture.name}-{point}-elsewhere" if variant.elsewhere else None
        stored = "runs.sqlite" if variant.elsewhere else str(db)  # relative to the run's folder
        args = ["run", str(path), "--db", stored, "--json", *variant.run_args]
        done = runner_process(args, folder, kill_after=point)
        if done.returncode == 0:
            return sweep  # the run finished before this commit: every point has been swept
        if done.returncode != -signal.SIGKILL:
            sweep.problems.append(f"crash point {point}: exit {done.returncode}: {done.stderr}")
            return sweep
        sweep.points += 1
        if elsewhere is not None:  # another store's world lives there: a place to go wrong in
            (elsewhere / "runs.sqlite.world").mkdir(parents=True)
        world = folder / "runs.sqlite.world"
        _check(
            sweep,
            point,
            fixture.expect.holds,
            db,
            world,
            elsewhere=elsewhere,
            resume_args=variant.resume_args,
        )
        point += variant.stride


HOLD_AFTER_COMMIT = FIXTURES / "hold_timeout_after_commit.yaml"


LIVE = "live-hold"  # holds for three guests where the fixture's script holds for four


@pytest.fixture
def llm() -> Iterator[RecordedLLMServer]:
    """Answers by conversation position, so a resumed run gets the answers a whole run gets."""
    with RecordedLLMServer(load_recordings(), by_turn=True) as server:
        yield server


def live_args(server: RecordedLLMServer, protocol: str = "openai") -> list[str]:
    url = f"{server.url}/v1" if protocol == "openai" else server.url
    return ["--model", f"{protocol}:{LIVE}", "--base-url", url]


def all_holds(root: Path) -> int:
    return sum(holds_in(world) for world in root.rglob("*.world"))


_POINTS: dict[str, int] = {}
"""The crash point right after the hold commits, per model kind (the same in every run)."""


GUESS = 10
"""Where the search for that point starts (10 today); it is found from any guess."""


def crash_after_the_hold(root: Path, run_args: list[str]) -> str:
    """Kill a run of the hold fixture right after the supplier committed the hold (its response
    is lost), in `root/run` with a relative `--db`; return the run's id."""
    kind = run_args[1] if run_args else "script"
    if kind not in _POINTS:
        point = GUESS
        if _crash(root, run_args, point) is None:  # before the hold: walk up to it
            while _crash(root, run_args, point + 1) is None and point < 60:
                point += 1
            point += 1
        else:  # at or after the hold: walk down to the last point before it
            while point > 1 and _crash(root, run_args, point - 1) is not None:
                point -= 1
        _POINTS[kind] = point
    run_id = _crash(root, run_args, _POINTS[kind])
    assert run_id is not None
    return run_id


def _crash(root: Path, run_args: list[str], point: int) -> str | None:
    """The run's id if, killed after commit `point`, its hold had committed (else None)."""
    folder = root / "run"
    if folder.exists():
        _remove(folder)
    folder.mkdir(parents=True)
    args = ["run", str(HOLD_AFTER_COMMIT), "--db", "runs.sqlite", "--json", *run_args]
    done = runner_process(args, folder, kill_after=point)
    assert done.returncode != 0, "the run finished before its hold committed"
    store = SqliteStore(folder / "runs.sqlite")
    runs = store.runs()
    store.close()
    return runs[0].header.run_id if runs and all_holds(folder) == 1 else None


def _remove(folder: Path) -> None:
    for path in sorted(folder.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    folder.rmdir()


def resume(root: Path, run_id: str, *extra: str, cwd: Path | None = None) -> tuple[int, str, str]:
    db = root / "run" / "runs.sqlite"
    done = runner_process(
        ["resume", run_id, "--db", str(db), "--json", *extra], cwd or root / "run"
    )
    return done.returncode, done.stdout, done.stderr
