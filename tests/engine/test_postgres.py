"""The engine on an awaited store (PostgreSQL): it stores what it stores on SQLite, and a run that
stopped with its write in flight is resumed from another engine and process-like handle, where
the write is reconciled by key (looked up, not made again) under a new lease."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from runner.base.clock import SystemClock
from runner.base.errors import ConfigError, LeaseLost
from runner.core.states import State
from runner.engine.engine import Engine
from runner.proof import api
from runner.store import SqliteStore
from runner.store.postgres import PostgresStore
from runner.tools.contracts import ContractSet
from tests.support.hold_doubles import SPEC, HoldOnce, SlowHotel

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _untimed(records: list[object]) -> list[dict[str, object]]:
    shown = [r.to_json() for r in records]  # type: ignore[attr-defined]
    return [
        {k: v for k, v in r.items() if k not in {"time", "latency_ms", "run_id", "operation_key"}}
        for r in shown
    ]


async def test_a_run_on_postgres_stores_what_it_stores_on_sqlite(
    contracts: ContractSet, pg_url: str, tmp_path: Path
) -> None:
    results = []
    for store in (await PostgresStore.open(pg_url), SqliteStore(tmp_path / "s.sqlite")):
        hotel = SlowHotel()
        hotel.release.set()
        engine = Engine(
            contracts=contracts, toolbox=hotel.tools(), store=store, clock=SystemClock()
        )
        result = await engine.run(SPEC, HoldOnce())
        if isinstance(store, PostgresStore):
            stored = (await store.transitions(result.run_id), await store.operations(result.run_id))
            summary = await store.summary(result.run_id)
            await store.close()
        else:
            stored = (store.transitions(result.run_id), store.operations(result.run_id))
            summary = store.summary(result.run_id)
            store.close()
        assert summary is not None and summary.terminal == "complete"
        assert len(hotel.holds) == 1
        results.append((_untimed(stored[0]), [(o.tool, o.status, o.dispatch) for o in stored[1]]))
    on_postgres, on_sqlite = results
    assert on_postgres == on_sqlite


async def test_a_run_stopped_mid_write_is_taken_over_and_reconciled_not_written_again(
    contracts: ContractSet, pg_url: str
) -> None:
    ttl, clock = timedelta(seconds=30), SystemClock()
    first_store = await PostgresStore.open(pg_url)
    hotel = SlowHotel()  # commits the hold, then never answers this worker
    engine = Engine(contracts=contracts, toolbox=hotel.tools(), store=first_store, clock=clock)
    run_id = str(uuid.uuid4())  # leased before the run writes anything, as a worker does
    first = await first_store.acquire_lease(run_id, "worker-a", clock.now(), ttl)
    assert first is not None
    handle = engine.start(SPEC, HoldOnce(), run_id=run_id)
    await hotel.entered.wait()  # the intent is stored; the hold committed; no answer yet
    # The worker is gone (its lease stays until it expires): its run's task stops where it is.
    [task] = [t for t in asyncio.all_tasks() if t.get_name() == f"runner run {handle.run_id}"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [pending] = await first_store.operations(handle.run_id)
    assert pending.status == "pending" and await first_store.summary(handle.run_id) is None

    second_store = await PostgresStore.open(pg_url)
    assert await second_store.acquire_lease(handle.run_id, "worker-b", clock.now(), ttl) is None
    taken = await second_store.acquire_lease(handle.run_id, "worker-b", clock.now() + ttl, ttl)
    assert taken is not None and taken.generation == 2
    engine_b = Engine(contracts=contracts, toolbox=hotel.tools(), store=second_store, clock=clock)
    result = await engine_b.resume(handle.run_id, SPEC, HoldOnce())
    assert result.terminal is State.COMPLETE
    assert len(hotel.holds) == 1 and hotel.lookups == 1  # reconciled by key, not held again
    [settled] = await second_store.operations(handle.run_id)
    assert settled.status == "committed"
    owners = await second_store.owners(handle.run_id)
    assert [g for _, _, g in owners] == sorted(g for _, _, g in owners)
    assert {o for _, o, g in owners if g == 2} == {"worker-b"}
    with pytest.raises(LeaseLost):  # the first worker, were it still alive, can no longer write
        await first_store.end_run(await second_store.summary(handle.run_id))  # type: ignore[arg-type]
    await first_store.close()
    await second_store.close()


async def test_a_service_reads_a_postgres_store_from_its_own_loop(
    contracts: ContractSet, pg_url: str
) -> None:
    """Engine + handles on PostgreSQL, then status, listing, replay and grade through runner.api,
    awaited in the same loop; the synchronous readers name what to await instead."""
    store = await PostgresStore.open(pg_url)
    hotel = SlowHotel()
    hotel.release.set()
    engine = Engine(contracts=contracts, toolbox=hotel.tools(), store=store, clock=SystemClock())
    handles = [engine.start(SPEC, HoldOnce()) for _ in range(2)]
    results = [await handle.result() for handle in handles]
    assert [r.terminal for r in results] == [State.COMPLETE, State.COMPLETE]
    listed = await api.list_runs_async(store)
    assert {s.run_id for s in listed if isinstance(s, api.RunStatus)} == {h.run_id for h in handles}
    status = await api.run_status_async(store, handles[0].run_id)
    assert status.status == "ended" and status.state == State.COMPLETE and status.transitions
    replayed = await api.replay_run(store, handles[1].run_id, contracts)
    assert replayed.identical, replayed.divergence
    assert (await api.grade_run(store, handles[1].run_id, contracts)).passed
    with pytest.raises(ConfigError, match="await run_status_async"):
        api.run_status(store, handles[0].run_id)  # type: ignore[arg-type]
    await store.close()
