"""The embedded default store: one SQLite file in WAL mode, every write its own transaction.

It keeps runs, every transition, every model turn and tool output (enough to rebuild a run's
transcript by re-driving it), and the operation records behind exactly-once writes.

A run's log (its transitions and the inputs each took in) is one table, `run_log`, keyed by an
integer: the run's number (`runs.run_no`) in the high 32 bits, the row's position in the run in
the low 32. Appending a transition is one INSERT of its rows, a commit of its own, touching one
b-tree at its end: no text key, no second index, no foreign-key lookup (the store checks the run
once per connection). The views `transitions`, `turns` and `outputs` show the log as the tables
of that name held it before schema 5.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import TypeAdapter

from ..base import _failpoints
from ..base._jsonsafe import safe_str
from ..base.errors import StoreConflict, StoreCorrupt, StoreError
from ..core.states import OperationStatus
from ..record.operations import Operation
from ..record.recording import (
    OUTPUT_ADAPTER,
    TURN_ADAPTER,
    Recorded,
    RecordedOutput,
    RecordedTurn,
)
from ..record.trace import (
    HEADER_ADAPTER,
    RECORD_ADAPTER,
    SUMMARY_ADAPTER,
    RunHeader,
    RunSummary,
    TransitionRecord,
    distinct,
)
from ._rows import _json, _read_json, _row_json, in_order, listing, operation_of
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

TRANSITION, TURN, OUTPUT = 0, 1, 2
"""`run_log.kind`: what a row holds (its `number`: the transition's seq, the input's ordinal)."""

_RUN_BITS: Final = 32
_LAST_POSITION: Final = (1 << _RUN_BITS) - 1


def _log_view(name: str, number: str, body: str, kind: int) -> str:
    """A view of one kind of `run_log` rows under the table's old name and columns, with a
    trigger that turns an UPDATE of its body into one of `run_log` (tools and tests that edit
    a stored row, e.g. to tamper with it, go on working)."""
    run = f"(SELECT run_no << {_RUN_BITS} FROM runs WHERE run_id = OLD.run_id)"
    return (
        f"CREATE VIEW {name} (run_id, {number}, {body}) AS "
        "SELECT runs.run_id, run_log.number, run_log.body FROM runs JOIN run_log "
        f"ON run_log.entry BETWEEN runs.run_no << {_RUN_BITS} "
        f"AND (runs.run_no << {_RUN_BITS}) + {_LAST_POSITION} WHERE run_log.kind = {kind};"
        f"CREATE TRIGGER {name}_update INSTEAD OF UPDATE OF {body} ON {name} BEGIN "
        f"UPDATE run_log SET body = NEW.{body} WHERE kind = {kind} AND number = OLD.{number} "
        f"AND entry BETWEEN {run} AND {run} + {_LAST_POSITION}; END"
    )


ONE_LOG_MIGRATION: Final = f"""
    ALTER TABLE runs ADD COLUMN run_no INTEGER;
    UPDATE runs SET run_no = rowid;
    CREATE UNIQUE INDEX runs_by_no ON runs (run_no);
    CREATE TABLE run_log (
        entry INTEGER PRIMARY KEY,
        kind INTEGER NOT NULL,
        number INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    INSERT INTO run_log (entry, kind, number, body)
        SELECT (runs.run_no << {_RUN_BITS}) + ROW_NUMBER() OVER (
                PARTITION BY runs.run_no ORDER BY logged.kind DESC, logged.number
            ), logged.kind, logged.number, logged.body
        FROM (
            SELECT run_id, {TRANSITION} AS kind, seq AS number, record AS body FROM transitions
            UNION ALL SELECT run_id, {TURN}, ordinal, turn FROM turns
            UNION ALL SELECT run_id, {OUTPUT}, ordinal, output FROM outputs
        ) AS logged JOIN runs ON runs.run_id = logged.run_id;
    DROP TABLE transitions;
    DROP TABLE turns;
    DROP TABLE outputs;
    {_log_view("transitions", "seq", "record", TRANSITION)};
    {_log_view("turns", "ordinal", "turn", TURN)};
    {_log_view("outputs", "ordinal", "output", OUTPUT)}
"""
"""Migration 5: the three log tables become one integer-keyed table (see the module). A run's
rows are copied as they are, inputs before transitions (only the order within a kind is read)."""

_MANY_ROWS: Final = 48
"""Past this many rows an append is an explicit transaction of single-row inserts, not one
multi-row INSERT (which SQLite builds before 3.32 allow at most 999 parameters)."""

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
    # 5: one integer-keyed log table for transitions, turns and outputs: a commit of a
    # transition's rows writes one b-tree page where the three tables and their (run_id, n)
    # indexes wrote two to four (about half the CPU of a durable step's SQLite work).
    ONE_LOG_MIGRATION,
)


_BEGIN: Final = (
    "INSERT INTO runs (run_id, started_at, header, run_no) VALUES (?, ?, ?, 1 + MAX("
    "COALESCE((SELECT MAX(run_no) FROM runs), 0), "
    f"COALESCE((SELECT MAX(entry) FROM run_log) >> {_RUN_BITS}, 0)))"
)
"""A run numbered past every number in use, in `runs` or in the log (a run whose `runs` row
was deleted by hand leaves its log rows behind: its number is not given again)."""

_RETURNING: Final = sqlite3.sqlite_version_info >= (3, 35)
"""Whether this SQLite has `INSERT ... RETURNING` (3.35, 2021)."""

_LOGGED: Final = (
    "SELECT run_log.number, run_log.body FROM runs JOIN run_log "
    f"ON run_log.entry BETWEEN runs.run_no << {_RUN_BITS} "
    f"AND (runs.run_no << {_RUN_BITS}) + {_LAST_POSITION} "
    "WHERE runs.run_id = ? AND run_log.kind = ? ORDER BY run_log.number"
)
"""A run's rows of one kind (`number`, `body`) by number: seq, or ordinal (the inputs a
transition took in are appended in the order they arrived, not always their ordinals')."""


_LISTED: Final = (
    "SELECT run_id, header, summary, CASE WHEN summary IS NULL THEN NULL ELSE ("
    f"SELECT body FROM run_log WHERE entry BETWEEN run_no << {_RUN_BITS} "
    f"AND (run_no << {_RUN_BITS}) + {_LAST_POSITION} AND kind = {TRANSITION} "
    "ORDER BY entry DESC LIMIT 1) END FROM runs ORDER BY started_at, rowid"
)
"""Every run, with an ended run's last transition (its log's last row, but for a row of inputs
now and then: one probe of the log's key), so a summary its record does not back is named."""


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
        self._tails: dict[str, tuple[int, int, int]] = {}
        """Per run appended to by this connection: its first `entry` (run_no << 32), its last
        row's position and its last seq. No query per transition; dropped when a lease is
        (re)acquired, since another owner may have appended since."""
        self._inserts: dict[int, str] = {}
        """The INSERT of n rows, per n."""
        self._fences: dict[str, int] = {}
        self._conn = open_database(
            path,
            kind="runner store",
            migrations=MIGRATIONS,
            synchronous=synchronous,
            read_only=read_only,
        )
        self._cursor = self._conn.cursor()
        """Kept for the log's inserts: `Connection.execute` makes a new cursor each call (and
        registers a weak reference to it)."""

    def _write(self, sql: str, params: tuple[Any, ...]) -> int:
        """One statement, its own transaction (no BEGIN/COMMIT round trips); rows changed."""
        try:
            changed = self._conn.execute(sql, params).rowcount
        except sqlite3.Error as exc:
            raise translate(self.path, exc) from exc
        _failpoints.committed()
        return changed

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
        params = (header.run_id, header.started_at.isoformat(), body)
        try:
            if _RETURNING:  # the number given, from the INSERT itself: no second statement
                try:  # (every row fetched: the statement, and so its commit, is then done)
                    ((run_no,),) = self._conn.execute(_BEGIN + " RETURNING run_no", params)
                except sqlite3.Error as exc:
                    raise translate(self.path, exc) from exc
                _failpoints.committed()
            else:
                self._write(_BEGIN, params)
                ((run_no,),) = self._read(
                    "SELECT run_no FROM runs WHERE run_id = ?", (header.run_id,)
                )
        except StoreError as exc:
            raise StoreError(f"run {header.run_id} could not be begun: {exc}") from exc
        self._tails[header.run_id] = (int(run_no) << _RUN_BITS, 0, 0)  # a number never used

    def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None:
        self.append_all(((record, inputs),))

    def append_all(self, entries: Sequence[tuple[TransitionRecord, Sequence[Recorded]]]) -> None:
        """Several transitions of one run, each with its inputs, in one transaction (a step's
        worth, under `durability="step"`); all or nothing."""
        if not entries:
            return
        run_id = entries[0][0].run_id
        tail = self._tails.get(run_id)
        first, position, last = tail if tail is not None else self._tail(run_id)
        rows: list[Any] = []
        for record, inputs in entries:
            last += 1
            if record.seq != last or record.run_id != run_id:
                raise StoreError(f"run {record.run_id}: seq {record.seq} after {last - 1}")
            for item in inputs:
                position += 1
                if isinstance(item, RecordedTurn):
                    body = _row_json(item, TURN_ADAPTER)
                    rows += (first + position, TURN, item.ordinal, body)
                else:
                    body = _row_json(item, OUTPUT_ADAPTER)
                    rows += (first + position, OUTPUT, item.ordinal, body)
            position += 1
            rows += (first + position, TRANSITION, last, _row_json(record, RECORD_ADAPTER))
        if position > _LAST_POSITION:
            raise StoreError(f"run {run_id}: more than {_LAST_POSITION} rows in its log")
        self._insert(run_id, rows)
        self._tails[run_id] = (first, position, last)

    def append_inputs(self, run_id: str, inputs: Sequence[Recorded]) -> None:
        """Inputs before their transition (`base.InputsAlone`): rows of the log after the run's
        last one, read by kind and number as every input is; the next transition follows them."""
        if not inputs:
            return
        tail = self._tails.get(run_id)
        first, position, last = tail if tail is not None else self._tail(run_id)
        rows: list[Any] = []
        for item in inputs:
            position += 1
            if isinstance(item, RecordedTurn):
                rows += (first + position, TURN, item.ordinal, _row_json(item, TURN_ADAPTER))
            else:
                rows += (first + position, OUTPUT, item.ordinal, _row_json(item, OUTPUT_ADAPTER))
        if position > _LAST_POSITION:
            raise StoreError(f"run {run_id}: more than {_LAST_POSITION} rows in its log")
        self._insert(run_id, rows)
        self._tails[run_id] = (first, position, last)

    def _insert(self, run_id: str, rows: list[Any]) -> None:
        """`rows` (four values a row) into `run_log`: one statement, its own commit, unless the
        run's lease must be checked in the same transaction or there are many rows."""
        count = len(rows) // 4
        if count <= _MANY_ROWS and run_id not in self._fences:
            sql = self._inserts.get(count)
            if sql is None:
                values = ", ".join(["(?, ?, ?, ?)"] * count)
                sql = self._inserts[count] = f"INSERT INTO run_log VALUES {values}"
            try:
                self._cursor.execute(sql, rows)
            except sqlite3.Error as exc:
                raise translate(self.path, exc) from exc
            _failpoints.committed()
            return
        with transaction(self._conn, self.path) as conn:
            self._fenced(conn, run_id)
            conn.executemany(
                "INSERT INTO run_log VALUES (?, ?, ?, ?)",
                [rows[n : n + 4] for n in range(0, len(rows), 4)],
            )

    def _tail(self, run_id: str) -> tuple[int, int, int]:
        """Where `run_id`'s log ends: its first entry, its last position and its last seq."""
        found = self._read("SELECT run_no FROM runs WHERE run_id = ?", (run_id,))
        if not found or found[0][0] is None:
            raise StoreError(f"run {run_id} was never begun")
        first = int(found[0][0]) << _RUN_BITS
        span = (first, first + _LAST_POSITION)
        ((end,),) = self._read("SELECT MAX(entry) FROM run_log WHERE entry BETWEEN ? AND ?", span)
        seqs = self._read(
            "SELECT number FROM run_log WHERE entry BETWEEN ? AND ? AND kind = ? "
            "ORDER BY entry DESC LIMIT 1",
            (*span, TRANSITION),
        )
        return first, (int(end) - first if end is not None else 0), int(seqs[0][0]) if seqs else 0

    def end_run(self, summary: RunSummary) -> None:
        body = self._readable(SUMMARY_ADAPTER, summary, f"run {summary.run_id} summary")
        sql = "UPDATE runs SET terminal = ?, summary = ? WHERE run_id = ? AND summary IS NULL"
        params = (summary.terminal, body, summary.run_id)
        if summary.run_id in self._fences:
            with transaction(self._conn, self.path) as conn:
                self._fenced(conn, summary.run_id)
                updated = conn.execute(sql, params).rowcount
                if updated != 1:
                    raise StoreError(f"run {summary.run_id} is unknown or already ended")
        elif self._write(sql, params) != 1:  # nothing was changed: nothing to undo
            raise StoreError(f"run {summary.run_id} is unknown or already ended")
        self._tails.pop(summary.run_id, None)
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
        records = self._logged(RECORD_ADAPTER, TRANSITION, run_id, "transition")
        return in_order(records, self.path, run_id)

    def transitions_after(self, run_id: str, after: int, limit: int) -> list[TransitionRecord]:
        sql = (
            "SELECT seq, record FROM transitions WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
        )
        where = f"run {run_id} transition"
        rows = self._read(sql, (run_id, after, max(limit, 0)))
        records = [_read_json(RECORD_ADAPTER, row, self.path, f"{where} {n}") for n, row in rows]
        return in_order(records, self.path, run_id, max(after, 0))

    def turns(self, run_id: str) -> list[RecordedTurn]:
        turns = self._logged(TURN_ADAPTER, TURN, run_id, "model turn")
        return distinct(turns, run_id, "model turn", self.path)

    def outputs(self, run_id: str) -> list[RecordedOutput]:
        outputs = self._logged(OUTPUT_ADAPTER, OUTPUT, run_id, "tool output")
        return distinct(outputs, run_id, "tool output", self.path)

    def _logged(self, adapter: TypeAdapter[T], kind: int, run_id: str, what: str) -> list[T]:
        """A run's rows of one kind, in order, each decoded or named corrupt."""
        where = f"run {run_id} {what}"
        rows = self._read(_LOGGED, (run_id, kind))
        return [_read_json(adapter, row, self.path, f"{where} {n}") for n, row in rows]

    def runs(self) -> list[RunListing | UnreadableRun]:
        rows = self._read(_LISTED, ())
        # one unreadable run is named in its place; the others are listed as usual
        return [
            listing(run, header, summary, self.path, last) for run, header, summary, last in rows
        ]

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
