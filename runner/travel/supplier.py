"""The simulated hotel supplier: its own SQLite database, where a hold and its idempotency key
are stored in one transaction.

Like a real supplier it outlives the runner: a runner killed mid-write leaves the hold here, and the
reconciliation lookup finds it. A repeated key with the same payload returns the existing hold (the
supplier's documented duplicate suppression); with another payload it is refused.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

from ..base.errors import StoreError
from ..store._sqlite_base import open_database, transaction

MIGRATIONS: Final[tuple[str, ...]] = (
    """
    CREATE TABLE holds (
        hold_id TEXT PRIMARY KEY,
        idempotency_key TEXT NOT NULL UNIQUE,
        payload_hash TEXT NOT NULL,
        tenant TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
    );
    CREATE TABLE calls (
        tool TEXT PRIMARY KEY,
        received INTEGER NOT NULL
    )
    """,
)


class PayloadMismatch(Exception):
    """The idempotency key is already bound to another payload."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hold:
    hold_id: str
    expires_at: datetime
    created: bool
    """False when an earlier hold under the same key was returned instead."""


def payload_hash(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def locate(recorded: str, store_dir: Path | None) -> Path | None:
    """Where the supplier database a run header names is now (None: nowhere to be found).

    Headers record an absolute path. Older ones recorded it relative to the directory the run was
    started from, which a resume from elsewhere cannot know: those are also looked for beside the
    store (`store_dir`), under the tail of the recorded path. The file names are unique per run,
    so a file found is the run's own.
    """
    path = Path(recorded)
    if path.is_absolute() or store_dir is None:
        return path if path.is_file() else None
    tails = [Path(*path.parts[index:]) for index in range(len(path.parts))]
    for candidate in (path, *(store_dir / tail for tail in tails)):
        if candidate.is_file():
            return candidate.resolve()
    return None


def recorded_holds(
    recorded: str | None, store_dir: Path | None, *, must_exist: bool = False
) -> int | None:
    """Active holds in the supplier database a run header records (`locate`d as above), read
    without writing; None when it records none or (unless `must_exist`: `StoreError`) the file
    is nowhere to be found."""
    path = locate(recorded, store_dir) if recorded else None
    if path is None:
        if recorded and must_exist:  # a count of none would read as a run without a world
            raise StoreError(f"supplier database {recorded} does not exist")
        return None
    supplier = SupplierDatabase.open_existing(path, read_only=True)
    try:
        return supplier.active_holds()
    finally:
        supplier.close()


def has_schema(path: Path) -> bool:
    """Whether the database at `path` was ever migrated (an empty file has no schema); read
    without writing anything, the write-ahead log included."""
    if path.stat().st_size == 0:
        return False
    try:
        conn = sqlite3.connect(str(path), isolation_level=None)
    except sqlite3.Error:
        return True  # not ours to judge here: opening it names the problem
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0]) > 0
    except sqlite3.Error:
        return True
    finally:
        conn.close()


class SupplierDatabase:
    """The supplier's durable state: holds by idempotency key, and how many calls it received."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        """Open the database at `path`, creating it if missing (see `open_existing` for resume)."""
        self.path = path
        self._conn = open_database(
            path, kind="supplier", migrations=MIGRATIONS, read_only=read_only
        )

    @classmethod
    def open_existing(cls, path: Path, *, read_only: bool = False) -> SupplierDatabase:
        """Open a database that must already exist: a resumed run's world is never a fresh one."""
        if not path.is_file():
            raise StoreError(f"supplier database {path} does not exist")
        if not has_schema(path):  # migrating it would make it a fresh, empty world
            raise StoreError(f"supplier database {path} is empty (no schema)")
        return cls(path, read_only=read_only)

    def close(self) -> None:
        self._conn.close()

    def receive(self, tool: str) -> int:
        """Count a call as received (durably, before acting on it); returns its number, from 1."""
        with transaction(self._conn, self.path) as conn:
            conn.execute(
                "INSERT INTO calls (tool, received) VALUES (?, 1) "
                "ON CONFLICT (tool) DO UPDATE SET received = received + 1",
                (tool,),
            )
            row = conn.execute("SELECT received FROM calls WHERE tool = ?", (tool,)).fetchone()
        return int(row[0])

    def received(self, tool: str) -> int:
        row = self._conn.execute("SELECT received FROM calls WHERE tool = ?", (tool,)).fetchone()
        return int(row[0]) if row else 0

    def hold(self, key: str, tenant: str, payload: dict[str, Any], now: datetime) -> Hold:
        """Create the hold under `key`, or return the one already there for the same payload."""
        digest = payload_hash(payload)
        with transaction(self._conn, self.path) as conn:
            row = conn.execute(
                "SELECT hold_id, payload_hash, expires_at FROM holds WHERE idempotency_key = ?",
                (key,),
            ).fetchone()
            if row is not None:
                if row[1] != digest:
                    raise PayloadMismatch(key)
                return Hold(
                    hold_id=row[0], expires_at=datetime.fromisoformat(row[2]), created=False
                )
            number = conn.execute("SELECT COUNT(*) FROM holds").fetchone()[0] + 1
            hold_id = f"HOLD-{number:04d}"
            expires_at = now + timedelta(hours=24)
            conn.execute(
                "INSERT INTO holds VALUES (?, ?, ?, ?, ?, 'active', ?, ?)",
                (
                    hold_id,
                    key,
                    digest,
                    tenant,
                    json.dumps(payload, sort_keys=True),
                    now.isoformat(),
                    expires_at.isoformat(),
                ),
            )
        return Hold(hold_id=hold_id, expires_at=expires_at, created=True)

    def find(self, key: str) -> str | None:
        """The hold id under `key`, if any."""
        row = self._conn.execute(
            "SELECT hold_id FROM holds WHERE idempotency_key = ?", (key,)
        ).fetchone()
        return str(row[0]) if row else None

    def active_holds(self) -> int:
        return int(
            self._conn.execute("SELECT COUNT(*) FROM holds WHERE status = 'active'").fetchone()[0]
        )
