"""An application's own engine on PostgreSQL drives a run under the run's lease, as on SQLite.

Every drive (`Engine.run`, `start`, `resume`, `continue_approved`) takes the lease before anything
of the run is stored or sent, renews it while it drives, and lets it go after; a second driver (a
task, a process, a worker) is refused with `RunDriven` naming the holder before it sends anything.
A store handle whose caller holds the lease already (a worker's) drives under it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from runner.base.clock import SystemClock
from runner.base.errors import LeaseLost, RunDriven, StoreError
from runner.core.policy import ApprovalRules, Policy
from runner.core.states import State
from runner.engine import _ownership
from runner.engine.approvals import approve
from runner.engine.engine import Engine
from runner.engine.handle import RunHandle
from runner.store.adapters import BlockingStore
from runner.store.postgres import PostgresStore
from runner.tools.contracts import ContractSet
from tests.support import pg_driver_play as play
from tests.support.hold_doubles import NOW, SECRET, SPEC, HoldOnce, SlowHotel
from tests.support.paths import ROOT


def _play(*args: object) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "RUNNER_KILL_AFTER_COMMITS"}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.pg_driver_play", *map(str, args)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _sent(folder: Path) -> list[str]:
    sent = folder / "sent"
    return sent.read_text().splitlines() if sent.exists() else []


def _crashed(url: str, folder: Path) -> str:
    """A run killed (SIGKILL) in its lookup, before its refund was begun: its id."""
    crash = _play("crash", url, folder)
    out, err = crash.communicate(timeout=120)
    assert crash.returncode == -9, err
    assert not _sent(folder)
    return out.split()[1]


async def _stored(url: str, run_id: str) -> tuple[int, str | None]:
    store = await PostgresStore.open(url)
    try:
        summary = await store.summary(run_id)
        return len(await store.transitions(run_id)), summary.terminal if summary else None
    finally:
        await store.close()


def _expire(url: str, run_id: str) -> None:
    """The killed driver's lease, waited out (its 30 s), as if it expired."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE runner_leases SET expires_at = %s WHERE run_id = %s",
            (datetime.now(UTC) - timedelta(seconds=1), run_id),
        )


def _let_go(folder: Path) -> None:
    """The refunds in flight answer once one has been sent (and a second had time to be)."""
    deadline = time.monotonic() + 60
    while not _sent(folder) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    (folder / "go").touch()


def test_two_processes_resuming_one_run_at_once_send_its_write_once(
    pg_url: str, tmp_path: Path
) -> None:
    run_id = _crashed(pg_url, tmp_path)
    _expire(pg_url, run_id)
    resumes = [_play("resume", pg_url, tmp_path, run_id) for _ in range(2)]
    deadline = time.monotonic() + 30  # until one is refused (or, both driving, a while)
    while all(p.poll() is None for p in resumes) and time.monotonic() < deadline:
        time.sleep(0.02)
    (tmp_path / "go").touch()
    outs = sorted(p.communicate(timeout=120)[0].strip() for p in resumes)
    assert outs[0] == "ended complete", outs
    assert outs[1].startswith("refused RunDriven"), outs
    assert f"pid {resumes[0].pid}" in outs[1] or f"pid {resumes[1].pid}" in outs[1]
    assert len(_sent(tmp_path)) == 1
    assert asyncio.run(_stored(pg_url, run_id))[1] == "complete"


@pytest.mark.parametrize("shared", [False, True], ids=["two store handles", "one engine"])
def test_two_tasks_resuming_one_run_at_once_send_its_write_once(
    pg_url: str, tmp_path: Path, shared: bool
) -> None:
    run_id = _crashed(pg_url, tmp_path)
    _expire(pg_url, run_id)

    async def both() -> list[object]:
        stores = [await PostgresStore.open(pg_url) for _ in range(1 if shared else 2)]
        try:
            engines = [play.engine(store, tmp_path) for store in stores]
            engines = engines * 2 if shared else engines
            resumes = [engine.resume(run_id, play.SPEC, play.MODEL) for engine in engines]
            letting_go = asyncio.create_task(asyncio.to_thread(_let_go, tmp_path))
            results = await asyncio.gather(*resumes, return_exceptions=True)
            await letting_go
            return results
        finally:
            for store in stores:
                await store.close()

    results = asyncio.run(both())
    ended = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert [r.terminal for r in ended] == [State.COMPLETE]  # type: ignore[attr-defined]
    assert len(refused) == 1 and isinstance(refused[0], RunDriven), refused
    assert "this process: another task or thread drives it" in str(refused[0])
    assert len(_sent(tmp_path)) == 1


