"""Many workers over one PostgreSQL store and procrastinate queue, with one worker killed mid-run
(SIGKILL, right after one of its durable commits) and another stopped (SIGTERM) and restarted.

Checked from the records alone: every run ends in the state its fixture declares (with the
fixture's reason, counts, waits, path and holds), no write intent made two holds, no run had two
owners at once (each transition row keeps the owner and lease generation it was written under),
and nothing was lost (every queued run ended, exactly once).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import psycopg

from runner.cli._distributed import fixture_job
from runner.distributed.queue import ensure_queue_schema, make_app, submit
from runner.harness.fixtures import Fixture, collect_fixture_paths, load_fixture
from runner.store.postgres import PostgresStore
from runner.travel.supplier import SupplierDatabase
from tests.support.paths import FIXTURES

RUNS = 200
WORKERS = 4
KILL_AFTER_COMMITS = 120
"""The victim worker dies (SIGKILL, by its own hand: runner/base/_failpoints.py) right after this
many durable commits: always in the middle of a run, often of a hold between its commit and its
record."""
FAST = ["--heartbeat", "0.5", "--stalled-after", "3", "--lease", "2", "--grace", "20"]


def _queue(url: str, contracts: Any) -> list[str]:
    fixtures = [load_fixture(p, contracts) for p in collect_fixture_paths([FIXTURES])]
    assert any("hold_room" in f.tools for f in fixtures)
    runs = [fixture_job(f, 0) for f in itertools.islice(itertools.cycle(fixtures), RUNS)]

    async def go() -> list[str]:
        app = make_app(url)
        async with app.open_async():
            await ensure_queue_schema(app, url)
            return await submit(app, runs)

    return asyncio.run(go())


def _worker(url: str, name: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "runner", "worker", "--db", url, "--concurrency", "4"]
    return subprocess.Popen(
        [*command, *FAST, "--name", name],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _ended(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM runner_runs WHERE summary IS NOT NULL").fetchone()
    return int(row[0]) if row else 0


def _wait_for(url: str, count: int, timeout_s: float) -> None:
    # Generous bounds: a passing run returns as soon as its runs end; a loaded machine is slow.
    deadline = time.monotonic() + timeout_s
    while _ended(url) < count:
        assert time.monotonic() < deadline, f"only {_ended(url)} of {count} runs ended in time"
        time.sleep(0.25)


def test_four_workers_two_hundred_runs_one_killed_one_restarted(
    pg_url: str, tmp_path: Path, contracts: Any
) -> None:
    run_ids = _queue(pg_url, contracts)
    assert len(set(run_ids)) == RUNS
    env = {**os.environ, "RUNNER_WORLD": str(tmp_path / "world")}
    env.pop("RUNNER_KILL_AFTER_COMMITS", None)
    victim = _worker(
        pg_url, "victim", tmp_path, {**env, "RUNNER_KILL_AFTER_COMMITS": str(KILL_AFTER_COMMITS)}
    )
    workers = [_worker(pg_url, f"w{n}", tmp_path, env) for n in range(1, WORKERS)]
    try:
        assert victim.wait(timeout=600) == -signal.SIGKILL  # died mid-run, by SIGKILL
        _wait_for(pg_url, RUNS // 2, timeout_s=900)
        stopped = workers[0]
        stopped.send_signal(signal.SIGTERM)  # finishes its runs in flight, then exits cleanly
        assert stopped.wait(timeout=300) == 0, stopped.stderr.read() if stopped.stderr else ""
        workers[0] = _worker(pg_url, "w1-restarted", tmp_path, env)
        _wait_for(pg_url, RUNS, timeout_s=1200)
    finally:
        for process in [victim, *workers]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [victim, *workers]:
            process.wait(timeout=300)
    asyncio.run(_check_records(pg_url, run_ids))


MID_WRITE = ("attempts", "waits_s", "transitions")
"""What a run taken over in the middle of a write may have more of than its fixture declares."""


def _taken_from(url: str, worker: str) -> int:
    """Runs whose lease `worker` held and another worker was granted after it (taken over).
    An owner is `WORKER/job-ID/NONCE`."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(DISTINCT g.run_id) FROM runner_lease_grants g "
            "JOIN runner_lease_grants later ON later.run_id = g.run_id "
            "AND later.generation > g.generation AND later.owner NOT LIKE %s "
            "WHERE g.owner LIKE %s",
            (f"{worker}/%", f"{worker}/%"),
        ).fetchone()
    return int(row[0]) if row else 0


