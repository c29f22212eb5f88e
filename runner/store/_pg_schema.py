"""The PostgreSQL store's schema: forward-only migrations applied under an advisory lock."""

from __future__ import annotations

from typing import Final

import psycopg

from ..base.errors import StoreCorrupt

LEASE_LOST: Final = "RN001"
"""The SQLSTATE `runner_append` raises for a write under a lease that was taken over."""

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
        # One transition and its inputs in one round trip and one implicit transaction,
        # refused ('RN001') when the lease it is written under was taken over.
        """CREATE FUNCTION runner_append(
            p_run text, p_seq integer, p_record text, p_owner text, p_generation integer,
            p_turn_ordinals integer[], p_turns text[],
            p_output_ordinals integer[], p_outputs text[]
        ) RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            IF p_generation IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM runner_leases
                WHERE run_id = p_run AND generation = p_generation FOR SHARE
            ) THEN
                RAISE EXCEPTION 'run % was taken over', p_run USING ERRCODE = 'RN001';
            END IF;
            INSERT INTO runner_turns (run_id, ordinal, turn)
                SELECT p_run, o, t FROM unnest(p_turn_ordinals, p_turns) AS u (o, t);
            INSERT INTO runner_outputs (run_id, ordinal, output)
                SELECT p_run, o, t FROM unnest(p_output_ordinals, p_outputs) AS u (o, t);
            INSERT INTO runner_transitions (run_id, seq, record, owner, generation)
                VALUES (p_run, p_seq, p_record, p_owner, p_generation);
        END
        $$""",
        """CREATE TABLE runner_lease_grants (
            run_id text NOT NULL,
            generation integer NOT NULL,
            owner text NOT NULL,
            granted_at timestamptz NOT NULL,
            PRIMARY KEY (run_id, generation)
        )""",
    ),
    # 2: the approval ledger (store/approvals.py): proposals and each confirm token's first use
    (
        """CREATE TABLE runner_approvals (
            run_id text NOT NULL,
            operation_key text NOT NULL,
            status text NOT NULL,
            created_at timestamptz NOT NULL,
            proposal text NOT NULL,
            proposed bigserial NOT NULL,
            PRIMARY KEY (run_id, operation_key)
        )""",
        """CREATE TABLE runner_token_uses (
            token_id text PRIMARY KEY,
            run_id text NOT NULL,
            used_at timestamptz NOT NULL
        )""",
    ),
    # 3: cancel requests (the service asks, the worker driving the run acts): a row per run,
    # kept, no foreign key (a run still queued has no row in runner_runs yet)
    (
        """CREATE TABLE runner_cancels (
            run_id text PRIMARY KEY,
            requested_at timestamptz NOT NULL,
            requested_by text NOT NULL
        )""",
        # the run that continues a run decided through the service (GET /v1/runs/{id})
        "CREATE INDEX runner_runs_continues ON runner_runs "
        "(((header::jsonb) -> 'continues' ->> 'run_id'))",
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