def test_a_worker_holding_the_lease_refuses_a_resume_until_it_lets_go(
    pg_url: str, tmp_path: Path
) -> None:
    run_id = _crashed(pg_url, tmp_path)
    _expire(pg_url, run_id)
    (tmp_path / "go").touch()

    async def scenario() -> None:
        worker, mine = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
        try:
            now = datetime.now(UTC)
            lease = await worker.acquire_lease(run_id, "worker-7", now, timedelta(seconds=30))
            assert lease is not None
            before = await _stored(pg_url, run_id)
            with pytest.raises(RunDriven, match="worker-7") as refused:
                await play.engine(mine, tmp_path).resume(run_id, play.SPEC, play.MODEL)
            assert refused.value.holder == "worker-7"
            assert await _stored(pg_url, run_id) == before and not _sent(tmp_path)
            await worker.release_lease(lease)
            result = await play.engine(mine, tmp_path).resume(run_id, play.SPEC, play.MODEL)
            assert result.terminal is State.COMPLETE
            assert len(_sent(tmp_path)) == 1
        finally:
            await worker.close()
            await mine.close()

    asyncio.run(scenario())


def test_a_worker_lease_that_expired_is_taken_over(pg_url: str, tmp_path: Path) -> None:
    run_id = _crashed(pg_url, tmp_path)
    _expire(pg_url, run_id)
    (tmp_path / "go").touch()

    async def scenario() -> None:
        worker, mine = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
        try:
            ttl = timedelta(seconds=0.5)
            assert await worker.acquire_lease(run_id, "worker-7", datetime.now(UTC), ttl)
            await asyncio.sleep(0.6)
            result = await play.engine(mine, tmp_path).resume(run_id, play.SPEC, play.MODEL)
            assert result.terminal is State.COMPLETE and len(_sent(tmp_path)) == 1
            with pytest.raises(LeaseLost):  # the worker, were it still going, is fenced off
                await worker.end_run(await mine.summary(run_id))  # type: ignore[arg-type]
        finally:
            await worker.close()
            await mine.close()

    asyncio.run(scenario())


def test_a_handle_holding_the_lease_drives_under_it(pg_url: str, tmp_path: Path) -> None:
    run_id = _crashed(pg_url, tmp_path)
    _expire(pg_url, run_id)
    (tmp_path / "go").touch()

    async def scenario() -> None:
        store = await PostgresStore.open(pg_url)
        try:
            now, ttl = datetime.now(UTC), timedelta(seconds=30)
            lease = await store.acquire_lease(run_id, "worker-1", now, ttl)
            assert lease is not None and store.holds_lease(run_id)
            result = await play.engine(store, tmp_path).resume(run_id, play.SPEC, play.MODEL)
            assert result.terminal is State.COMPLETE and len(_sent(tmp_path)) == 1
            owners = await store.owners(run_id)
            assert {(o, g) for _, o, g in owners if o == "worker-1"} == {
                ("worker-1", lease.generation)
            }
            assert owners[-1][1:] == ("worker-1", lease.generation)  # no second generation
            assert await store.acquire_lease(run_id, "worker-1", now, ttl) == lease
            await store.release_lease(lease)
            assert not store.holds_lease(run_id)
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_run_with_a_given_id_another_holds_is_refused_before_it_is_stored(
    pg_url: str, tmp_path: Path
) -> None:
    (tmp_path / "go").touch()

    async def scenario() -> None:
        worker, mine = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
        try:
            run_id = "given-1"
            ttl = timedelta(seconds=30)
            assert await worker.acquire_lease(run_id, "worker-9", datetime.now(UTC), ttl)
            with pytest.raises(RunDriven, match="worker-9"):
                await play.engine(mine, tmp_path).run(play.SPEC, play.MODEL, run_id=run_id)
            handle = play.engine(mine, tmp_path).start(play.SPEC, play.MODEL, run_id=run_id)
            with pytest.raises(RunDriven, match="worker-9"):
                await handle.result()
            assert await mine.header(run_id) is None and not _sent(tmp_path)
            result = await play.engine(worker, tmp_path).run(play.SPEC, play.MODEL, run_id=run_id)
            assert result.terminal is State.COMPLETE  # the holder's own handle drives it
        finally:
            await worker.close()
            await mine.close()

    asyncio.run(scenario())


def test_a_drive_renews_its_lease_and_releases_it_when_cut_short(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ownership, "LEASE_TTL", timedelta(seconds=0.6))
    ttl = timedelta(seconds=30)

    async def scenario() -> None:
        mine, other = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
        try:
            handle = play.engine(mine, tmp_path).start(play.SPEC, play.MODEL)
            while not _sent(tmp_path):
                await asyncio.sleep(0.02)
            await asyncio.sleep(1.5)  # two and a half of its leases: renewed meanwhile
            assert await other.acquire_lease(handle.run_id, "x", datetime.now(UTC), ttl) is None
            named = f"runner run {handle.run_id}"
            [task] = [t for t in asyncio.all_tasks() if t.get_name() == named]
            task.cancel()  # the drive stops short of the run's end: its lease is let go
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await other.acquire_lease(handle.run_id, "x", datetime.now(UTC), ttl)
        finally:
            await mine.close()
            await other.close()

    asyncio.run(scenario())