def _granted(url: str) -> dict[str, int]:
    """How many owners each run's lease was granted to (more than one: taken over, or a job
    fetched again after its run ended)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT run_id, count(*) FROM runner_lease_grants GROUP BY run_id"
        ).fetchall()
    return {str(run_id): int(count) for run_id, count in rows}


async def _check_records(url: str, run_ids: list[str]) -> None:
    granted = _granted(url)
    store = await PostgresStore.open(url)
    try:
        listed = await store.runs()
        assert sorted(item.header.run_id for item in listed) == sorted(run_ids)  # type: ignore[union-attr]
        for run_id in run_ids:
            header, summary = await store.header(run_id), await store.summary(run_id)
            assert header is not None and summary is not None
            fixture = Fixture.model_validate(header.annotations["fixture"])
            records = await store.transitions(run_id)
            holds = _holds(header.annotations["world"].get("supplier_db"))
            expect = fixture.expect
            assert expect is not None
            got = {
                "terminal": summary.terminal,
                "reason": summary.reason,
                "attempts": summary.attempts,
                "model_steps": summary.model_steps,
                "holds": holds[0],
                "waits_s": [round(w, 3) for w in summary.waits_s],
                "transitions": ["plan", *(r.to_state for r in records)],
            }
            taken_over = granted.get(run_id, 0) > 1
            for name, value in got.items():
                wanted = getattr(expect, name)
                if isinstance(wanted, list):
                    wanted = [getattr(w, "value", w) for w in wanted]
                    wanted = [round(w, 3) if isinstance(w, float) else w for w in wanted]
                if wanted is None:
                    continue
                wanted = getattr(wanted, "value", wanted)
                if taken_over and name in MID_WRITE:
                    # Killed between a write's intent and its outcome, the run is resumed by
                    # reconciling that write (a lookup by key) before it goes on, and the
                    # scripted supplier plays its script to the writes it really received:
                    # more attempts, waits and transitions, as one process killed there gets
                    # (engine/test_crash_sweep.py::test_a_write_killed_in_flight_adds_attempts).
                    more = value if name == "attempts" else len(value)
                    assert more >= (wanted if name == "attempts" else len(wanted)), (
                        fixture.name,
                        name,
                        run_id,
                    )
                    continue
                if taken_over and name == "holds":
                    # Killed before its hold reached the supplier, a write whose lookup is
                    # inconclusive ends `unknown` (its key kept) with no hold: never one more.
                    assert value is not None and value <= wanted, (fixture.name, name, run_id)
                    continue
                assert value == wanted, (fixture.name, name, run_id)
            assert holds[1] <= 1, f"{fixture.name}: one intent made {holds[1]} holds"
            owners = await store.owners(run_id)
            generations = [g for _, _, g in owners]
            assert None not in generations and generations == sorted(generations)
            by_generation: dict[int | None, set[str | None]] = defaultdict(set)
            for _, owner, generation in owners:
                by_generation[generation].add(owner)
            assert all(len(o) == 1 for o in by_generation.values()), (run_id, by_generation)
        # Counted by lease, not by transitions: killed right after storing a run's header, the
        # victim left a run whose every transition the worker that took it over wrote.
        assert _taken_from(url, "victim") >= 1, "the killed worker's runs were taken over"
    finally:
        await store.close()


def _holds(path: str | None) -> tuple[int | None, int]:
    """Active holds in a run's supplier database, and the most holds made for one payload."""
    if not path:
        return None, 0
    supplier = SupplierDatabase.open_existing(Path(path), read_only=True)
    try:
        rows = supplier._conn.execute("SELECT payload_hash FROM holds").fetchall()
        return supplier.active_holds(), max(Counter(rows).values(), default=0)
    finally:
        supplier.close()


def test_a_run_killed_with_its_first_hold_in_flight_is_taken_over_and_checked(
    pg_url: str, tmp_path: Path, contracts: Any
) -> None:
    """The full-suite failure made deterministic: the victim dies (at its worker's 10th
    commit) with `hold_not_committed`'s first hold recorded but not yet at the supplier; another
    worker takes the run over, reconciles the hold (not found), and the supplier fails the first
    write it really receives: 5 attempts where the fixture declares 3 for an uninterrupted run,
    one hold, complete. The records check accepts that, and only for a run taken over."""
    fixture = load_fixture(FIXTURES / "hold_not_committed.yaml", contracts)

    async def go() -> list[str]:
        app = make_app(pg_url)
        async with app.open_async():
            await ensure_queue_schema(app, pg_url)
            return await submit(app, [fixture_job(fixture, 0)])

    run_ids = asyncio.run(go())
    env = {**os.environ, "RUNNER_WORLD": str(tmp_path / "world")}
    env.pop("RUNNER_KILL_AFTER_COMMITS", None)
    victim = _worker(pg_url, "victim", tmp_path, {**env, "RUNNER_KILL_AFTER_COMMITS": "10"})
    assert victim.wait(timeout=300) == -signal.SIGKILL
    heir = _worker(pg_url, "heir", tmp_path, env)
    try:
        _wait_for(pg_url, 1, timeout_s=300)
    finally:
        heir.send_signal(signal.SIGTERM)
        heir.wait(timeout=300)
    assert _granted(pg_url) == {run_ids[0]: 2}

    async def attempts() -> int:
        store = await PostgresStore.open(pg_url)
        try:
            summary = await store.summary(run_ids[0])
            assert summary is not None and summary.terminal == "complete"
            return summary.attempts
        finally:
            await store.close()

    assert asyncio.run(attempts()) == 5
    asyncio.run(_check_records(pg_url, run_ids))
