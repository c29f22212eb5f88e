"""The queue: procrastinate on the store's own PostgreSQL database.

One task, `runner.drive`, on one queue, `runner`; a job's arguments are the run's id (minted when it
is submitted, so `submit` can print it), the document that says what to run (for the command line,
a fixture) and the seed. The queue's schema is
applied once per database, under an advisory lock, by whichever process comes first.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import psycopg
from procrastinate import App, PsycopgConnector

from ..base.errors import StoreError
from ..store.urls import hide_password

TASK: Final = "runner.drive"
QUEUE: Final = "runner"
_SCHEMA_LOCK: Final = 0x72756E6E6571  # `runneq`: the queue's, apart from the store's


def make_app(url: str, *, pool_size: int = 4) -> App:
    """A procrastinate app on `url` (open it with `async with app.open_async()`)."""
    return App(connector=PsycopgConnector(conninfo=url, min_size=1, max_size=pool_size))


async def ensure_queue_schema(app: App, url: str) -> None:
    """Apply procrastinate's schema unless the database has it; many processes starting at once
    apply it once (the first holds the lock; the others then find it there)."""
    try:
        connecting = psycopg.AsyncConnection.connect(url, autocommit=True)
        async with await connecting as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            cursor = await conn.execute("SELECT to_regclass('procrastinate_jobs')")
            row = await cursor.fetchone()
            if row is None or row[0] is None:
                await app.schema_manager.apply_schema_async()
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()
        raise StoreError(
            f"{hide_password(url)}: the queue's schema cannot be applied "
            f"({first[0] if first else type(exc).__name__})"
        ) from None


def job_arguments(document: dict[str, Any], seed: int) -> dict[str, Any]:
    """One queued run: a new run id, what to run, and its seed."""
    return {"run_id": str(uuid.uuid4()), "document": document, "seed": seed}


CONTINUE: Final = "continue_after_approval"
"""The key of a queued document that continues a run whose approvals were decided (its job's
run id is the waiting run's; the continuation is a run of its own: `Engine.continue_approved`)."""


def continuation_job(run_id: str, decided_at: datetime) -> dict[str, Any]:
    """A queued continuation of `run_id`, decided at `decided_at`. The worker checks its tokens
    against its own clock when it starts the continuation; the time travels as `now` all the
    same, which workers of earlier versions read (and checked the tokens at)."""
    return {"run_id": run_id, "document": {CONTINUE: {"now": decided_at.isoformat()}}, "seed": 0}


async def submit(app: App, runs: Sequence[dict[str, Any]]) -> list[str]:
    """Queue `runs` (from `job_arguments`) in one batch; their run ids, in order."""
    if runs:
        await app.configure_task(TASK, queue=QUEUE).batch_defer_async(*runs)
    return [str(run["run_id"]) for run in runs]
