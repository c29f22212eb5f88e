"""What only a shared PostgreSQL database can show: processes racing on one key, migrating one new
database at once, a newer schema refused, and the URL's password kept out of every message."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Barrier

import psycopg
import pytest

from runner.base.errors import StoreCorrupt, StoreError
from runner.record.operations import Operation, OperationStatus
from runner.store._pg_schema import MIGRATIONS
from runner.store.postgres import PostgresStore
from runner.store.urls import hide_password
from tests.support.pg import Cluster
from tests.support.store_contract import _output as output
from tests.support.store_contract import header

T0 = datetime(2027, 3, 1, 9, tzinfo=UTC)
RACERS = 8


def _intent(dispatch: int) -> Operation:
    return Operation(
        key="optiverse:hold_room:race",
        tenant="optiverse",
        tool="hold_room",
        run_id="r-race",
        params_hash="h1",
        status=OperationStatus.PENDING,
        created_at=T0,
        expires_at=T0 + timedelta(hours=1),
        dispatch=dispatch,
    )


def _racer(url: str, number: int, start: Barrier) -> None:
    """Claim the shared key once everyone is ready; perform the effect only if the claim was new
    (the returned record is this process's own intent), as the engine dispatches only then."""

    async def race() -> None:
        store = await PostgresStore.open(url)
        try:
            start.wait()
            mine = _intent(dispatch=number)
            if await store.claim(mine) == mine:
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("INSERT INTO race_effects (racer) VALUES (%s)", (number,))
        finally:
            await store.close()

    asyncio.run(race())


def _opener(url: str, start: Barrier) -> None:
    async def open_at_once() -> None:
        start.wait()
        store = await PostgresStore.open(url)
        await store.close()

    asyncio.run(open_at_once())


def _in_processes(target: object, url: str, *, numbered: bool) -> None:
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(RACERS)
    args = [(url, n, start) if numbered else (url, start) for n in range(1, RACERS + 1)]
    processes = [spawn.Process(target=target, args=a) for a in args]  # type: ignore[arg-type]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    assert [p.exitcode for p in processes] == [0] * RACERS


def test_eight_processes_claiming_one_key_make_one_effect(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE race_effects (racer integer NOT NULL)")
    _in_processes(_racer, pg_url, numbered=True)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        effects = conn.execute("SELECT racer FROM race_effects").fetchall()
        [(status, dispatch)] = conn.execute(
            "SELECT status, dispatch FROM runner_operations"
        ).fetchall()
    assert len(effects) == 1
    assert status == "pending" and 1 <= dispatch <= RACERS


def test_eight_processes_opening_a_new_database_migrate_it_once(pg_url: str) -> None:
    _in_processes(_opener, pg_url, numbered=False)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM runner_schema").fetchall() == [(len(MIGRATIONS),)]


@pytest.mark.anyio
async def test_a_database_from_a_newer_runner_is_refused(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    await store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE runner_schema SET version = 99")
    with pytest.raises(StoreCorrupt, match="schema version 99 is newer than this runner knows"):
        await PostgresStore.open(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # refused, and left as it was
        assert conn.execute("SELECT version FROM runner_schema").fetchall() == [(99,)]


@pytest.mark.anyio
async def test_two_outputs_for_one_ordinal_are_corrupt(pg_url: str) -> None:
    """The table's key keeps one row per ordinal, but a row's body edited to another's ordinal
    holds two outcomes for one dispatch: the reader names it, as the other stores do."""
    store = await PostgresStore.open(pg_url)
    try:
        await store.begin_run(header())
        await store.append_inputs("r1", [output(1), output(2)])
        assert [o.ordinal for o in await store.outputs("r1")] == [1, 2]
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE runner_outputs SET output = jsonb_set(output::jsonb, '{ordinal}', '1')"
                "::text WHERE run_id = 'r1' AND ordinal = 2"
            )
        with pytest.raises(StoreCorrupt, match="run r1 tool output 1 recorded twice"):
            await store.outputs("r1")
    finally:
        await store.close()


@pytest.mark.anyio
async def test_the_password_in_the_url_reaches_no_message_or_log(
    pg_cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"postgresql://runner:hunter2-secret@127.0.0.1:{pg_cluster.port}/no_such_database"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StoreError) as caught:
        await PostgresStore.open(url, timeout_s=2.0)
    message = str(caught.value)
    assert "no_such_database" in message and "runner:***@127.0.0.1" in message
    assert "hunter2" not in message and "hunter2" not in caplog.text
    assert caught.value.__cause__ is None and caught.value.__context__ is not None
    assert "hunter2" not in hide_password(url + "?password=hunter2&sslmode=disable")


def test_import_runner_does_not_import_psycopg() -> None:
    script = "import sys, runner, runner.store, runner.cli; print('psycopg' in sys.modules)"
    shown = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    )
    assert shown.stdout.strip() == "False"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_read_on_connections_the_server_closed_is_asked_again_on_fresh_ones(
    pg_url: str,
) -> None:
    """After a server restart each pooled connection failed one read (`runner serve` answered
    500 store_error to four requests in a row): a read is asked again on another connection, as
    many times as the pool holds."""
    store = await PostgresStore.open(pg_url, min_size=4, max_size=4)
    try:
        await store.begin_run(header())
        await asyncio.gather(*(store.header("r1") for _ in range(8)))  # every connection used
        with psycopg.connect(pg_url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        assert killed[0][0] >= 4
        for _ in range(3):
            found = await store.header("r1")
            assert found is not None and found.run_id == "r1"
    finally:
        await store.close()


@pytest.mark.anyio
async def test_a_read_that_times_out_waiting_for_the_pool_is_not_asked_again(pg_url: str) -> None:
    """Only a lost connection is asked again: a read on an exhausted pool failed only after
    waiting the pool's timeout once per connection it may hold (50 s for `runner serve`)."""
    store = await PostgresStore.open(pg_url, min_size=1, max_size=2, timeout_s=1.0)
    try:
        async with store._pool.connection(), store._pool.connection():  # both held
            started = time.monotonic()
            with pytest.raises(StoreError):
                await store.header("r1")
            assert time.monotonic() - started < 1.9
    finally:
        await store.close()
