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

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..base.errors import ApprovalRefused, ConfigError, TokenExpired
from ..core.confirm import ApprovalSecret, read_token, verify_token
from ..core.states import State
from ..record.recording import RecordedOutput, RecordedTurn
from ..record.spec import RunSpec
from ..record.trace import RunHeader, RunSummary
from ..store.approvals import AsyncApprovalLedger, Proposal
from ..store.base import AsyncStore
from ._approval_gate import digest_for
from ._run_checks import as_it_began, check_same_limits, check_same_run
from ._state import Runtime
from .approvals import ledger_of

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
    expired: list[TokenExpired] = []
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
            try:
                grant["token_id"] = _verified(
                    runtime, spec, proposal, token=given, secret=secret, now=now
                )
            except TokenExpired as exc:  # fine if it was checked when the continuation began
                expired.append(exc)
                grant["token_id"] = read_token(secret, given).token_id
            used.append(grant["token_id"])
        elif decision.note:
            grant["note"] = decision.note
        grants.append(grant)
    identity = ",".join(f"{g['operation_key']}={g.get('token_id', g['verdict'])}" for g in grants)
    continuation_id = str(uuid.uuid5(_NAMESPACE, f"{run_id}|{identity}"))
    if expired and runtime.store.header(continuation_id) is None:
        raise expired[0]
    continuation = {
        "run_id": run_id,
        "key_scope": str(earlier.get("key_scope") or run_id),
        "grants": grants,
    }
    return continuation_id, continuation, used


def awaited_ledger(runtime: Runtime) -> AsyncApprovalLedger | None:
    """An awaited store's ledger (None: the store is synchronous, its ledger `ledger_of`)."""
    pending = runtime.pending
    if pending is None:
        return None
    if not isinstance(pending.store, AsyncApprovalLedger):
        raise ConfigError(f"{type(pending.store).__name__} keeps no approvals")
    return pending.store


async def read_waiting(runtime: Runtime, reader: AsyncStore, run_id: str) -> WaitingRun:
    """The run waiting for approval, read with await (its checks follow, synchronous)."""
    header = await reader.header(run_id)
    summary = await reader.summary(run_id)
    check_waiting(run_id, header, summary)  # refused before the ledger is asked
    awaited = awaited_ledger(runtime)
    proposals = (
        await awaited.proposals(run_id)
        if awaited is not None
        else ledger_of(runtime.store).proposals(run_id)
    )
    return WaitingRun(header, summary, proposals)


async def begin_continuation(
    runtime: Runtime,
    reader: AsyncStore,
    run_id: str,
    spec: RunSpec,
    *,
    secret: ApprovalSecret,
    now: datetime,
    token: str | None = None,
) -> tuple[str, RunSpec | None]:
    """The continuation's run id and the spec it starts with, once the uses of its tokens are
    recorded; None for the spec when that continuation was made already (asked again after a
    crash: resume it). Raises `ApprovalRefused` when the checks fail or it has already ended."""
    waiting = await read_waiting(runtime, reader, run_id)
    if waiting.header is not None:  # (`read_waiting` refused a run with none)
        check_same_limits(spec, waiting.header)  # before any token is used: nothing stored
    new_id, continuation, used = plan_continuation(
        runtime, run_id, spec, secret=secret, now=now, token=token, waiting=waiting
    )
    if waiting.header is not None:  # the tokens checked tenant and policy; the rest, here
        check_same_run(spec, waiting.header, runtime.policy, runtime.contracts)
    if await reader.header(new_id) is not None:  # asked again after a crash: the same one
        ended = await reader.summary(new_id)
        if ended is not None:
            raise ApprovalRefused(
                "continued",
                f"run {run_id} was continued as {new_id}, which ended {ended.terminal}",
                continued_as=new_id,
            )
        return new_id, None
    awaited = awaited_ledger(runtime)
    for token_id in used:
        if awaited is not None:
            await awaited.use_token(token_id, new_id, now)
        else:
            ledger_of(runtime.store).use_token(token_id, new_id, now)
    return new_id, dataclasses.replace(as_it_began(spec, waiting.header), continuation=continuation)


def _presented_for(key: str, proposal: Proposal, proposals: list[Proposal]) -> bool:
    """Whether the caller's token is to be checked against `proposal`: the one its claims name,
    or, when they name none of the run's approved proposals, the first approved one (where the
    check then says what it is bound to instead)."""
    approved = [p for p in proposals if p.decision is not None and p.decision.verdict == "approved"]
    if any(p.operation_key == key for p in approved):
        return proposal.operation_key == key
    return bool(approved) and proposal is approved[0]


def inputs_then(
    turns: list[RecordedTurn],
    waiting_turns: list[RecordedTurn],
    outputs: list[RecordedOutput],
    waiting_outputs: list[RecordedOutput],
) -> tuple[list[RecordedTurn], list[RecordedOutput]]:
    """A continuation's own recorded inputs, then the waiting run's it had not re-recorded yet
    (a continuation re-records them under the same ordinals)."""
    mine_t, mine_o = {t.ordinal for t in turns}, {o.ordinal for o in outputs}
    return (
        turns + [t for t in waiting_turns if t.ordinal not in mine_t],
        outputs + [o for o in waiting_outputs if o.ordinal not in mine_o],
    )
