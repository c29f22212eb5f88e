"""Run leases on the SQLite store (`base.Leases`), and the fence its writes check (mixed into
`SqliteStore`): a handle that was granted a run's lease writes for that run only while the lease's
generation is still the one it was granted."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import _failpoints
from ..base.errors import LeaseLost
from ._sqlite_base import transaction, translate
from .base import Lease
from .memory import RELEASED


class SqliteLeases:
    """`base.Leases` on the SQLite store's connection."""

    path: Path | str
    _conn: sqlite3.Connection
    _fences: dict[str, int]
    """The lease generation this handle was granted, per run: its writes for the run check
    it in their transaction (runs driven without a lease cost nothing)."""
    _tails: dict[str, tuple[int, int, int]]

    if TYPE_CHECKING:

        def _write(self, sql: str, params: tuple[Any, ...]) -> int: ...  # SqliteStore's

    def _fenced(self, conn: sqlite3.Connection, run_id: str) -> None:
        granted = self._fences.get(run_id)
        if granted is None:
            return
        row = conn.execute("SELECT generation FROM leases WHERE run_id = ?", (run_id,)).fetchone()
        if row is None or int(row[0]) != granted:
            raise LeaseLost(f"run {run_id}: taken over (lease generation {granted} is stale)")

    def acquire_lease(self, run_id: str, owner: str, now: datetime, ttl: timedelta) -> Lease | None:
        with transaction(self._conn, self.path) as conn:
            row = conn.execute(
                "SELECT owner, generation, expires_at FROM leases WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                generation = 1
            else:
                held_by, generation, expires = row[0], int(row[1]), datetime.fromisoformat(row[2])
                if held_by == owner and expires != RELEASED:
                    pass  # renewed: the same generation
                elif expires <= now:
                    generation += 1
                else:
                    return None
            lease = Lease(run_id=run_id, owner=owner, generation=generation, expires_at=now + ttl)
            conn.execute(
                "INSERT OR REPLACE INTO leases (run_id, owner, generation, expires_at) "
                "VALUES (?, ?, ?, ?)",
                (run_id, owner, generation, lease.expires_at.isoformat()),
            )
        self._fences[run_id] = generation
        self._tails.pop(run_id, None)  # another owner may have appended since
        return lease

    def hold_run(
        self, run_id: str, owner: str, now: datetime, ttl: timedelta, gone: Callable[[str], bool]
    ) -> Lease | None:
        """`_ownership.RunHolds`: one statement for a run never leased (a new one), else one
        transaction. The lease is not fenced (the run's writes stay one statement each): it is
        only taken over from a driver known gone, or past the run's deadline."""
        expires = now + ttl
        fresh = (run_id, owner, expires.isoformat())
        insert = "INSERT OR IGNORE INTO leases (run_id, owner, generation, expires_at) "
        try:
            taken = self._conn.execute(insert + "VALUES (?, ?, 1, ?)", fresh).rowcount
        except sqlite3.Error as exc:
            raise translate(self.path, exc) from exc
        if taken == 1:  # (an insert ignored commits nothing: no failpoint either)
            _failpoints.committed()
            self._fences.pop(run_id, None)
            self._tails.pop(run_id, None)
            return Lease(run_id=run_id, owner=owner, generation=1, expires_at=expires)
        with transaction(self._conn, self.path) as conn:
            row = conn.execute(
                "SELECT owner, generation, expires_at FROM leases WHERE run_id = ?", (run_id,)
            ).fetchone()
            generation = 1
            if row is not None:
                held_by, generation, expires = row[0], int(row[1]), datetime.fromisoformat(row[2])
                if expires != RELEASED and expires > now:
                    if self._fences.get(run_id) == generation:
                        return None  # this handle's own lease (a worker's): drive under it
                    if not gone(held_by):
                        return Lease(
                            run_id=run_id, owner=held_by, generation=generation, expires_at=expires
                        )
                generation += 1
            lease = Lease(run_id=run_id, owner=owner, generation=generation, expires_at=now + ttl)
            conn.execute(
                "INSERT OR REPLACE INTO leases (run_id, owner, generation, expires_at) "
                "VALUES (?, ?, ?, ?)",
                (run_id, owner, generation, lease.expires_at.isoformat()),
            )
        self._fences.pop(run_id, None)  # an older generation's, if any: stale now
        self._tails.pop(run_id, None)  # another driver may have appended since
        return lease

    def renew_lease(self, lease: Lease, now: datetime, ttl: timedelta) -> Lease:
        renewed = dataclasses.replace(lease, expires_at=now + ttl)
        with transaction(self._conn, self.path) as conn:
            updated = conn.execute(
                "UPDATE leases SET expires_at = ? WHERE run_id = ? AND generation = ?",
                (renewed.expires_at.isoformat(), lease.run_id, lease.generation),
            ).rowcount
            if updated != 1:
                raise LeaseLost(f"run {lease.run_id}: taken over from {lease.owner}")
        return renewed

    def release_lease(self, lease: Lease) -> None:
        self._write(  # one statement: its own transaction
            "UPDATE leases SET expires_at = ? WHERE run_id = ? AND generation = ?",
            (RELEASED.isoformat(), lease.run_id, lease.generation),
        )
