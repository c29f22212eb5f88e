"""The service's run queue on PostgreSQL when it could not be opened at first (the database
down at the process's first submit): procrastinate kept the pool that failed to open, closed,
and every later submit of the process failed on it, an approval's continuation included. It is
made afresh at the next request, and the continuations decided meanwhile are queued, once."""

from __future__ import annotations

import asyncio
import types
from datetime import UTC, datetime

import psycopg
import pytest
from procrastinate.exceptions import ConnectorException
from psycopg_pool import PoolTimeout

from runner.base.clock import SystemClock
from runner.base.errors import StoreError
from runner.distributed.queue import continuation_job, job_arguments
from runner.service.queued import QueuedRunService
from runner.store.postgres import PostgresStore

WAITING = "run-decided-1"


def _decided_waiting_run(url: str) -> None:
    """A run that ended waiting for approval, its one proposal approved, nothing queued."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO runner_runs (run_id, started_at, header, terminal, summary) "
            "VALUES (%s, now(), '{}', 'escalate', '{}')",
            (WAITING,),
        )
        conn.execute(
            "INSERT INTO runner_approvals (run_id, operation_key, status, created_at, proposal) "
            "VALUES (%s, 'k', 'approved', now(), %s)",
            (WAITING, '{"decision": {"decided_at": "2026-12-01T00:00:00+00:00"}}'),
        )


def _jobs(url: str, run_id: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE args->>'run_id' = %s", (run_id,)
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _DownAtFirst:
    """The queue app as procrastinate leaves it when its pool cannot open: it raises (and kept
    the closed pool, so it would raise on every later use)."""

    closed = False

    async def open_async(self) -> None:
        raise ConnectorException("Database error.") from PoolTimeout("pool initialization")

    async def close_async(self) -> None:
        self.closed = True


@pytest.mark.anyio
async def test_a_queue_that_failed_to_open_is_made_afresh_and_queues_what_was_decided(
    pg_url: str,
) -> None:
    await (await PostgresStore.open(pg_url)).close()  # the runner's tables
    _decided_waiting_run(pg_url)
    service = types.SimpleNamespace(
        url=pg_url,
        _queue=_DownAtFirst(),  # as if the database were down at the first submit
        _opened=False,
        _open_failed=False,
        _opening=asyncio.Lock(),
        clock=SystemClock(),
    )
    for name in ("_open_queue", "_queue_decided"):
        setattr(service, name, types.MethodType(getattr(QueuedRunService, name), service))
    defer = types.MethodType(QueuedRunService._defer, service)
    first = job_arguments({"tenant": "t", "name": "x"}, 0)
    down = service._queue
    with pytest.raises(StoreError, match="the run queue cannot be used: PoolTimeout"):
        await defer([first])
    assert service._open_failed and not service._opened and down.closed
    # the next request: an approval's continuation (the waiting run's, decided meanwhile)
    (queued,) = await defer([continuation_job(WAITING, datetime.now(UTC))])
    assert queued == WAITING and service._opened and not service._open_failed
    assert _jobs(pg_url, WAITING) == 1  # once, not again by the catch-up of decided runs
    (second,) = await defer([job_arguments({"tenant": "t", "name": "x"}, 0)])
    assert _jobs(pg_url, second) == 1
    await service._queue.close_async()
