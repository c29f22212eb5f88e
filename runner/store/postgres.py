"""A store on a shared PostgreSQL database (psycopg 3, async, with a psycopg-pool pool).

The `AsyncStore` protocol: every method is awaited (it is network I/O). Many worker processes on
many hosts share one database: operation keys are claimed with `INSERT ... ON CONFLICT`, so one
intent is recorded once however many processes race; a run is driven under a lease (base.Leases)
whose generation every write for that run checks while holding the lease row (`FOR SHARE`), so a
worker that lost its run can no longer write to it. Each transition row keeps the owner and lease
generation it was written under, which is how the tests check from the records that no run ever
had two owners at once.

Needs the `postgres` extra (`pip install 'runner-fsm[postgres]'`); `import runner` never imports it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from pydantic import TypeAdapter

from ..base import _failpoints
from ..base.errors import LeaseLost, StoreConflict, StoreCorrupt, StoreError
from ..core.states import OperationStatus
from ..record.operations import Operation
from ..record.recording import OUTPUT_ADAPTER, TURN_ADAPTER, Recorded, RecordedOutput, RecordedTurn
from ..record.trace import (
    HEADER_ADAPTER,
    RECORD_ADAPTER,
    SUMMARY_ADAPTER,
    RunHeader,
    RunSummary,
    TransitionRecord,
    distinct,
)
from ._pg_approvals import PostgresApprovals
from ._pg_cancels import PostgresCancels
from ._pg_leases import Connection, PostgresLeases, _utc
from ._pg_schema import LEASE_LOST, migrate
from ._rows import (
    OPERATION_COLUMNS,
    _json,
    _read_json,
    _row_json,
    in_order,
    listing,
    operation_of,
)
from .base import Lease, RunListing, UnreadableRun
from .urls import hide_password, password_of

T = TypeVar("T")


async def reach(url: str, *, timeout_s: float = 10.0) -> None:
    """Connect once, directly, and close: a database that cannot be reached is a `StoreError` at
    once saying why (wrong password, no such host or database), where a pool would retry until
    its timeout, log every failure, and then say only that it timed out."""
    try:
        conn = await asyncio.wait_for(psycopg.AsyncConnection.connect(url), timeout_s)
    except (psycopg.Error, TimeoutError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        why = "; ".join(lines) or f"no answer in {timeout_s:g} s"
        secret = password_of(url)
        why = why.replace(secret, "***") if secret else why
        raise StoreError(f"{hide_password(url)}: cannot connect ({why})") from None
    await conn.close()


class PostgresStore(PostgresLeases, PostgresApprovals, PostgresCancels):
    """`AsyncStore` on a PostgreSQL database; open it with `await PostgresStore.open(url)`."""

    def __init__(self, pool: AsyncConnectionPool[Connection], url: str) -> None:
        self._pool = pool
        self.where = hide_password(url)
        """The database, as every message names it: never with its password."""
        self._secret = password_of(url)
        self._fences: dict[str, Lease] = {}
        self._granted: set[str] = set()
        self._last_seq: dict[str, int] = {}
        """The last seq this handle appended per run (read once per run, then kept): a lease
        taken over fences a stale one, and a duplicate seq is refused by the primary key."""
        self._seen_cancels: set[str] = set()

    @classmethod
    async def open(
        cls, url: str, *, min_size: int = 1, max_size: int = 4, timeout_s: float = 10.0
    ) -> PostgresStore:
        """Connect, migrate the schema (under an advisory lock) and return the store.

        Raises `StoreError` naming the database (password hidden) when it cannot be reached, and
        `StoreCorrupt` when its schema is newer than this runner knows.
        """
        pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={"autocommit": True},
            timeout=timeout_s,
            name="runner-store",
        )
        store = cls(pool, url)
        try:
            await reach(url, timeout_s=timeout_s)
            await pool.open(wait=True, timeout=timeout_s)
        except (PoolTimeout, psycopg.Error) as exc:
            await pool.close()
            raise StoreError(f"{store.where}: cannot connect ({store._scrub(exc)})") from None
        try:
            async with store._connection() as conn:
                await migrate(conn, store.where)
        except BaseException:
            await pool.close()
            raise
        return store

    def _scrub(self, exc: BaseException) -> str:
        text = str(exc).strip().splitlines()
        message = "; ".join(line.strip() for line in text if line.strip()) or type(exc).__name__
        return message.replace(self._secret, "***") if self._secret else message

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Connection]:
        try:
            async with self._pool.connection() as conn:
                yield conn
        except (StoreError, LeaseLost):
            raise
        except pg_errors.UniqueViolation as exc:
            raise StoreError(f"{self.where}: already stored ({self._scrub(exc)})") from None
        except pg_errors.ForeignKeyViolation as exc:
            raise StoreError(
                f"{self.where}: the run was never begun ({self._scrub(exc)})"
            ) from None
        except (PoolTimeout, psycopg.Error) as exc:
            if getattr(exc, "sqlstate", None) == LEASE_LOST:
                raise LeaseLost(self._scrub(exc)) from None
            raise StoreError(f"{self.where}: {self._scrub(exc)}") from None

    async def close(self) -> None:
        await self._pool.close()

    # -- run log --------------------------------------------------------------------------------

    async def begin_run(self, header: RunHeader) -> None:
        body = _json(HEADER_ADAPTER.dump_python(header, mode="json"))
        try:
            _read_json(HEADER_ADAPTER, body, self.where, f"run {header.run_id} header")
        except StoreCorrupt as exc:
            raise StoreError(f"not stored: {exc}") from exc
        try:
            async with self._connection() as conn:
                await conn.execute(
                    "INSERT INTO runner_runs (run_id, started_at, header) VALUES (%s, %s, %s)",
                    (header.run_id, header.started_at, body),
                )
        except StoreError as exc:
            raise StoreError(f"run {header.run_id} could not be begun: {exc}") from None

    async def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None:
        run_id = record.run_id
        turns = [i for i in inputs if isinstance(i, RecordedTurn)]
        outputs = [i for i in inputs if not isinstance(i, RecordedTurn)]
        fence = self._fences.get(run_id)
        async with self._connection() as conn:
            last = self._last_seq.get(run_id)
            if last is None:
                last = await self._last_stored_seq(conn, run_id)
            if record.seq != last + 1:
                raise StoreError(f"run {run_id}: seq {record.seq} after {last}")
            # One round trip: the fence check, every insert, and whether a cancel was asked for.
            cursor = await conn.execute(
                "SELECT runner_append(%s, %s, %s, %s, %s, %s::integer[], %s::text[], "
                "%s::integer[], %s::text[]), "
                "EXISTS (SELECT 1 FROM runner_cancels WHERE run_id = %s)",
                (
                    run_id,
                    record.seq,
                    _row_json(record, RECORD_ADAPTER),
                    fence.owner if fence else None,
                    fence.generation if fence else None,
                    [t.ordinal for t in turns],
                    [_row_json(t, TURN_ADAPTER) for t in turns],
                    [o.ordinal for o in outputs],
                    [_row_json(o, OUTPUT_ADAPTER) for o in outputs],
                    run_id,
                ),
            )
            row = await cursor.fetchone()
        if row is not None and row[1]:
            self._seen_cancels.add(run_id)
        self._last_seq[run_id] = record.seq
        _failpoints.committed()  # the crash sweep's kill point, as for SQLite's commits

    async def append_inputs(self, run_id: str, inputs: Sequence[Recorded]) -> None:
        """Inputs before their transition (`base.InputsAlone`), in one transaction that holds
        the run's lease row as `append` does: a worker that lost the run cannot write them."""
        if not inputs:
            return
        turns = [i for i in inputs if isinstance(i, RecordedTurn)]
        outputs = [i for i in inputs if not isinstance(i, RecordedTurn)]
        kinds = (("runner_turns", "turn", turns, TURN_ADAPTER),
                 ("runner_outputs", "output", outputs, OUTPUT_ADAPTER))  # fmt: skip
        async with self._connection() as conn, conn.transaction():
            await self._fenced(conn, run_id)
            for table, column, items, adapter in kinds:
                if items:  # (table and column are ours; the values are bound)
                    await conn.execute(
                        f"INSERT INTO {table} (run_id, ordinal, {column}) SELECT %s, o, t "
                        "FROM unnest(%s::integer[], %s::text[]) AS u (o, t)",
                        (
                            run_id,
                            [item.ordinal for item in items],
                            [_row_json(item, adapter) for item in items],
                        ),
                    )
        _failpoints.committed()

    async def _last_stored_seq(self, conn: Connection, run_id: str) -> int:
        cursor = await conn.execute(
            "SELECT COALESCE(MAX(seq), 0), (SELECT count(*) FROM runner_runs WHERE run_id = %s) "
            "FROM runner_transitions WHERE run_id = %s",
            (run_id, run_id),
        )
        row = await cursor.fetchone()
        assert row is not None  # an aggregate always returns its row
        if not row[1]:
            raise StoreError(f"run {run_id} was never begun")
        return int(row[0])

    async def end_run(self, summary: RunSummary) -> None:
        body = _json(SUMMARY_ADAPTER.dump_python(summary, mode="json"))
        async with self._connection() as conn, conn.transaction():
            await self._fenced(conn, summary.run_id)
            cursor = await conn.execute(
                "UPDATE runner_runs SET terminal = %s, summary = %s "
                "WHERE run_id = %s AND summary IS NULL",
                (summary.terminal, body, summary.run_id),
            )
            if cursor.rowcount != 1:
                raise StoreError(f"run {summary.run_id} is unknown or already ended")
        self._last_seq.pop(summary.run_id, None)
        self._fences.pop(summary.run_id, None)
        self._seen_cancels.discard(summary.run_id)

    # -- reading --------------------------------------------------------------------------------

    async def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """`sql`'s rows. A read whose pooled connection turns out lost (the server restarted
        since) is asked again on another, once more for each connection the pool may hold:
        each stale one failed a request (the pool drops a broken connection as it gets it
        back). Nothing else is asked again: a pool timeout or a cancelled statement is not a
        lost connection, and another try would only wait as long again."""
        for tries_left in range(self._pool.max_size, -1, -1):
            async with self._connection() as conn:
                try:
                    cursor = await conn.execute(sql, params)
                    return await cursor.fetchall()
                except psycopg.OperationalError:
                    if not (conn.broken and tries_left):
                        raise
        raise AssertionError("unreachable")

    async def header(self, run_id: str) -> RunHeader | None:
        rows = await self._rows("SELECT header FROM runner_runs WHERE run_id = %s", (run_id,))
        if not rows:
            return None
        return _read_json(HEADER_ADAPTER, rows[0][0], self.where, f"run {run_id} header")

    async def summary(self, run_id: str) -> RunSummary | None:
        rows = await self._rows("SELECT summary FROM runner_runs WHERE run_id = %s", (run_id,))
        if not rows or not rows[0][0]:
            return None
        return _read_json(SUMMARY_ADAPTER, rows[0][0], self.where, f"run {run_id} summary")

    async def transitions(self, run_id: str) -> list[TransitionRecord]:
        sql = "SELECT seq, record FROM runner_transitions WHERE run_id = %s ORDER BY seq"
        records = await self._logged(RECORD_ADAPTER, sql, run_id, "transition")
        return in_order(records, self.where, run_id)

    async def transitions_after(
        self, run_id: str, after: int, limit: int
    ) -> list[TransitionRecord]:
        rows = await self._rows(
            "SELECT seq, record FROM runner_transitions WHERE run_id = %s AND seq > %s "
            "ORDER BY seq LIMIT %s",
            (run_id, after, max(limit, 0)),
        )
        where = f"run {run_id} transition"
        records = [_read_json(RECORD_ADAPTER, r, self.where, f"{where} {n}") for n, r in rows]
        return in_order(records, self.where, run_id, max(after, 0))

    async def turns(self, run_id: str) -> list[RecordedTurn]:
        sql = "SELECT ordinal, turn FROM runner_turns WHERE run_id = %s ORDER BY ordinal"
        turns = await self._logged(TURN_ADAPTER, sql, run_id, "model turn")
        return distinct(turns, run_id, "model turn", self.where)  # a row's ordinal edited

    async def outputs(self, run_id: str) -> list[RecordedOutput]:
        sql = "SELECT ordinal, output FROM runner_outputs WHERE run_id = %s ORDER BY ordinal"
        outputs = await self._logged(OUTPUT_ADAPTER, sql, run_id, "tool output")
        return distinct(outputs, run_id, "tool output", self.where)

    async def _logged(self, adapter: TypeAdapter[T], sql: str, run_id: str, what: str) -> list[T]:
        """A run's numbered rows (`sql` selects number, body), each decoded or named corrupt."""
        where = f"run {run_id} {what}"
        rows = await self._rows(sql, (run_id,))
        return [_read_json(adapter, r, self.where, f"{where} {n}") for n, r in rows]

    async def runs(self) -> list[RunListing | UnreadableRun]:
        rows = await self._rows(
            "SELECT run_id, header, summary, CASE WHEN summary IS NULL THEN NULL ELSE ("
            "SELECT record FROM runner_transitions t WHERE t.run_id = r.run_id "
            "ORDER BY seq DESC LIMIT 1) END FROM runner_runs r ORDER BY started_at, listed",
            (),
        )
        # one unreadable run is named in its place (a summary its last transition does not
        # back, too); the others are listed as usual
        return [
            listing(run, header, summary, self.where, last) for run, header, summary, last in rows
        ]

    async def owners(self, run_id: str) -> list[tuple[int, str | None, int | None]]:
        """`(seq, owner, lease generation)` of each transition: who wrote it, under which lease."""
        rows = await self._rows(
            "SELECT seq, owner, generation FROM runner_transitions WHERE run_id = %s ORDER BY seq",
            (run_id,),
        )
        return [(int(seq), owner, generation) for seq, owner, generation in rows]

    # -- operations -----------------------------------------------------------------------------

    async def claim(self, operation: Operation) -> Operation:
        claimed = await self._claim(operation)
        _failpoints.committed()
        return claimed

    async def _claim(self, operation: Operation) -> Operation:
        values = (
            operation.key,
            operation.tenant,
            operation.tool,
            operation.run_id,
            operation.params_hash,
            operation.status.value,
            operation.created_at,
            operation.expires_at,
            _json(operation.result) if operation.result is not None else None,
            operation.dispatch,
        )
        async with self._connection() as conn, conn.transaction():
            await self._fenced(conn, operation.run_id)
            inserted = await conn.execute(
                f"INSERT INTO runner_operations ({OPERATION_COLUMNS}, claimed) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, nextval('runner_claims')) "
                "ON CONFLICT (key) DO NOTHING RETURNING key",
                values,
            )
            if await inserted.fetchone() is not None:
                return operation
            cursor = await conn.execute(
                f"SELECT {OPERATION_COLUMNS} FROM runner_operations WHERE key = %s FOR UPDATE",
                (operation.key,),
            )
            row = await cursor.fetchone()
            assert row is not None  # the conflict was with this row, and rows are never deleted
            existing = operation_of(row, _utc)
            if existing.expires_at <= operation.created_at:  # past its horizon: replaced
                await conn.execute(
                    "UPDATE runner_operations SET (key, tenant, tool, run_id, params_hash, status, "
                    "created_at, expires_at, result, dispatch, claimed) = (%s, %s, %s, %s, %s, "
                    "%s, %s, %s, %s, %s, nextval('runner_claims')) WHERE key = %s",
                    (*values, operation.key),
                )
                return operation
            if existing.params_hash != operation.params_hash:
                raise StoreConflict(operation.key, existing.params_hash, operation.params_hash)
            await conn.execute(
                "UPDATE runner_operations SET status = 'pending', dispatch = %s WHERE key = %s",
                (operation.dispatch, operation.key),
            )
            return existing

    async def settle(
        self, key: str, status: OperationStatus, result: dict[str, Any] | None = None
    ) -> None:
        async with self._connection() as conn, conn.transaction():
            if self._fences:
                cursor = await conn.execute(
                    "SELECT run_id FROM runner_operations WHERE key = %s", (key,)
                )
                for (run_id,) in await cursor.fetchall():
                    await self._fenced(conn, run_id)
            updated = await conn.execute(
                "UPDATE runner_operations SET status = %s, result = COALESCE(%s, result) "
                "WHERE key = %s",
                (status.value, _json(result) if result is not None else None, key),
            )
            if updated.rowcount != 1:
                raise StoreError(f"no operation under key {key}")
        _failpoints.committed()

    async def operations(self, run_id: str) -> list[Operation]:
        rows = await self._rows(
            f"SELECT {OPERATION_COLUMNS} FROM runner_operations WHERE run_id = %s ORDER BY claimed",
            (run_id,),
        )
        return [operation_of(row, _utc) for row in rows]

    # -- leases ---------------------------------------------------------------------------------
