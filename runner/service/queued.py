"""The service on a PostgreSQL store: runs go to the procrastinate queue that `runner worker`s
drive, and every service process reads the one store, so any of them serves any run.

A run accepted by one process and not yet started by a worker is found through its queued job
(its document carries the tenant). A cancel is a request kept in the store (`runner_cancels`),
which the worker driving the run reads with each transition it appends and passes on to the run's
handle; a run cancelled while still queued ends `cancelled` as soon as a worker takes it. The
approval ledger is the store's (`runner_approvals`); a decided run's continuation is queued for
the workers (they need the same `RUNNER_APPROVAL_SECRET` as this service's `approval_secret`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import anyio.from_thread
import psycopg
import structlog
from procrastinate.exceptions import ConnectorException
from psycopg_pool import PoolTimeout

from ..base.clock import Clock
from ..base.errors import StoreError
from ..core.confirm import ApprovalSecret
from ..distributed.queue import (
    CONTINUE,
    QUEUE,
    continuation_job,
    ensure_queue_schema,
    job_arguments,
    make_app,
    submit,
)
from ..harness.world import World
from ..store.adapters import BlockingStore
from ..store.postgres import PostgresStore
from ..tools.contracts import ContractSet
from .config import ApiKey, ServiceConfig
from .errors import ApiError
from .live import LiveRun, live_document
from .runs import RunService, queued_item

_log = structlog.get_logger("runner.service")

_QUEUED_TENANT = (
    "SELECT args->'document'->>'tenant' FROM procrastinate_jobs WHERE args->>'run_id' = %s "
    "AND args->'document' ? 'tenant' LIMIT 1"
)
_QUEUED_RUNS = (  # runs a worker has not begun: their jobs wait, or failed for good
    "SELECT args->>'run_id', args->'document'->>'name', status::text FROM procrastinate_jobs "
    "WHERE args->'document'->>'tenant' = %s AND status IN ('todo', 'doing', 'failed') "
    "ORDER BY id"
)
_WAITING = (  # new runs (not continuations) no worker has taken yet
    "SELECT count(*) FROM procrastinate_jobs WHERE queue_name = %s AND status = 'todo' "
    "AND args->'document' ? 'tenant'"
)
_JOB_FAILED = (  # the run's own job (not a continuation's), failed after its retries
    "SELECT 1 FROM procrastinate_jobs WHERE args->>'run_id' = %s "
    "AND args->'document' ? 'tenant' AND status = 'failed' LIMIT 1"
)
_DEFERRED_AT = (  # when the run's job was queued: when this service accepted the run
    "SELECT min(e.at) FROM procrastinate_jobs j JOIN procrastinate_events e ON e.job_id = j.id "
    "WHERE j.args->>'run_id' = %s AND j.args->'document' ? 'tenant' AND e.type = 'deferred'"
)
_ACCEPTED_TIMES = (  # the tenant's runs and every continuation, with when each was queued
    "SELECT j.args->>'run_id', CASE WHEN j.args->'document' ? %s THEN 'continue' "
    "ELSE 'fixture' END, min(e.at) FROM procrastinate_jobs j "
    "JOIN procrastinate_events e ON e.job_id = j.id AND e.type = 'deferred' "
    "WHERE j.args->'document'->>'tenant' = %s OR j.args->'document' ? %s GROUP BY 1, 2"
)
_DECIDED_NOT_CONTINUED = (  # waiting runs, every proposal decided, no continuation, no job
    "SELECT a.run_id, max(a.proposal::jsonb->'decision'->>'decided_at') FROM runner_approvals a "
    "JOIN runner_runs r ON r.run_id = a.run_id AND r.terminal = 'escalate' "
    "WHERE NOT EXISTS (SELECT 1 FROM runner_runs c "
    "WHERE (c.header::jsonb)->'continues'->>'run_id' = a.run_id) "
    "AND NOT EXISTS (SELECT 1 FROM procrastinate_jobs j "
    "WHERE j.args->>'run_id' = a.run_id AND j.args->'document' ? %s) "
    "GROUP BY a.run_id HAVING bool_and(a.status <> 'pending') ORDER BY 2"
)
_TAKE_UP_LOCK: Final = 0x72756E_0002
"""Held by the one service process that looks for decided runs at a time (see `recover`)."""
FAILURE_CHECK_S = 2.0
FAILED_ON_A_WORKER = "its job failed on every worker that took it (see the workers' logs)"
_CONTINUATION_JOBS = (  # the run's queued continuations, newest first
    "SELECT status::text FROM procrastinate_jobs WHERE args->>'run_id' = %s "
    "AND args->'document' ? %s ORDER BY id DESC"
)
REFUSED_ON_A_WORKER = (
    "a worker refused to continue it: an approval no longer holds (expired, or the policy "
    "changed; the worker's log says which)"
)
_CONTINUED_AS = (  # indexed (migration 3)
    "SELECT run_id FROM runner_runs WHERE (header::jsonb)->'continues'->>'run_id' = %s "
    "ORDER BY listed DESC LIMIT 1"
)


class QueuedRunService(RunService):
    def __init__(
        self,
        config: ServiceConfig,
        url: str,
        contracts: ContractSet,
        secret: ApprovalSecret | None,
        world_dir: Path,
        *,
        world: World,
        clock: Clock | None = None,
    ) -> None:
        """`world_dir`: the folder every worker reaches, where runs' places in `world` are."""
        self.url = url
        self.shared = BlockingStore(lambda: PostgresStore.open(url))
        super().__init__(
            config,
            world_dir / "unused.sqlite",
            contracts,
            secret,
            world=world,
            shared=self.shared,
            world_dir=world_dir,
            clock=clock,
        )
        self.db = world_dir / "store"  # holds paths resolve against the shared world folder
        self._queue = make_app(url)
        self._opened = False
        self._open_failed = False
        self._opening = asyncio.Lock()
        self._failures: dict[str, tuple[float, str | None]] = {}
        """Each run's last failure check: when, and what it found."""
        self._connection: psycopg.Connection[tuple[Any, ...]] | None = None
        self._reading = threading.Lock()

    def recover(self) -> int:
        """Queue the continuation of each run whose approvals were decided and that nothing
        continues: a decision and its queued continuation are two writes, and a process that
        stopped between them left the run waiting (a second decision is refused: it is
        decided). One process looks at a time, so two starting together queue it once. Runs
        before the app serves (its own event loop, in a thread of its own)."""
        with ThreadPoolExecutor(1) as looking:
            return looking.submit(asyncio.run, self._queue_decided()).result()

    async def _queue_decided(self) -> int:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute("SELECT pg_advisory_lock(%s)", (_TAKE_UP_LOCK,))  # till closed
            found = await conn.execute("SELECT to_regclass('runner_approvals')")
            if (await found.fetchone()) in (None, (None,)):
                return 0  # a store no run has used yet
            queue = make_app(self.url, pool_size=1)
            async with queue.open_async():
                await ensure_queue_schema(queue, self.url)
                now = self.clock.now()  # when decided, at the latest (a worker checks at start)
                cursor = await conn.execute(_DECIDED_NOT_CONTINUED, (CONTINUE,))
                decided = await cursor.fetchall()
                await submit(
                    queue,
                    [continuation_job(run, now) for run, _decided_at in decided],
                )
        if decided:
            _log.warning("queued the continuations of decided runs", runs=len(decided))
        return len(decided)

    async def submit_queued(self, key: ApiKey, name: str) -> str:
        fixture = self.fixture_for(key, name)
        return await self._enqueue(fixture.model_dump(mode="json", exclude_unset=True))

    async def submit_queued_live(self, key: ApiKey, request: LiveRun) -> str:
        """A live run, for a `runner worker --config` that builds the model from its own
        config and environment (the key never travels in the queue)."""
        return await self._enqueue(live_document(self.live.fixture(key, request), request.model))

    async def _enqueue(self, document: dict[str, Any]) -> str:
        """Queue a new run; 429 while `max_queued` runs wait for a worker (on SQLite the
        process counts what it accepted; here the queue is counted, whoever queued them)."""
        try:
            rows = await asyncio.to_thread(self._rows, _WAITING, (QUEUE,))
        except psycopg.Error as exc:
            raise _unusable_queue(exc) from exc
        waiting = int(rows[0][0]) if rows else 0
        if waiting >= self.config.max_queued:
            raise ApiError(429, "queue_full", f"{waiting} runs are waiting; try again later")
        (run_id,) = await self._defer([job_arguments(document, 0)])
        return run_id

    async def _defer(self, jobs: list[dict[str, Any]]) -> list[str]:
        """Queue `jobs`, opening the queue on first use. A queue that could not be opened (the
        database down) is made afresh next time, and once it opens the continuations decided
        meanwhile are queued (`recover`'s work): procrastinate kept the pool that failed to
        open, closed, and every later submit of the process failed on it, an approval's
        continuation included."""
        try:
            async with self._opening:
                if not self._opened:
                    await self._open_queue()
            queued = await submit(self._queue, jobs)
            if self._open_failed:  # decisions made while it was down (after `jobs`: a job
                await self._queue_decided()  # queued is not queued again)
                self._open_failed = False
            return queued
        except (ConnectorException, psycopg.Error, PoolTimeout) as exc:
            raise _unusable_queue(exc) from exc

    async def _open_queue(self) -> None:
        try:
            await self._queue.open_async()
            await ensure_queue_schema(self._queue, self.url)
        except BaseException:
            failed, self._queue = self._queue, make_app(self.url)  # it keeps its closed pool
            with contextlib.suppress(Exception):
                await failed.close_async()
            self._open_failed = True
            raise
        self._opened = True

    def _rows(self, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """`sql`'s rows, read on the process's one kept connection (opening one per read cost
        several times the read; psycopg serializes the request threads on it); none when
        nothing was ever queued. A connection found broken is opened again once."""
        for again in (False, True):
            connection = self._reader()
            try:
                return connection.execute(sql, parameters).fetchall()
            except psycopg.errors.UndefinedTable:
                return []  # no queue tables: nothing was ever queued
            except psycopg.OperationalError:
                with self._reading:
                    if self._connection is connection:
                        self._connection = None
                connection.close()
                if again:
                    raise
        raise AssertionError("unreachable")

    def _reader(self) -> psycopg.Connection[tuple[Any, ...]]:
        with self._reading:
            if self._connection is None or self._connection.closed:
                self._connection = psycopg.connect(self.url, autocommit=True)
            return self._connection

    def _query(self, sql: str, run_id: str) -> str | None:
        rows = self._rows(sql, (run_id,))
        return str(rows[0][0]) if rows and rows[0][0] is not None else None

    def queued_tenant(self, run_id: str) -> str | None:
        return self._query(_QUEUED_TENANT, run_id)

    def _not_started(self, tenant: str, stored: set[str]) -> list[dict[str, Any]]:
        """The tenant's queued runs that no worker has begun (no header stored yet)."""
        rows = self._rows(_QUEUED_RUNS, (tenant,))
        return [
            queued_item(run_id, name or "", FAILED_ON_A_WORKER if status == "failed" else None)
            for run_id, name, status in rows
            if run_id is not None and run_id not in stored
        ]

    def _acceptance_times(self, tenant: str) -> dict[tuple[str, str], datetime]:
        rows = self._rows(_ACCEPTED_TIMES, (CONTINUE, tenant, CONTINUE))
        return {(run_id, kind): at for run_id, kind, at in rows if run_id is not None}

    def _accepted_at(self, run_id: str) -> datetime | None:
        found = self._query(_DEFERRED_AT, run_id)
        return datetime.fromisoformat(found) if found is not None else None

    def _failure(self, run_id: str) -> str | None:
        """Asked at most every `FAILURE_CHECK_S` for a run (an events stream polls far more
        often), and never again once its job has failed (it stays failed)."""
        now = self.clock.monotonic()
        checked = self._failures.get(run_id)
        if checked is not None and (checked[1] is not None or now - checked[0] < FAILURE_CHECK_S):
            return checked[1]
        failed = self._query(_JOB_FAILED, run_id) is not None
        found = FAILED_ON_A_WORKER if failed else None
        self._failures[run_id] = (now, found)
        if len(self._failures) > 10_000:  # forget the oldest half (a dict keeps insertion order)
            for stale in list(self._failures)[:5_000]:
                del self._failures[stale]
        return found

    def _continuation_in_hand(self, run_id: str) -> tuple[bool, str | None]:
        """From the run's queued continuations: one waiting for a worker or taken by one is in
        hand; else the newest says how the last ended (a worker's refusal is a job that
        succeeded with no continuation: it returned, saying why in its log)."""
        statuses = [row[0] for row in self._rows(_CONTINUATION_JOBS, (run_id, CONTINUE))]
        if any(status in {"todo", "doing"} for status in statuses):
            return True, None
        if not statuses:
            return False, None
        return False, REFUSED_ON_A_WORKER if statuses[0] == "succeeded" else FAILED_ON_A_WORKER

    def continuation_of(self, run_id: str) -> str | None:
        """The run continuing `run_id` (a worker made it, so it is found in the store)."""
        summary = self.shared.summary(run_id)
        if summary is None or summary.terminal != "escalate":
            return None  # only a run that ended waiting for approval is ever continued
        return self._query(_CONTINUED_AS, run_id)

    def cancel(self, key: ApiKey, run_id: str) -> dict[str, Any]:
        self.check_tenant(key, run_id)
        if self.shared.summary(run_id) is not None:
            raise ApiError(409, "ended", f"run {run_id} already ended")
        # Kept in the store: the worker driving the run (or the next to take it) acts on it.
        self.shared.request_cancel(run_id, self.clock.now(), key.principal.id)
        return {"run_id": run_id, "cancel_requested": True}

    def continue_decided(self, key: ApiKey, run_id: str, now: datetime) -> None:
        """Queue the continuation for the workers (called on a request's worker thread)."""
        anyio.from_thread.run(self._defer, [continuation_job(run_id, now)])


def _unusable_queue(exc: Exception) -> StoreError:
    """The refusal of a request the run queue could not serve, naming the cause (procrastinate
    wraps the psycopg error it met)."""
    return StoreError(f"the run queue cannot be used: {type(exc.__cause__ or exc).__name__}")
