"""Cancel requests on the PostgreSQL store (mixed into `PostgresStore`; schema migration 3).

The service process that is asked to cancel a run is rarely the worker process driving it, so the
request is a row (`runner_cancels`), durable and seen by whoever drives the run next: the worker
driving it reads it with every transition it appends (the same statement, no extra round trip:
`cancel_seen`), and a worker that takes the run (queued, or resumed after another worker died)
asks once before it drives it (`cancel_requested`).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

    Connection = psycopg.AsyncConnection[tuple[Any, ...]]


class PostgresCancels:
    """Cancel requests, asked for by any process, read by the one driving the run."""

    _seen_cancels: set[str]
    """Runs whose transition, appended by this handle, found a cancel requested."""

    def _connection(self) -> AbstractAsyncContextManager[Connection]:
        raise NotImplementedError  # PostgresStore's

    async def request_cancel(self, run_id: str, at: datetime, by: str) -> bool:
        """Ask for `run_id` to be cancelled (kept until the run is driven and sees it); whether
        this was the first request (a second one changes nothing)."""
        async with self._connection() as conn:
            inserted = await conn.execute(
                "INSERT INTO runner_cancels (run_id, requested_at, requested_by) "
                "VALUES (%s, %s, %s) ON CONFLICT (run_id) DO NOTHING RETURNING run_id",
                (run_id, at, by),
            )
            return await inserted.fetchone() is not None

    async def cancel_requested(self, run_id: str) -> bool:
        """Whether a cancel of `run_id` was asked for (one read)."""
        async with self._connection() as conn:
            cursor = await conn.execute("SELECT 1 FROM runner_cancels WHERE run_id = %s", (run_id,))
            return await cursor.fetchone() is not None

    def cancel_seen(self, run_id: str) -> bool:
        """Whether a transition this handle appended for `run_id` found a cancel requested (no
        I/O: the append read it)."""
        return run_id in self._seen_cancels
