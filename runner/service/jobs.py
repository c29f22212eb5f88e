"""The work a SQLite service accepted and has not finished, kept in its store file.

A `202` promises the run: it is written here before the answer goes out, and crossed off only
when the run has ended (or could not start, with why). A service restarted after a crash or a
stop finds what is left here and finishes it: a run that never stored its header starts, one
that did is resumed from its records (nothing done is done again), a decided approval whose
continuation did not end is continued again, and so is one decided with no job kept (the
process stopped between the two writes: `RunService.recover`). One service process drives one
SQLite file (many processes share a PostgreSQL store instead, whose queue keeps its own jobs).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from ..store._sqlite_base import BUSY_TIMEOUT_S, translate

JobKind = Literal["fixture", "continue"]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS service_jobs (
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    document TEXT NOT NULL,
    model TEXT,
    accepted_at TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    failure TEXT,
    PRIMARY KEY (run_id, kind)
)
"""


@dataclass(frozen=True, slots=True)
class Job:
    """One accepted piece of work: a fixture run (`run_id` is the run's), or the continuation of
    a run whose approvals were decided (`run_id` is the waiting run's)."""

    run_id: str
    kind: JobKind
    tenant: str
    name: str
    document: dict[str, Any]
    """The fixture it runs (tenant and principal already the key's; `{}` for a continuation)."""
    model: str | None
    """`provider:name` of a live model (None: the fixture's script plans)."""
    accepted_at: datetime
    done: bool
    failure: str | None


class ServiceJobs:
    """The `service_jobs` table of the service's SQLite file. Each call opens its own short
    connection: request threads and run threads call it, and sqlite3 connections keep to one
    thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._connection() as connection:
            connection.execute(_SCHEMA)

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A short connection; what SQLite reports comes out as the store's errors (another
        process holding the file's lock past the busy timeout: `StoreLocked`, a 503)."""
        try:
            with closing(
                sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            ) as connection:
                yield connection
        except sqlite3.Error as exc:
            raise translate(self.path, exc) from exc

    def add(
        self,
        run_id: str,
        kind: JobKind,
        *,
        tenant: str,
        name: str,
        document: dict[str, Any],
        model: str | None,
        accepted_at: datetime,
    ) -> None:
        """Record the work (committed when this returns); accepting it again changes nothing."""
        row = (run_id, kind, tenant, name, json.dumps(document), model, accepted_at.isoformat())
        with self._connection() as connection:
            connection.execute(
                "INSERT OR IGNORE INTO service_jobs (run_id, kind, tenant, name, document, "
                "model, accepted_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                row,
            )

    def finish(
        self, run_id: str, kind: JobKind, failure: str | None = None, *, done: bool = True
    ) -> None:
        """Cross the work off (`done`), or keep it for the next process with why it stopped."""
        with self._connection() as connection:
            connection.execute(
                "UPDATE service_jobs SET done = ?, failure = ? WHERE run_id = ? AND kind = ?",
                (int(done), failure, run_id, kind),
            )

    def unfinished(self) -> list[Job]:
        """What a restarted service has to finish, oldest first."""
        return self._select("WHERE done = 0 ORDER BY accepted_at, rowid")

    def fixture_runs(self, tenant: str) -> list[Job]:
        """The tenant's accepted fixture runs, oldest first (for listing those not started)."""
        return self._select("WHERE kind = 'fixture' AND tenant = ? ORDER BY accepted_at", tenant)

    def accepted_times(self, tenant: str) -> dict[tuple[str, str], datetime]:
        """When each of the tenant's fixture runs, and each continuation, was accepted."""
        with self._connection() as connection:
            rows = connection.execute(
                "SELECT run_id, kind, accepted_at FROM service_jobs "
                "WHERE tenant = ? OR kind = 'continue'",
                (tenant,),
            ).fetchall()
        return {(row[0], row[1]): datetime.fromisoformat(row[2]) for row in rows}

    def continued(self) -> set[str]:
        """The waiting runs a continuation was ever accepted for (finished or not)."""
        with self._connection() as connection:
            rows = connection.execute(
                "SELECT run_id FROM service_jobs WHERE kind = 'continue'"
            ).fetchall()
        return {row[0] for row in rows}

    def get(self, run_id: str, kind: JobKind = "fixture") -> Job | None:
        found = self._select("WHERE kind = ? AND run_id = ?", kind, run_id)
        return found[0] if found else None

    def _select(self, where: str, *parameters: str) -> list[Job]:
        with self._connection() as connection:
            rows = connection.execute(
                "SELECT run_id, kind, tenant, name, document, model, accepted_at, done, failure "
                f"FROM service_jobs {where}",  # `where` is ours, values are bound
                parameters,
            ).fetchall()
        return [
            Job(
                run_id=row[0],
                kind=row[1],
                tenant=row[2],
                name=row[3],
                document=json.loads(row[4]),
                model=row[5],
                accepted_at=datetime.fromisoformat(row[6]),
                done=bool(row[7]),
                failure=row[8],
            )
            for row in rows
        ]
