"""The approval ledger: pending proposals, the decisions on them, and every confirm token's use.

Kept apart from the run log (`Store`): a backend that keeps approvals implements `ApprovalLedger`
besides `Store` (memory and SQLite do, through the two mixins below). A proposal is keyed by its run
and operation key, so proposing the same write again (a resumed run re-driving its admission) finds
the one already recorded. A decision is made once, on a pending proposal. A token is used by one
run: its first use is recorded, the same run may present it again (a resume re-drives the use),
any other run is refused with `TokenReused`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal, Protocol, runtime_checkable

from pydantic import ConfigDict, TypeAdapter, with_config

from ..base.errors import ApprovalRefused, StoreCorrupt, TokenReused
from ._sqlite_base import transaction, translate

ProposalStatus = Literal["pending", "approved", "denied"]


@with_config(ConfigDict(defer_build=True))
@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """What a person outside the model decided about one proposal."""

    verdict: Literal["approved", "denied"]
    approver: str
    decided_at: datetime
    note: str | None = None
    token_id: str | None = None
    """The confirm token issued with an approval (its id; the token is `token`)."""
    token: str | None = None
    """The signed confirm token (useless without the runtime's secret to verify it)."""
    expires_at: datetime | None = None


@with_config(ConfigDict(defer_build=True))
@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """A write that needs approval, recorded instead of committed."""

    run_id: str
    operation_key: str
    tenant: str
    tool: str
    params: dict[str, Any]
    """The canonical validated parameters."""
    params_hash: str
    summary: str
    """What a person reads, e.g. `hold_room: Hold 1 accessible room, H-SHIBA, ...`."""
    policy_digest: str
    """The policy and contract version the approval would be given under."""
    created_at: datetime
    call_id: str
    reasons: list[str] = field(default_factory=list)
    """Why approval is needed: `contract`, `policy:tool`, `provenance:<argument>`."""
    provenance: dict[str, str] = field(default_factory=dict)
    """Argument -> where its value first appeared: `task`, or `tool:<tool>:<call id>`."""
    status: ProposalStatus = "pending"
    decision: ApprovalDecision | None = None

    @property
    def operation(self) -> str:
        return self.operation_key


# Built on first use (the dataclasses defer it): `import runner` builds no validator.
PROPOSAL_ADAPTER: Final = TypeAdapter(Proposal)


@runtime_checkable
class ApprovalLedger(Protocol):
    def propose(self, proposal: Proposal) -> Proposal:
        """Record a pending proposal; the one already recorded for its run and key is returned."""
        ...

    def proposals(self, run_id: str | None = None) -> list[Proposal]:
        """Every proposal (of one run, or of all), oldest first."""
        ...

    def decide(self, run_id: str, operation_key: str, decision: ApprovalDecision) -> Proposal:
        """Record the one decision on a pending proposal; `ApprovalRefused` otherwise."""
        ...

    def use_token(self, token_id: str, run_id: str, at: datetime) -> None:
        """Record that `run_id` used the token; `TokenReused` if another run did before."""
        ...


def _decided(
    existing: Proposal | None, run_id: str, key: str, decision: ApprovalDecision
) -> Proposal:
    if existing is None:
        raise ApprovalRefused("no_proposal", f"run {run_id} has no proposal for {key}")
    if existing.status != "pending":
        raise ApprovalRefused(
            "not_pending", f"the proposal {key} of run {run_id} is already {existing.status}"
        )
    return replace(existing, status=decision.verdict, decision=decision)


def _reused(token_id: str, user: str) -> TokenReused:
    return TokenReused("reused", f"token {token_id} was already used by run {user}")


class MemoryApprovals:
    """`ApprovalLedger` in memory (mixed into `MemoryStore`)."""

    _proposals: dict[tuple[str, str], Proposal]
    _token_uses: dict[str, str]

    def _approvals(self) -> None:
        if not hasattr(self, "_proposals"):
            self._proposals, self._token_uses = {}, {}

    def propose(self, proposal: Proposal) -> Proposal:
        self._approvals()
        return self._proposals.setdefault((proposal.run_id, proposal.operation_key), proposal)

    def proposals(self, run_id: str | None = None) -> list[Proposal]:
        self._approvals()
        return [p for p in self._proposals.values() if run_id is None or p.run_id == run_id]

    def decide(self, run_id: str, operation_key: str, decision: ApprovalDecision) -> Proposal:
        self._approvals()
        decided = _decided(
            self._proposals.get((run_id, operation_key)), run_id, operation_key, decision
        )
        self._proposals[(run_id, operation_key)] = decided
        return decided

    def use_token(self, token_id: str, run_id: str, at: datetime) -> None:
        self._approvals()
        user = self._token_uses.setdefault(token_id, run_id)
        if user != run_id:
            raise _reused(token_id, user)


APPROVALS_MIGRATION: Final = """
    CREATE TABLE approvals (
        run_id TEXT NOT NULL,
        operation_key TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        proposal TEXT NOT NULL,
        proposed INTEGER NOT NULL,
        PRIMARY KEY (run_id, operation_key)
    ) WITHOUT ROWID;
    CREATE TABLE token_uses (
        token_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        used_at TEXT NOT NULL
    ) WITHOUT ROWID
"""
"""The SQLite store's schema for approvals (one migration of `sqlite.MIGRATIONS`)."""


class SqliteApprovals:
    """`ApprovalLedger` on the SQLite store's connection (mixed into `SqliteStore`)."""

    path: Path | str
    _conn: sqlite3.Connection

    def _proposal(self, text: Any, run_id: str, key: str) -> Proposal:
        try:
            return PROPOSAL_ADAPTER.validate_json(text)
        except ValueError as exc:
            raise StoreCorrupt(
                f"{self.path}: proposal {key} of run {run_id} cannot be read back"
            ) from exc

    def propose(self, proposal: Proposal) -> Proposal:
        body = PROPOSAL_ADAPTER.dump_json(proposal).decode()
        with transaction(self._conn, self.path) as conn:
            row = conn.execute(
                "SELECT proposal FROM approvals WHERE run_id = ? AND operation_key = ?",
                (proposal.run_id, proposal.operation_key),
            ).fetchone()
            if row is not None:
                return self._proposal(row[0], proposal.run_id, proposal.operation_key)
            conn.execute(
                "INSERT INTO approvals (run_id, operation_key, status, created_at, proposal, "
                "proposed) VALUES (?, ?, ?, ?, ?, "
                "(SELECT COALESCE(MAX(proposed), 0) + 1 FROM approvals))",
                (
                    proposal.run_id,
                    proposal.operation_key,
                    proposal.status,
                    proposal.created_at.isoformat(),
                    body,
                ),
            )
        return proposal

    def proposals(self, run_id: str | None = None) -> list[Proposal]:
        sql = "SELECT run_id, operation_key, proposal FROM approvals"
        params: tuple[Any, ...] = ()
        if run_id is not None:
            sql, params = sql + " WHERE run_id = ?", (run_id,)
        try:
            rows = self._conn.execute(sql + " ORDER BY proposed", params).fetchall()
        except sqlite3.Error as exc:
            raise translate(self.path, exc) from exc
        return [self._proposal(text, run, key) for run, key, text in rows]

    def decide(self, run_id: str, operation_key: str, decision: ApprovalDecision) -> Proposal:
        with transaction(self._conn, self.path) as conn:
            row = conn.execute(
                "SELECT proposal FROM approvals WHERE run_id = ? AND operation_key = ?",
                (run_id, operation_key),
            ).fetchone()
            existing = self._proposal(row[0], run_id, operation_key) if row else None
            decided = _decided(existing, run_id, operation_key, decision)
            conn.execute(
                "UPDATE approvals SET status = ?, proposal = ? "
                "WHERE run_id = ? AND operation_key = ? AND status = 'pending'",
                (
                    decided.status,
                    PROPOSAL_ADAPTER.dump_json(decided).decode(),
                    run_id,
                    operation_key,
                ),
            )
        return decided

    def use_token(self, token_id: str, run_id: str, at: datetime) -> None:
        with transaction(self._conn, self.path) as conn:
            row = conn.execute(
                "SELECT run_id FROM token_uses WHERE token_id = ?", (token_id,)
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO token_uses (token_id, run_id, used_at) VALUES (?, ?, ?)",
                    (token_id, run_id, at.isoformat()),
                )
            elif row[0] != run_id:
                raise _reused(token_id, str(row[0]))


@runtime_checkable
class AsyncApprovalLedger(Protocol):
    """`ApprovalLedger`, awaited (a store on the network: PostgreSQL)."""

    async def propose(self, proposal: Proposal) -> Proposal: ...

    async def proposals(self, run_id: str | None = None) -> list[Proposal]: ...

    async def decide(
        self, run_id: str, operation_key: str, decision: ApprovalDecision
    ) -> Proposal: ...

    async def use_token(self, token_id: str, run_id: str, at: datetime) -> None: ...
