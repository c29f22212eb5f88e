"""Continuing a run that ended waiting for approval: check every decision, then build the
continuation's grants.

The waiting run ended `escalate` (`approval_required`); its proposals have been decided outside the
model. Its continuation is a new run that re-drives the waiting run's recorded inputs and goes on
live, with the decisions as `RunSpec.continuation` (recorded in its header, so it resumes and
replays like any run). Each approval's confirm token is verified against the proposal, the tenant
of the continuing spec and the policy version now in force before anything is stored; then each
token's use is recorded for the continuation (a second continuation with the same token is
`TokenReused`). The continuation's id is derived from the waiting run and its decisions, so asking
again after a crash finds the same continuation instead of starting a second one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._approval_gate import digest_for
from ._state import Runtime
from .confirm import ApprovalSecret, read_token, verify_token
from .errors import ApprovalRefused
from .spec import RunSpec
from .states import State
from .store.approvals import Proposal
from .trace import RunHeader, RunSummary

_NAMESPACE = uuid.UUID("5b0c3c1e-7a51-4c1f-9d0a-2f6c7f7e0a12")


def check_waiting(
    run_id: str, header: RunHeader | None, summary: RunSummary | None
) -> Mapping[str, Any] | None:
    """The waiting run's own `continues` (None: it is no continuation); `ApprovalRefused` when
    there is no such run or it is not waiting for approval."""
    if header is None:
        raise ApprovalRefused("no_proposal", f"no run {run_id} in the store")
    if (
        summary is None
        or summary.terminal != State.ESCALATE
        or summary.reason != "approval_required"
    ):
        state = f"{summary.terminal} ({summary.reason})" if summary else "still running"
        raise ApprovalRefused("not_waiting", f"run {run_id} is not waiting for approval: {state}")
    return header.continues


@dataclass(frozen=True, slots=True)
class WaitingRun:
    """What the store holds of the waiting run, read by the caller (an awaited store is read
    with await before the checks, which stay synchronous)."""

    header: RunHeader | None
    summary: RunSummary | None
    proposals: list[Proposal]


def _verified(
    runtime: Runtime,
    spec: RunSpec,
    proposal: Proposal,
    *,
    token: str,
    secret: ApprovalSecret,
    now: datetime,
) -> str:
    contract = runtime.contracts.get(proposal.tool)
    if contract is None:
        raise ApprovalRefused("other_policy", f"{proposal.tool} has no contract any more")
    claims = verify_token(
        secret,
        token,
        run_id=proposal.run_id,
        operation_key=proposal.operation_key,
        params_hash=proposal.params_hash,
        tenant=spec.tenant,
        policy_digest=digest_for(runtime, contract),
        now=now,
    )
    return claims.token_id


def plan_continuation(
    runtime: Runtime,
    run_id: str,
    spec: RunSpec,
    *,
    secret: ApprovalSecret,
    now: datetime,
    waiting: WaitingRun,
    token: str | None = None,
) -> tuple[str, dict[str, Any], list[str]]:
    """The continuation's run id, its `RunSpec.continuation`, and the token ids it uses.

    `token`: a confirm token the caller holds (else each approval's token from the ledger).
    `waiting`: the waiting run and its proposals, as the engine read them from its store.
    Raises `ApprovalRefused` (or its subclasses) and stores nothing when any check fails.
    """
    earlier = check_waiting(run_id, waiting.header, waiting.summary) or {}
    proposals = waiting.proposals
    if not proposals:
        raise ApprovalRefused("no_proposal", f"run {run_id} has no proposals")
    pending = [p.operation_key for p in proposals if p.status == "pending"]
    if pending:
        raise ApprovalRefused("pending", f"run {run_id} still waits for {', '.join(pending)}")
    offered = read_token(secret, token) if token is not None else None
    grants = [dict(g) for g in earlier.get("grants", ())]
    used: list[str] = []
    for proposal in proposals:
        decision = proposal.decision
        assert decision is not None
        grant: dict[str, Any] = {
            "run_id": proposal.run_id,
            "operation_key": proposal.operation_key,
            "params_hash": proposal.params_hash,
            "verdict": decision.verdict,
            "approver": decision.approver,
        }
        if decision.verdict == "approved":
            mine = (
                token
                if offered is not None
                and _presented_for(offered.operation_key, proposal, proposals)
                else None
            )
            given = mine or decision.token
            if given is None:
                raise ApprovalRefused(
                    "forged", f"the approval of {proposal.operation_key} has no token"
                )
            grant["token_id"] = _verified(
                runtime, spec, proposal, token=given, secret=secret, now=now
            )
            used.append(grant["token_id"])
        elif decision.note:
            grant["note"] = decision.note
        grants.append(grant)
    identity = ",".join(f"{g['operation_key']}={g.get('token_id', g['verdict'])}" for g in grants)
    continuation_id = str(uuid.uuid5(_NAMESPACE, f"{run_id}|{identity}"))
    continuation = {
        "run_id": run_id,
        "key_scope": str(earlier.get("key_scope") or run_id),
        "grants": grants,
    }
    return continuation_id, continuation, used


def _presented_for(key: str, proposal: Proposal, proposals: list[Proposal]) -> bool:
    """Whether the caller's token is to be checked against `proposal`: the one its claims name,
    or, when they name none of the run's approved proposals, the first approved one (where the
    check then says what it is bound to instead)."""
    approved = [p for p in proposals if p.decision is not None and p.decision.verdict == "approved"]
    if any(p.operation_key == key for p in approved):
        return proposal.operation_key == key
    return bool(approved) and proposal is approved[0]
