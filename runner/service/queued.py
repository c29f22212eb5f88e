"""The service on a PostgreSQL store: runs go to the procrastinate queue that `runner worker`s
drive, and every service process reads the one store, so any of them serves any run.

A run accepted by one process and not yet started by a worker is found through its queued job
(its document carries the tenant). Cancel and approvals need a channel to the worker driving the
run (and an approval ledger in PostgreSQL), which this store does not have yet: a cancel is 409
and no approvals are listed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg

from ..confirm import ApprovalSecret
from ..contracts import ContractSet
from ..distributed.queue import ensure_queue_schema, job_arguments, make_app, submit
from ..store.adapters import BlockingStore
from ..store.postgres import PostgresStore
from .config import ApiKey, ServiceConfig
from .errors import ApiError
from .live import LiveRun, live_document
from .runs import RunService

_QUEUED_TENANT = (
    "SELECT args->'document'->>'tenant' FROM procrastinate_jobs WHERE args->>'run_id' = %s LIMIT 1"
)


class QueuedRunService(RunService):
    def __init__(
        self,
        config: ServiceConfig,
        url: str,
        contracts: ContractSet,
        secret: ApprovalSecret | None,
        world: Path,
    ) -> None:
        self.url = url
        super().__init__(
            config,
            world / "unused.sqlite",
            contracts,
            secret,
            shared=BlockingStore(lambda: PostgresStore.open(url)),
            world=world,
        )
        self.db = world / "store"  # holds paths resolve against the shared world folder
        self._queue = make_app(url)
        self._opened = False
        self._opening = asyncio.Lock()

    async def submit_queued(self, key: ApiKey, name: str) -> str:
        fixture = self.fixture_for(key, name)
        return await self._enqueue(fixture.model_dump(mode="json", exclude_unset=True))

    async def submit_queued_live(self, key: ApiKey, request: LiveRun) -> str:
        """A live run, for a `runner worker --config` that builds the model from its own
        config and environment (the key never travels in the queue)."""
        return await self._enqueue(live_document(self.live.fixture(key, request), request.model))

    async def _enqueue(self, document: dict[str, Any]) -> str:
        async with self._opening:
            if not self._opened:
                await self._queue.open_async()
                await ensure_queue_schema(self._queue, self.url)
                self._opened = True
        (run_id,) = await submit(self._queue, [job_arguments(document, 0)])
        return run_id

    def queued_tenant(self, run_id: str) -> str | None:
        with psycopg.connect(self.url, autocommit=True) as connection:
            try:
                row = connection.execute(_QUEUED_TENANT, (run_id,)).fetchone()
            except psycopg.errors.UndefinedTable:
                return None  # nothing was ever queued
        return row[0] if row else None

    def cancel(self, key: ApiKey, run_id: str) -> dict[str, object]:
        self.check_tenant(key, run_id)
        if self.store().summary(run_id) is not None:
            raise ApiError(409, "ended", f"run {run_id} already ended")
        raise ApiError(409, "not_here", "a worker drives this run; cancel is not available yet")
