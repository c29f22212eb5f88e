"""Approvals from outside the model: list pending proposals, approve (with a confirm token), deny.

A write that needs approval is recorded as a `Proposal` (its canonical parameters, their hash, a
summary a person can read) instead of being committed, and its run ends `escalate` with reason
`approval_required`. `approve` records the decision with the approver's id and issues a confirm
token (`runner.core.confirm`) bound to the run, the operation key, the parameter hash, the tenant,
the approver, the policy digest and an expiry. `Engine.continue_approved` then continues the run
with the token; `deny` records a denial, and the continuation ends `abstain`.

The model never sees a proposal's token, and an approval never adds a scope: a write outside the
principal's scopes is refused at admission before any proposal is made.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, TypeGuard

from ..base._jsonsafe import safe_str
from ..base.errors import ApprovalRefused, ConfigError
from ..core.confirm import ApprovalSecret, TokenClaims, issue_token
from ..store.approvals import ApprovalDecision, ApprovalLedger, Proposal

DEFAULT_TTL: Final = timedelta(minutes=30)
"""How long a confirm token stays valid after the approval."""
_SUMMARY_LIMIT: Final = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """An approval as given: the decided proposal and its confirm token (for the runtime only)."""

    proposal: Proposal
    token: str
    claims: TokenClaims


def _keeps(store: object) -> TypeGuard[ApprovalLedger]:
    """Whether `store` keeps approvals (a `BlockingStore` or the engine's queue of writes to an
    awaited store: when the store behind it does)."""
    return isinstance(store, ApprovalLedger) and getattr(store, "keeps_approvals", True) is True


def ledger_of(store: object) -> ApprovalLedger:
    """The store's approval ledger (a `FanoutStore`'s primary's, the store `StepCommits` wraps);
    `ConfigError` for a store that keeps none."""
    for wrapped in ("primary", "inner"):  # a FanoutStore's primary; StepCommits' inner store
        inner = getattr(store, wrapped, None)
        if not _keeps(store) and _keeps(inner):
            return inner
    if not _keeps(store):
        raise ConfigError(
            f"{type(store).__name__} keeps no approvals "
            "(use MemoryStore, SqliteStore or PostgresStore)"
        )
    return store


def summarize_write(tool: str, params: Mapping[str, Any], template: str | None = None) -> str:
    """A one-line, human-readable account of a write's parameters: the contract's
    `approval_summary` filled in, or `tool: k=v, ...` (also when an argument it names is
    absent, e.g. an optional one)."""
    parts = [f"{key}={safe_str(value)}" for key, value in sorted(params.items())]
    text = f"{tool}: " + ", ".join(parts)
    if template is not None:
        with contextlib.suppress(KeyError, ValueError, IndexError):
            text = template.format_map({key: safe_str(value) for key, value in params.items()})
    printable = "".join(ch if ch.isprintable() else "?" for ch in text)
    return (
        printable if len(printable) <= _SUMMARY_LIMIT else printable[: _SUMMARY_LIMIT - 3] + "..."
    )


def pending_approvals(store: object, run_id: str | None = None) -> list[Proposal]:
    """Every proposal still waiting for a decision (of one run, or of all), oldest first."""
    return [p for p in ledger_of(store).proposals(run_id) if p.status == "pending"]


def find_proposal(store: object, run_id: str, operation: str | None = None) -> Proposal:
    """The run's pending proposal named by `operation` (its operation key or its tool), or its
    only pending one when `operation` is None; `ApprovalRefused` when there is no such one."""
    pending = pending_approvals(store, run_id)
    if operation is not None:
        pending = [p for p in pending if operation in (p.operation_key, p.tool)]
    if not pending:
        what = f" for {operation}" if operation else ""
        raise ApprovalRefused("no_proposal", f"run {run_id} has no pending proposal{what}")
    if len(pending) > 1:
        keys = ", ".join(p.operation_key for p in pending)
        raise ApprovalRefused(
            "ambiguous", f"run {run_id} has {len(pending)} pending proposals ({keys}): name one"
        )
    return pending[0]


def _approver(approver: str) -> str:
    if not approver or not approver.isprintable() or len(approver) > 200:
        raise ConfigError(f"an approver id is 1..200 printable characters, got {approver!r}")
    return approver


def approve(
    store: object,
    run_id: str,
    operation: str | None = None,
    *,
    approver: str,
    secret: ApprovalSecret,
    now: datetime,
    ttl: timedelta = DEFAULT_TTL,
    note: str | None = None,
) -> Approval:
    """Approve a pending proposal: record the decision and issue its confirm token."""
    try:  # a token that expires at once (or overflows the calendar) would burn the approval
        expires_at = now + ttl if ttl > timedelta(0) else None
    except OverflowError:
        expires_at = None
    if expires_at is None:
        raise ConfigError(f"an approval's ttl is a duration above 0 that ends by 9999, got {ttl}")
    proposal = find_proposal(store, run_id, operation)
    claims = TokenClaims(
        token_id=str(uuid.uuid4()),
        run_id=proposal.run_id,
        operation_key=proposal.operation_key,
        params_hash=proposal.params_hash,
        tenant=proposal.tenant,
        approver=_approver(approver),
        policy_digest=proposal.policy_digest,
        expires_at=expires_at,
    )
    token = issue_token(secret, claims)
    decided = ledger_of(store).decide(
        proposal.run_id,
        proposal.operation_key,
        ApprovalDecision(
            verdict="approved",
            approver=claims.approver,
            decided_at=now,
            note=note,
            token_id=claims.token_id,
            token=token,
            expires_at=claims.expires_at,
        ),
    )
    return Approval(proposal=decided, token=token, claims=claims)


def deny(
    store: object,
    run_id: str,
    operation: str | None = None,
    *,
    approver: str,
    now: datetime,
    note: str | None = None,
) -> Proposal:
    """Deny a pending proposal; its run's continuation ends `abstain` with the denial."""
    proposal = find_proposal(store, run_id, operation)
    return ledger_of(store).decide(
        proposal.run_id,
        proposal.operation_key,
        ApprovalDecision(verdict="denied", approver=_approver(approver), decided_at=now, note=note),
    )
