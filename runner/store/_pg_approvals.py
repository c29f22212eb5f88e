"""`AsyncApprovalLedger` on the PostgreSQL store (mixed into `PostgresStore`; schema migration 2).

Races between processes are settled by the database: a proposal and a token's first use are
`INSERT ... ON CONFLICT DO NOTHING` on their primary keys, so of two processes using one confirm
token at once exactly one records the use and the other reads it back and is refused
(`TokenReused`); a decision holds its proposal's row (`FOR UPDATE`), so it is made once.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..base.errors import StoreCorrupt
from .approvals import PROPOSAL_ADAPTER, ApprovalDecision, Proposal, _decided, _reused

if TYPE_CHECKING:
    import psycopg

    Connection = psycopg.AsyncConnection[tuple[Any, ...]]


class PostgresApprovals:
    """The approval ledger's four methods, awaited, on the store's pool."""

    where: str

    def _connection(self) -> AbstractAsyncContextManager[Connection]:
        raise NotImplementedError  # PostgresStore's

    def _proposal(self, text: Any, run_id: str, key: str) -> Proposal:
        try:
            return PROPOSAL_ADAPTER.validate_json(text)
        except ValueError as exc:
            raise StoreCorrupt(
                f"{self.where}: proposal {key} of run {run_id} cannot be read back"
            ) from exc

    async def propose(self, proposal: Proposal) -> Proposal:
        body = PROPOSAL_ADAPTER.dump_json(proposal).decode()
        async with self._connection() as conn:
            inserted = await conn.execute(
                "INSERT INTO runner_approvals (run_id, operation_key, status, created_at, "
                "proposal) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (run_id, operation_key) DO NOTHING RETURNING run_id",
                (
                    proposal.run_id,
                    proposal.operation_key,
                    proposal.status,
                    proposal.created_at,
                    body,
                ),
            )
            if await inserted.fetchone() is not None:
                return proposal
            cursor = await conn.execute(
                "SELECT proposal FROM runner_approvals WHERE run_id = %s AND operation_key = %s",
                (proposal.run_id, proposal.operation_key),
            )
            row = await cursor.fetchone()
        assert row is not None  # the conflict was with this row, and rows are never deleted
        return self._proposal(row[0], proposal.run_id, proposal.operation_key)

    async def proposals(self, run_id: str | None = None) -> list[Proposal]:
        sql = "SELECT run_id, operation_key, proposal FROM runner_approvals"
        params: tuple[Any, ...] = ()
        if run_id is not None:
            sql, params = sql + " WHERE run_id = %s", (run_id,)
        async with self._connection() as conn:
            cursor = await conn.execute(sql + " ORDER BY proposed", params)
            rows = await cursor.fetchall()
        return [self._proposal(text, run, key) for run, key, text in rows]

    async def decide(self, run_id: str, operation_key: str, decision: ApprovalDecision) -> Proposal:
        async with self._connection() as conn, conn.transaction():
            cursor = await conn.execute(
                "SELECT proposal FROM runner_approvals WHERE run_id = %s AND operation_key = %s "
                "FOR UPDATE",
                (run_id, operation_key),
            )
            row = await cursor.fetchone()
            existing = self._proposal(row[0], run_id, operation_key) if row else None
            decided = _decided(existing, run_id, operation_key, decision)
            await conn.execute(
                "UPDATE runner_approvals SET status = %s, proposal = %s "
                "WHERE run_id = %s AND operation_key = %s AND status = 'pending'",
                (
                    decided.status,
                    PROPOSAL_ADAPTER.dump_json(decided).decode(),
                    run_id,
                    operation_key,
                ),
            )
        return decided

    async def use_token(self, token_id: str, run_id: str, at: datetime) -> None:
        async with self._connection() as conn:
            inserted = await conn.execute(
                "INSERT INTO runner_token_uses (token_id, run_id, used_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (token_id) DO NOTHING RETURNING run_id",
                (token_id, run_id, at),
            )
            if await inserted.fetchone() is not None:
                return
            cursor = await conn.execute(
                "SELECT run_id FROM runner_token_uses WHERE token_id = %s", (token_id,)
            )
            row = await cursor.fetchone()
        assert row is not None  # the conflict was with this row, and rows are never deleted
        if row[0] != run_id:
            raise _reused(token_id, str(row[0]))
