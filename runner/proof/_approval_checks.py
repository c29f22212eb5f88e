"""Grading approvals from the record alone: no write that needed approval was sent without one,
no confirm token was used twice, and what was approved or denied in each run.

What needed approval is read from the run's header (its policy's approval rules) and the contract
of the tool, and from the write's record (its provenance, when some argument came from a tool
result); what was granted from the header's `continues` grants and each write's `approval`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ..core.machine import Trigger
from ..core.result_classes import DISPATCHED
from ..record.trace import TransitionRecord
from ..tools.contracts import ContractSet
from .replay import Recording


def _needed(recording: Recording, contracts: ContractSet, record: TransitionRecord) -> list[str]:
    contract = contracts.get(record.tool or "")
    if contract is None or contract.contract.side_effect != "write":
        return []
    rules = recording.header.policy.get("approval") or {}
    reasons = ["contract"] if contract.contract.requires_approval else []
    if record.tool in (rules.get("tools") or ()):
        reasons.append("policy:tool")
    if rules.get("untrusted_arguments") and record.provenance:
        reasons += [
            f"provenance:{name}"
            for name, source in sorted(record.provenance.items())
            if source.startswith("tool:")
        ]
    return reasons


def _grants(recording: Recording) -> dict[str, dict[str, object]]:
    continues = recording.header.continues or {}
    return {str(g.get("operation_key")): dict(g) for g in continues.get("grants", ())}


def unapproved_write(recording: Recording, contracts: ContractSet) -> str | None:
    """Where a dispatched write that needed approval went out without one (None: nowhere).

    Every such write must go out went out under an approval the run was
    continued with, for its very operation key (which binds tenant, tool and parameters)."""
    outputs = {(output.call_id, output.tool) for output in recording.outputs}
    grants = _grants(recording)
    for record in recording.transitions:
        if record.trigger != Trigger.CLASSIFY:
            continue
        dispatched = record.result_class in DISPATCHED or (record.call_id, record.tool) in outputs
        if not dispatched or not _needed(recording, contracts, record):
            continue
        grant = grants.get(record.operation_key or "")
        approval = record.approval or {}
        if grant is None or grant.get("verdict") != "approved":
            return f"seq {record.seq}: {record.tool} sent without approval"
        if any(approval.get(k) != grant.get(k) for k in ("token_id", "approver", "verdict")):
            return f"seq {record.seq}: the approval recorded differs from its grant"
    return None


def introduced_tokens(recording: Recording) -> list[str]:
    """The confirm tokens this run used itself (not inherited from the run it continues)."""
    continues = recording.header.continues or {}
    waited = continues.get("run_id")
    return [
        str(g["token_id"])
        for g in continues.get("grants", ())
        if g.get("token_id") and g.get("run_id") == waited
    ]


def token_misused(recording: Recording) -> str | None:
    """Within the run: each token is granted once, and every approved write names the token of
    its own operation's grant. None when so, else where not."""
    continues = recording.header.continues or {}
    tokens = [str(g["token_id"]) for g in continues.get("grants", ()) if g.get("token_id")]
    if len(tokens) != len(set(tokens)):
        return "a token is granted twice in the header"
    by_token = {
        str(g["token_id"]): str(g["operation_key"])
        for g in continues.get("grants", ())
        if g.get("token_id")
    }
    for record in recording.transitions:
        token = (record.approval or {}).get("token_id")
        if token is not None and by_token.get(token) != record.operation_key:
            return f"seq {record.seq}: token {token} used for another write"
    return None


def tokens_used_by_several_runs(recordings: Iterable[Recording]) -> dict[str, list[str]]:
    """Token id -> the runs that used it, for every token more than one run used."""
    users: defaultdict[str, list[str]] = defaultdict(list)
    for recording in recordings:
        for token in introduced_tokens(recording):
            users[token].append(recording.header.run_id)
    return {token: runs for token, runs in users.items() if len(runs) > 1}


def approvals_of(recording: Recording) -> list[str]:
    """What was decided on this run's writes, one line each (`approved by alice: KEY`)."""
    lines = []
    for record in recording.transitions:
        approval = record.approval
        if record.trigger != Trigger.CLASSIFY or approval is None:
            continue
        who = f" by {approval['approver']}" if approval.get("approver") else ""
        lines.append(f"{approval.get('verdict')}{who}: {record.tool} {record.operation_key}")
    return lines


def grant_not_in_ledger(recording: Recording, store: object) -> str | None:
    """Where a grant the run's header claims is not the decision the store's approval ledger
    recorded (verdict, approver, token): a record edited to claim an approval agrees with
    itself, not with the ledger. None when every grant matches, or the store keeps no ledger."""
    from ..store.approvals import ApprovalLedger  # noqa: PLC0415  (grading needs no store)

    if not isinstance(store, ApprovalLedger):
        return None
    continues = recording.header.continues or {}
    for grant in continues.get("grants", ()):
        run_id, key = str(grant.get("run_id")), str(grant.get("operation_key"))
        decided = {p.operation_key: p.decision for p in store.proposals(run_id)}.get(key)
        recorded = (
            (decided.verdict, decided.approver, decided.token_id) if decided is not None else None
        )
        claimed = (grant.get("verdict"), grant.get("approver"), grant.get("token_id"))
        if recorded != claimed:
            return f"the grant of {key} is not the decision in the approval ledger"
    return None
