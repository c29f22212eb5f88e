"""Run leases on the PostgreSQL store (`base.Leases`), and the fence its writes check (mixed into
`PostgresStore`): every write for a leased run checks, holding the lease row (`FOR SHARE`) until
its transaction ends, that the generation is still the one this handle was granted.

Two kinds of holder: a caller that took the lease itself (`acquire_lease`: a worker, `runner
resume`), under which an engine on this handle drives (`holds_lease`); and the engine's own drive
(`take_run`, `_ownership.take_renewed`), taken from a driver known gone at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg

from ..base.errors import LeaseLost
from .base import Lease
from .memory import RELEASED

Connection = psycopg.AsyncConnection[tuple[Any, ...]]


class PostgresLeases:
    """`base.Leases` on the PostgreSQL store's pool."""

    _fences: dict[str, Lease]
    """The lease this handle holds per run: its writes for the run check its generation."""
    _granted: set[str]
    """The runs whose lease this handle's caller took (`acquire_lease`) and has not released: an
    engine on this handle drives them under it (`holds_lease`)."""
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
            held_by, generation, expires = await _locked_lease(conn, run_id)
            renewed = held_by == owner and expires != RELEASED  # the same generation
            if not renewed and expires > now:
                return None
            lease = Lease(
                run_id=run_id,
                owner=owner,
                generation=generation if renewed else generation + 1,
                expires_at=now + ttl,
            )
            await _hold(conn, lease, now, granted=not renewed)
        self._fences[run_id] = lease
        self._granted.add(run_id)
        self._last_seq.pop(run_id, None)  # another owner may have appended since
        return lease

    def holds_lease(self, run_id: str) -> bool:
        """Whether this handle's caller took `run_id`'s lease (`acquire_lease`) and has not
        released it (no I/O; a lease taken over since is found by the run's next write)."""
        return run_id in self._granted

    async def take_run(
        self, run_id: str, owner: str, now: datetime, ttl: timedelta, gone: Callable[[str], bool]
    ) -> Lease:
        """`_ownership.RenewedHolds`: take the run for `owner` (a new generation, fenced) when
        nobody holds it, its lease expired or was released, or `gone(holder)`; otherwise return
        the holder's lease, taking nothing. A run never leased (a new one) is taken in one
        statement, its own transaction."""
        lease = Lease(run_id=run_id, owner=owner, generation=1, expires_at=now + ttl)
        async with self._connection() as conn:
            cursor = await conn.execute(
                "WITH taken AS (INSERT INTO runner_leases (run_id, owner, generation, expires_at) "
                "VALUES (%s, %s, 1, %s) ON CONFLICT (run_id) DO NOTHING RETURNING run_id) "
                "INSERT INTO runner_lease_grants (run_id, generation, owner, granted_at) "
                "SELECT run_id, 1, %s, %s FROM taken",
                (run_id, owner, lease.expires_at, owner, now),
            )
            if cursor.rowcount != 1:
                lease = await self._take_over(conn, lease, now, gone)
        if lease.owner == owner:
            self._fences[run_id] = lease
            self._granted.discard(run_id)  # the engine's now: a later drive takes its own
            self._last_seq.pop(run_id, None)  # another owner may have appended since
        return lease

    async def _take_over(
        self, conn: Connection, lease: Lease, now: datetime, gone: Callable[[str], bool]
    ) -> Lease:
        """`take_run` of a run leased before: `lease` with the next generation, or the
        holder's."""
        run_id = lease.run_id
        async with conn.transaction():
            held_by, generation, expires = await _locked_lease(conn, run_id)
            if expires != RELEASED and expires > now and not gone(held_by):
                return Lease(
                    run_id=run_id, owner=held_by, generation=generation, expires_at=expires
                )
            lease = dataclasses.replace(lease, generation=generation + 1)
            await _hold(conn, lease, now, granted=True)
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
        fence = self._fences.get(lease.run_id)
        if fence is not None and fence.generation == lease.generation:
            self._granted.discard(lease.run_id)  # its writes stay fenced (`base.Leases`)
        async with self._connection() as conn:
            await conn.execute(
                "UPDATE runner_leases SET expires_at = %s WHERE run_id = %s AND generation = %s",
                (RELEASED, lease.run_id, lease.generation),
            )


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


async def _locked_lease(conn: Connection, run_id: str) -> tuple[str, int, datetime]:
    """`run_id`'s lease row (owner, generation, expiry), locked until the transaction ends; a
    run never leased gets a released row of generation 0 first, so there is a row to lock."""
    await conn.execute(
        "INSERT INTO runner_leases (run_id, owner, generation, expires_at) "
        "VALUES (%s, '', 0, %s) ON CONFLICT (run_id) DO NOTHING",
        (run_id, RELEASED),
    )
    cursor = await conn.execute(
        "SELECT owner, generation, expires_at FROM runner_leases WHERE run_id = %s FOR UPDATE",
        (run_id,),
    )
    row = await cursor.fetchone()
    assert row is not None  # inserted just above if it was missing
    return str(row[0]), int(row[1]), _utc(row[2])


async def _hold(conn: Connection, lease: Lease, now: datetime, *, granted: bool) -> None:
    """Write `lease` into its locked row; `granted`: a new generation, recorded among the grants
    (a renewal by the same owner keeps its generation and adds none)."""
    if granted:
        await conn.execute(
            "INSERT INTO runner_lease_grants (run_id, generation, owner, granted_at) "
            "VALUES (%s, %s, %s, %s)",
            (lease.run_id, lease.generation, lease.owner, now),
        )
    await conn.execute(
        "UPDATE runner_leases SET owner = %s, generation = %s, expires_at = %s WHERE run_id = %s",
        (lease.owner, lease.generation, lease.expires_at, lease.run_id),
    )
