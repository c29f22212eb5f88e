"""Run leases on the PostgreSQL store (`base.Leases`), and the fence its writes check (mixed into
`PostgresStore`): every write for a leased run checks, holding the lease row (`FOR SHARE`) until
its transaction ends, that the generation is still the one this handle was granted."""

from __future__ import annotations

import dataclasses
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg

from ..errors import LeaseLost
from .base import Lease
from .memory import RELEASED

Connection = psycopg.AsyncConnection[tuple[Any, ...]]


class PostgresLeases:
    """`base.Leases` on the PostgreSQL store's pool."""

    _fences: dict[str, Lease]
    """The lease this handle holds per run: its writes for the run check its generation."""
    _last_seq: dict[str, int]

    if TYPE_CHECKING:

        def _connection(self) -> AbstractAsyncContextManager[Connection]: ...  # PostgresStore's

    async def _fenced(self, conn: Connection, run_id: str) -> tuple[str | None, int | None]:
        """Check, holding the lease row until the transaction ends, that this handle still owns
        `run_id` (when it took a lease on it); the owner and generation to write under."""
        lease = self._fences.get(run_id)
        if lease is None:
            return None, None
        cursor = await conn.execute(
            "SELECT generation FROM runner_leases WHERE run_id = %s FOR SHARE", (run_id,)
        )
        row = await cursor.fetchone()
        if row is None or int(row[0]) != lease.generation:
            raise LeaseLost(f"run {run_id}: taken over (lease generation {lease.generation})")
        return lease.owner, lease.generation

    async def acquire_lease(
        self, run_id: str, owner: str, now: datetime, ttl: timedelta
    ) -> Lease | None:
        async with self._connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO runner_leases (run_id, owner, generation, expires_at) "
                "VALUES (%s, '', 0, %s) ON CONFLICT (run_id) DO NOTHING",
                (run_id, RELEASED),
            )
            cursor = await conn.execute(
                "SELECT owner, generation, expires_at FROM runner_leases WHERE run_id = %s "
                "FOR UPDATE",
                (run_id,),
            )
            row = await cursor.fetchone()
            assert row is not None  # inserted just above if it was missing
            held_by, generation, expires = str(row[0]), int(row[1]), _utc(row[2])
            if held_by == owner and expires != RELEASED:
                pass  # renewed: the same generation
            elif expires <= now:
                generation += 1
                await conn.execute(
                    "INSERT INTO runner_lease_grants (run_id, generation, owner, granted_at) "
                    "VALUES (%s, %s, %s, %s)",
                    (run_id, generation, owner, now),
                )
            else:
                return None
            lease = Lease(run_id=run_id, owner=owner, generation=generation, expires_at=now + ttl)
            await conn.execute(
                "UPDATE runner_leases SET owner = %s, generation = %s, expires_at = %s "
                "WHERE run_id = %s",
                (owner, generation, lease.expires_at, run_id),
            )
        self._fences[run_id] = lease
        self._last_seq.pop(run_id, None)  # another owner may have appended since
        return lease

    async def renew_lease(self, lease: Lease, now: datetime, ttl: timedelta) -> Lease:
        renewed = dataclasses.replace(lease, expires_at=now + ttl)
        async with self._connection() as conn:
            cursor = await conn.execute(
                "UPDATE runner_leases SET expires_at = %s WHERE run_id = %s AND generation = %s",
                (renewed.expires_at, lease.run_id, lease.generation),
            )
            if cursor.rowcount != 1:
                raise LeaseLost(f"run {lease.run_id}: taken over from {lease.owner}")
        return renewed

    async def release_lease(self, lease: Lease) -> None:
        async with self._connection() as conn:
            await conn.execute(
                "UPDATE runner_leases SET expires_at = %s WHERE run_id = %s AND generation = %s",
                (RELEASED, lease.run_id, lease.generation),
            )


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)
