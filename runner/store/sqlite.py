"""The embedded default store: one SQLite file in WAL mode, every write its own transaction.

It keeps runs, every transition, every model turn and tool output (enough to rebuild a run's
transcript by re-driving it), and the operation records behind exactly-once writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import TypeAdapter

from .._jsonsafe import safe_str
from ..errors import StoreConflict, StoreCorrupt, StoreError
from ..operations import Operation, OperationStatus
from ..recording import (
    OUTPUT_ADAPTER,
    TURN_ADAPTER,
    Recorded,
    RecordedOutput,
    RecordedTurn,
)
from ..trace import (
    HEADER_ADAPTER,
    RECORD_ADAPTER,
    SUMMARY_ADAPTER,
    RunHeader,
    RunSummary,
    TransitionRecord,
)
from ._rows import _fast_json, _json, _read_json, listing, operation_of
from ._sqlite_base import Synchronous, open_database, transaction, translate
from ._sqlite_leases import SqliteLeases
from .approvals import APPROVALS_MIGRATION, SqliteApprovals
from .base import RunListing, UnreadableRun

T = TypeVar("T")

ROWID_LOG_MIGRATION: Final = """
    CREATE TABLE transitions_rowid (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        seq INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    INSERT INTO transitions_rowid (run_id, seq, record)
        SELECT run_id, seq, record FROM transitions ORDER BY run_id, seq;
    DROP TABLE transitions;
    ALTER TABLE transitions_rowid RENAME TO transitions;
    CREATE TABLE turns_rowid (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        ordinal INTEGER NOT NULL,
        turn TEXT NOT NULL,
        PRIMARY KEY (run_id, ordinal)
    );
    INSERT INTO turns_rowid (run_id, ordinal, turn)
        SELECT run_id, ordinal, turn FROM turns ORDER BY run_id, ordinal;
    DROP TABLE turns;
    ALTER TABLE turns_rowid RENAME TO turns;
    CREATE TABLE outputs_rowid (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        ordinal INTEGER NOT NULL,
        output TEXT NOT NULL,
        PRIMARY KEY (run_id, ordinal)
    );
    INSERT INTO outputs_rowid (run_id, ordinal, output)
        SELECT run_id, ordinal, output FROM outputs ORDER BY run_id, ordinal;
    DROP TABLE outputs;
    ALTER TABLE outputs_rowid RENAME TO outputs
"""
"""Migration 4 (see `MIGRATIONS`): transitions, turns and outputs rebuilt as rowid tables."""

MIGRATIONS: Final[tuple[str, ...]] = (
    # 1: runs, transitions, model turns, tool outputs, operations
    """
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        started_at TEXT NOT NULL,
        header TEXT NOT NULL,
        terminal TEXT,
        summary TEXT
    );
    CREATE TABLE transitions (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        seq INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE turns (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        ordinal INTEGER NOT NULL,
        turn TEXT NOT NULL,
        PRIMARY KEY (run_id, ordinal)
    ) WITHOUT ROWID;
    CREATE TABLE outputs (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        ordinal INTEGER NOT NULL,
        output TEXT NOT NULL,
        PRIMARY KEY (run_id, ordinal)
    ) WITHOUT ROWID;
    CREATE TABLE operations (
        key TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        tool TEXT NOT NULL,
        run_id TEXT NOT NULL,
        params_hash TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        result TEXT,
        dispatch INTEGER NOT NULL,
        claimed INTEGER NOT NULL
    );
    CREATE INDEX operations_by_run ON operations (run_id, claimed)
    """,
    # 2: run ownership between workers (base.Leases)
    """
    CREATE TABLE leases (
        run_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        generation INTEGER NOT NULL,
        expires_at TEXT NOT NULL
    )
    """,
    # 3: approval proposals and decisions, confirm token uses
    APPROVALS_MIGRATION,
    # 4: the log's tables as rowid tables. Their rows (0.5-1.5 KB of JSON) are past what
    # WITHOUT ROWID suits (rows well under a twentieth of a page): a commit of a step's rows
    # cost about a seventh more CPU there. Rows are copied as they are, in one transaction.
    ROWID_LOG_MIGRATION,
)


class SqliteStore(SqliteApprovals, SqliteLeases):
    """`Store` on one SQLite file. Not shared between threads; one per process is the norm.

    `read_only=True` opens an existing store for reading only (`runner runs`, `show`, `replay`,
    `grade --stored`): nothing is created, migrated or written, so a read-only file or folder
    can be read; every write raises `StoreError`.
    """

    def __init__(
        self, path: Path | str, *, synchronous: Synchronous = "NORMAL", read_only: bool = False
    ) -> None:
        self.path = path
        self._last_seq: dict[str, int] = {}
        """The last seq appended per run by this connection: no query per transition."""
        self._fences: dict[str, int] = {}
        self._conn = open_database(
            path,
            kind="runner store",
            migrations=MIGRATIONS,
            synchronous=synchronous,
            read_only=read_only,
        )

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with transaction(self._conn, self.path) as conn:
            conn.execute(sql, params)

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise translate(self.path, exc) from exc

    # -- run log --------------------------------------------------------------------------------

    def _readable(self, adapter: TypeAdapter[Any], value: object, row: str) -> str:
        """`value` as the JSON text to store, once it is known to read back (once per run)."""
        try:
            body = _json(adapter.dump_python(value, mode="json"))
        except (ValueError, RecursionError) as exc:  # e.g. pydantic's maximum depth
            raise StoreError(
                f"not stored: {self.path}: {row} is not JSON ({safe_str(exc)})"
            ) from exc
        try:
            _read_json(adapter, body, self.path, row)
        except StoreCorrupt as exc:
            raise StoreError(f"not stored: {exc}") from exc
        return body

    def begin_run(self, header: RunHeader) -> None:
        body = self._readable(HEADER_ADAPTER, header, f"run {header.run_id} header")
        try:
            self._write(
                "INSERT INTO runs (run_id, started_at, header) VALUES (?, ?, ?)",
                (header.run_id, header.started_at.isoformat(), body),
            )
        except StoreError as exc:
            raise StoreError(f"run {header.run_id} could not be begun: {exc}") from exc

    def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None:
        self.append_all(((record, inputs),))

    def append_all(self, entries: Sequence[tuple[TransitionRecord, Sequence[Recorded]]]) -> None:
        """Several transitions of one run, each with its inputs, in one transaction (a step's
        worth, under `durability="step"`); all or nothing."""
        if not entries:
            return
        run_id = entries[0][0].run_id
        last = self._last_seq.get(run_id)
        if last is None:
            rows = self._read(
                "SELECT COALESCE(MAX(seq), 0) FROM transitions WHERE run_id = ?", (run_id,)
            )
            last = int(rows[0][0])
        for offset, (record, _) in enumerate(entries, start=1):
            if record.run_id != run_id or record.seq != last + offset:
                raise StoreError(f"run {record.run_id}: seq {record.seq} after {last + offset - 1}")
        with transaction(self._conn, self.path) as conn:
            self._fenced(conn, run_id)
            for record, inputs in entries:
                for item in inputs:
                    if isinstance(item, RecordedTurn):
                        conn.execute(
                            "INSERT INTO turns (run_id, ordinal, turn) VALUES (?, ?, ?)",
                            (item.run_id, item.ordinal, _fast_json(item, TURN_ADAPTER)),
                        )
                    else:
                        conn.execute(
                            "INSERT INTO outputs (run_id, ordinal, output) VALUES (?, ?, ?)",
                            (item.run_id, item.ordinal, _fast_json(item, OUTPUT_ADAPTER)),
                        )
                conn.execute(
                    "INSERT INTO transitions (run_id, seq, record) VALUES (?, ?, ?)",
                    (record.run_id, record.seq, _fast_json(record, RECORD_ADAPTER)),
                )
        self._last_seq[run_id] = last + len(entries)

    def end_run(self, summary: RunSummary) -> None:
        body = self._readable(SUMMARY_ADAPTER, summary, f"run {summary.run_id} summary")
        with transaction(self._conn, self.path) as conn:
            self._fenced(conn, summary.run_id)
            updated = conn.execute(
                "UPDATE runs SET terminal = ?, summary = ? WHERE run_id = ? AND summary IS NULL",
                (summary.terminal, body, summary.run_id),
            ).rowcount
            if updated != 1:
                raise StoreError(f"run {summary.run_id} is unknown or already ended")
        self._last_seq.pop(summary.run_id, None)
        self._fences.pop(summary.run_id, None)

    def close(self) -> None:
        self._conn.close()

    # -- reading --------------------------------------------------------------------------------

    def header(self, run_id: str) -> RunHeader | None:
        rows = self._read("SELECT header FROM runs WHERE run_id = ?", (run_id,))
        return (
            _read_json(HEADER_ADAPTER, rows[0][0], self.path, f"run {run_id} header")
            if rows
            else None
        )

    def summary(self, run_id: str) -> RunSummary | None:
        rows = self._read("SELECT summary FROM runs WHERE run_id = ?", (run_id,))
        if not rows or not rows[0][0]:
            return None
        return _read_json(SUMMARY_ADAPTER, rows[0][0], self.path, f"run {run_id} summary")

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        sql = "SELECT seq, record FROM transitions WHERE run_id = ? ORDER BY seq"
        return self._logged(RECORD_ADAPTER, sql, run_id, "transition")

    def transitions_after(self, run_id: str, after: int, limit: int) -> list[TransitionRecord]:
        sql = (
            "SELECT seq, record FROM transitions WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
        )
        where = f"run {run_id} transition"
        rows = self._read(sql, (run_id, after, max(limit, 0)))
        return [_read_json(RECORD_ADAPTER, row, self.path, f"{where} {n}") for n, row in rows]

    def turns(self, run_id: str) -> list[RecordedTurn]:
        sql = "SELECT ordinal, turn FROM turns WHERE run_id = ? ORDER BY ordinal"
        return self._logged(TURN_ADAPTER, sql, run_id, "model turn")

    def outputs(self, run_id: str) -> list[RecordedOutput]:
        sql = "SELECT ordinal, output FROM outputs WHERE run_id = ? ORDER BY ordinal"
        return self._logged(OUTPUT_ADAPTER, sql, run_id, "tool output")

    def _logged(self, adapter: TypeAdapter[T], sql: str, run_id: str, what: str) -> list[T]:
        """A run's numbered rows (`sql` selects number, body), each decoded or named corrupt."""
        where = f"run {run_id} {what}"
        rows = self._read(sql, (run_id,))
        return [_read_json(adapter, row, self.path, f"{where} {n}") for n, row in rows]

    def runs(self) -> list[RunListing | UnreadableRun]:
        rows = self._read("SELECT run_id, header, summary FROM runs ORDER BY started_at, rowid", ())
        # one unreadable run is named in its place; the others are listed as usual
        return [listing(run_id, header, summary, self.path) for run_id, header, summary in rows]

    # -- operations -----------------------------------------------------------------------------

    def claim(self, operation: Operation) -> Operation:
        with transaction(self._conn, self.path) as conn:
            self._fenced(conn, operation.run_id)
            row = conn.execute(
                "SELECT key, tenant, tool, run_id, params_hash, status, created_at, expires_at, "
                "result, dispatch FROM operations WHERE key = ?",
                (operation.key,),
            ).fetchone()
            if row is not None:
                existing = operation_of(row, datetime.fromisoformat)
                if existing.expires_at > operation.created_at:
                    if existing.params_hash != operation.params_hash:
                        raise StoreConflict(
                            operation.key, existing.params_hash, operation.params_hash
                        )
                    conn.execute(
                        "UPDATE operations SET status = 'pending', dispatch = ? WHERE key = ?",
                        (operation.dispatch, operation.key),
                    )
                    return existing
                conn.execute("DELETE FROM operations WHERE key = ?", (operation.key,))
            conn.execute(
                "INSERT INTO operations (key, tenant, tool, run_id, params_hash, status, "
                "created_at, expires_at, result, dispatch, claimed) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "(SELECT COALESCE(MAX(claimed), 0) + 1 FROM operations))",
                (
                    operation.key,
                    operation.tenant,
                    operation.tool,
                    operation.run_id,
                    operation.params_hash,
                    operation.status.value,
                    operation.created_at.isoformat(),
                    operation.expires_at.isoformat(),
                    _json(operation.result) if operation.result is not None else None,
                    operation.dispatch,
                ),
            )
        return operation

    def settle(
        self, key: str, status: OperationStatus, result: dict[str, Any] | None = None
    ) -> None:
        with transaction(self._conn, self.path) as conn:
            if self._fences:
                owning = conn.execute("SELECT run_id FROM operations WHERE key = ?", (key,))
                for (run_id,) in owning.fetchall():
                    self._fenced(conn, run_id)
            updated = conn.execute(
                "UPDATE operations SET status = ?, result = COALESCE(?, result) WHERE key = ?",
                (status.value, _json(result) if result is not None else None, key),
            ).rowcount
            if updated != 1:
                raise StoreError(f"no operation under key {key}")

    def operations(self, run_id: str) -> list[Operation]:
        rows = self._read(
            "SELECT key, tenant, tool, run_id, params_hash, status, created_at, expires_at, "
            "result, dispatch FROM operations WHERE run_id = ? ORDER BY claimed",
            (run_id,),
        )
        return [operation_of(row, datetime.fromisoformat) for row in rows]
