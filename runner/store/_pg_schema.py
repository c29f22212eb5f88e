"""The PostgreSQL store's schema: forward-only migrations applied under an advisory lock."""

from __future__ import annotations

from typing import Final

import psycopg

from ..errors import StoreCorrupt

SCHEMA_LOCK: Final = 0x72756E6E6572
"""The advisory lock every migrating worker takes first (`runner` in ASCII): many workers
starting at once on a new database migrate it once, one after another."""

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 1: runs, transitions (with the lease they were written under), inputs, operations, leases
    (
        """CREATE TABLE runner_runs (
            run_id text PRIMARY KEY,
            started_at timestamptz NOT NULL,
            listed bigserial NOT NULL,
            header text NOT NULL,
            terminal text,
            summary text
        )""",
        """CREATE TABLE runner_transitions (
            run_id text NOT NULL REFERENCES runner_runs (run_id),
            seq integer NOT NULL,
            record text NOT NULL,
            owner text,
            generation integer,
            PRIMARY KEY (run_id, seq)
        )""",
        """CREATE TABLE runner_turns (
            run_id text NOT NULL REFERENCES runner_runs (run_id),
            ordinal integer NOT NULL,
            turn text NOT NULL,
            PRIMARY KEY (run_id, ordinal)
        )""",
        """CREATE TABLE runner_outputs (
            run_id text NOT NULL REFERENCES runner_runs (run_id),
            ordinal integer NOT NULL,
            output text NOT NULL,
            PRIMARY KEY (run_id, ordinal)
        )""",
        "CREATE SEQUENCE runner_claims",
        """CREATE TABLE runner_operations (
            key text PRIMARY KEY,
            tenant text NOT NULL,
            tool text NOT NULL,
            run_id text NOT NULL,
            params_hash text NOT NULL,
            status text NOT NULL,
            created_at timestamptz NOT NULL,
            expires_at timestamptz NOT NULL,
            result text,
            dispatch integer NOT NULL,
            claimed bigint NOT NULL
        )""",
        "CREATE INDEX runner_operations_by_run ON runner_operations (run_id, claimed)",
        """CREATE TABLE runner_leases (
            run_id text PRIMARY KEY,
            owner text NOT NULL,
            generation integer NOT NULL,
            expires_at timestamptz NOT NULL
        )""",
        """CREATE TABLE runner_lease_grants (
            run_id text NOT NULL,
            generation integer NOT NULL,
            owner text NOT NULL,
            granted_at timestamptz NOT NULL,
            PRIMARY KEY (run_id, generation)
        )""",
    ),
)


async def migrate(conn: psycopg.AsyncConnection[tuple[object, ...]], where: str) -> int:
    """Bring the schema to this runner's version, in one transaction under `SCHEMA_LOCK`; the
    version found. A database whose schema is newer than this runner knows is refused."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        await conn.execute("CREATE TABLE IF NOT EXISTS runner_schema (version integer NOT NULL)")
        row = await (await conn.execute("SELECT version FROM runner_schema")).fetchone()
        if row is None:
            await conn.execute("INSERT INTO runner_schema (version) VALUES (0)")
        found = int(row[0]) if row is not None else 0  # type: ignore[call-overload]
        if found > len(MIGRATIONS):
            raise StoreCorrupt(
                f"{where}: runner store schema version {found} is newer than this runner knows "
                f"({len(MIGRATIONS)}); upgrade runner"
            )
        for number in range(found, len(MIGRATIONS)):
            for statement in MIGRATIONS[number]:
                await conn.execute(statement)
            await conn.execute("UPDATE runner_schema SET version = %s", (number + 1,))
    return found
