"""A worker keeps a run's lease while it drives it (renewed past its expiry), waits out another
live owner's, and gives it up when done."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from datetime import timedelta
from typing import Any

from runner.base.clock import SystemClock
from runner.base.errors import LeaseLost
from runner.distributed.worker import RunDriver, WorkerSettings
from runner.store.adapters import BlockingStore
from runner.store.base import Lease, Store
from runner.store.postgres import PostgresStore

LEASE_S = 0.6


class _Job:
    id = 7


class _Context:
    job = _Job()


def test_a_driven_run_keeps_its_lease_past_expiry_and_frees_it_after(pg_url: str) -> None:
    clock = SystemClock()
    driver_store = BlockingStore(lambda: PostgresStore.open(pg_url))
    other = BlockingStore(lambda: PostgresStore.open(pg_url))
    seen: list[Lease | None] = []
    lines: list[str] = []

    def play(store: Store, run_id: str, document: dict[str, Any], seed: int, _: Any) -> str:
        for _ in range(3):  # 1.5 leases long: only renewals keep it
            time.sleep(LEASE_S / 2)
            seen.append(other.acquire_lease(run_id, "intruder", clock.now(), timedelta(seconds=9)))
        return f"{run_id} done"

    settings = WorkerSettings(lease_s=LEASE_S, name="w")
    driver = RunDriver(driver_store, play=play, settings=settings, report=lines.append)
    try:
        asyncio.run(driver.drive(_Context(), "r1", {}, 0))  # type: ignore[arg-type]
        assert seen == [None, None, None] and lines == ["r1 done"]
        after = other.acquire_lease("r1", "next", clock.now(), timedelta(seconds=9))
        assert after is not None and after.generation == 2  # released: taken at once
    finally:
        driver_store.close()
        other.close()


def test_a_worker_waits_out_a_live_owner_then_takes_the_run(pg_url: str) -> None:
    clock = SystemClock()
    store = BlockingStore(lambda: PostgresStore.open(pg_url))
    held = store.acquire_lease("r1", "dead-worker", clock.now(), timedelta(seconds=LEASE_S))
    assert held is not None
    taken_at: list[float] = []

    def play(store: Store, run_id: str, document: dict[str, Any], seed: int, _: Any) -> None:
        taken_at.append(time.monotonic())

    driver = RunDriver(
        store, play=play, settings=WorkerSettings(lease_s=LEASE_S, name="w"), report=print
    )
    started = time.monotonic()
    try:
        asyncio.run(driver.drive(_Context(), "r1", {}, 0))  # type: ignore[arg-type]
    finally:
        store.close()
    assert taken_at and taken_at[0] - started >= LEASE_S * 0.9


def test_a_run_handed_back_at_shutdown_is_free_at_once_and_its_straggler_fenced(
    pg_url: str,
) -> None:
    """Past the SIGTERM grace, procrastinate cancels the job (and re-queues it): the lease is
    released at once for the next worker, and the run's thread, still going, cannot write once
    that worker has taken the run."""
    clock = SystemClock()
    store = BlockingStore(lambda: PostgresStore.open(pg_url))
    other = BlockingStore(lambda: PostgresStore.open(pg_url))
    from tests.support.store_contract import header, record  # noqa: PLC0415

    store.begin_run(header("r1"))
    taken = threading.Event()
    outcome: list[BaseException | None] = []

    def play(driven: Store, run_id: str, document: dict[str, Any], seed: int, _: Any) -> None:
        driven.append(record(1, run_id=run_id))
        taken.wait(timeout=10)  # still driving when the job is cancelled and the run taken
        try:
            driven.append(record(2, run_id=run_id))
            outcome.append(None)
        except LeaseLost as exc:
            outcome.append(exc)

    settings = WorkerSettings(lease_s=30.0, name="w")
    driver = RunDriver(store, play=play, settings=settings, report=print)

    async def shutdown() -> Lease | None:
        job = asyncio.create_task(driver.drive(_Context(), "r1", {}, 0))  # type: ignore[arg-type]
        await asyncio.sleep(0.5)
        job.cancel()  # what procrastinate does past the grace
        with contextlib.suppress(asyncio.CancelledError):
            await job
        after = await asyncio.to_thread(
            other.acquire_lease, "r1", "next", clock.now(), timedelta(seconds=30)
        )
        taken.set()  # the thread goes on only now, under a run another worker owns
        return after  # asyncio.run then waits for the thread to end

    try:
        after = asyncio.run(shutdown())
        assert after is not None and after.generation == 2  # free at once, not in 30 s
        assert outcome and isinstance(outcome[0], LeaseLost)
        assert [r.seq for r in other.transitions("r1")] == [1]
    finally:
        taken.set()
        store.close()
        other.close()


def test_a_job_requeued_while_its_worker_still_drives_it_is_not_driven_twice(
    pg_url: str,
) -> None:
    """Under load a live worker's queue heartbeat can lapse: the stalled-job sweep re-queues its
    job (same job id) while the run is still driven, and the same worker may fetch it again. The
    second drive must wait for the first, not inherit its lease (same owner, same generation:
    the fence could not tell the two apart) and drive the run at the same time."""
    store = BlockingStore(lambda: PostgresStore.open(pg_url))
    driving = 0
    overlapped: list[int] = []
    lines: list[str] = []

    def play(store: Store, run_id: str, document: dict[str, Any], seed: int, _: Any) -> str:
        nonlocal driving
        driving += 1
        overlapped.append(driving)
        time.sleep(LEASE_S / 2)
        driving -= 1
        return f"{run_id} played"

    settings = WorkerSettings(lease_s=LEASE_S, name="w")
    driver = RunDriver(store, play=play, settings=settings, report=lines.append)

    async def twice() -> None:
        first = driver.drive(_Context(), "r1", {}, 0)  # type: ignore[arg-type]
        again = driver.drive(_Context(), "r1", {}, 0)  # type: ignore[arg-type]
        await asyncio.gather(first, again)

    try:
        asyncio.run(twice())
    finally:
        store.close()
    assert overlapped == [1, 1] and lines == ["r1 played", "r1 played"]