def test_a_run_that_ended_leaves_its_lease_to_expire(pg_url: str, tmp_path: Path) -> None:
    """A commit saved per run: an ended run is never driven again."""
    (tmp_path / "go").touch()

    async def scenario() -> None:
        mine, other = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
        try:
            engine = play.engine(mine, tmp_path)
            result = await engine.run(play.SPEC, play.MODEL)
            now, ttl = datetime.now(UTC), timedelta(seconds=30)
            assert await other.acquire_lease(result.run_id, "x", now, ttl) is None
            with pytest.raises(StoreError, match="already ended"):
                await engine.resume(result.run_id, play.SPEC, play.MODEL)
            later = now + _ownership.LEASE_TTL
            assert await other.acquire_lease(result.run_id, "x", later, ttl)
        finally:
            await mine.close()
            await other.close()

    asyncio.run(scenario())


def test_a_drive_whose_lease_was_taken_over_stops_with_lease_lost_and_sends_nothing(
    pg_url: str, tmp_path: Path
) -> None:
    run_id = _crashed(pg_url, tmp_path)
    _expire(pg_url, run_id)
    (tmp_path / "go").touch()

    async def scenario() -> None:
        mine, other = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
        try:
            entered, release = asyncio.Event(), asyncio.Event()

            async def paused() -> None:  # the lookup waits until the lease is taken over
                entered.set()
                await release.wait()

            engine = play.engine(mine, tmp_path, before_lookup=paused)
            resuming = asyncio.create_task(engine.resume(run_id, play.SPEC, play.MODEL))
            await entered.wait()
            _expire(pg_url, run_id)
            now = datetime.now(UTC)
            assert await other.acquire_lease(run_id, "taker", now, timedelta(seconds=30))
            release.set()
            with pytest.raises(LeaseLost):
                await resuming
            assert not _sent(tmp_path)  # its refund was never sent beside the new owner
        finally:
            await mine.close()
            await other.close()

    asyncio.run(scenario())


def test_a_resume_whose_caller_is_cancelled_keeps_the_lease_while_its_run_goes_on(
    pg_url: str, tmp_path: Path
) -> None:
    """`started`: the run is its task's (`RunHandle.result` shields it), and so is its lease."""
    run_id = _crashed(pg_url, tmp_path)
    _expire(pg_url, run_id)

    async def scenario() -> None:
        mine, other = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
        try:
            handles: list[RunHandle] = []
            engine = play.engine(mine, tmp_path)
            caller = asyncio.create_task(
                engine.resume(run_id, play.SPEC, play.MODEL, started=handles.append)
            )
            while not handles:
                await asyncio.sleep(0)
            caller.cancel()  # before the run's task took its first step
            with pytest.raises(asyncio.CancelledError):
                await caller
            with pytest.raises(RunDriven):
                await play.engine(other, tmp_path).resume(run_id, play.SPEC, play.MODEL)
            (tmp_path / "go").touch()
            assert (await handles[0].result()).terminal is State.COMPLETE
            assert len(_sent(tmp_path)) == 1
        finally:
            await mine.close()
            await other.close()

    asyncio.run(scenario())


def test_a_continuation_is_driven_under_a_lease_of_its_own(
    contracts: ContractSet, pg_url: str
) -> None:
    """`continue_approved` leases the new run before its header is stored (every row it writes
    names this process's drive and generation 1), as `run` does."""

    async def scenario() -> None:
        store = await PostgresStore.open(pg_url)
        hotel = SlowHotel()
        hotel.release.set()
        policy = Policy(approval=ApprovalRules(tools=("hold_room",)))
        engine = Engine(
            contracts=contracts,
            toolbox=hotel.tools(),
            store=store,
            clock=SystemClock(),
            policy=policy,
        )
        try:
            waiting = await engine.run(SPEC, HoldOnce())
            approver = BlockingStore(lambda: PostgresStore.open(pg_url))
            try:
                approve(approver, waiting.run_id, approver="alice", secret=SECRET, now=NOW)
            finally:
                approver.close()
            continued = await engine.continue_approved(
                waiting.run_id, SPEC, HoldOnce(), secret=SECRET, now=NOW
            )
            assert continued.terminal is State.COMPLETE and len(hotel.holds) == 1
            me = _ownership.this_process()
            for run_id in (waiting.run_id, continued.run_id):
                owners = await store.owners(run_id)
                assert owners and {g for _, _, g in owners} == {1}
                assert all(f"{me.host} pid {me.pid} " in str(o) for _, o, _ in owners), owners
        finally:
            await store.close()

    asyncio.run(scenario())
