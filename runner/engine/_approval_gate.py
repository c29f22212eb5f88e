"""Admission's approval gate: which writes need a person's approval, and what the run holds.

A write needs approval when its contract says so, when the policy lists its tool, or when the
policy requires it for arguments whose values first appeared in a tool result. Such a write is sent
only under an approval decision the run was continued with (`RunSetup.grants`, from the runtime,
never from the model) for exactly its operation key, which binds tenant, tool and parameter hash.
Otherwise it is recorded as a proposal in the store's approval ledger and answered
`approval_required`; a denied one is answered `approval_denied`. Nothing a tool returns can change
any of this: the grants come from `RunSpec.continuation`, the rules from the policy and contract.
"""

from __future__ import annotations

from typing import Any, Final

from ..core.confirm import policy_digest
from ..core.observations import ApprovalDenied, ApprovalRequired, ToolObservation
from ..models.transcript import render_json
from ..record.operations import canonical
from ..store.approvals import Proposal
from ..tools.contracts import CompiledContract
from ._calls import approval_noted, traced
from ._state import RunState, Runtime, Slot
from .approvals import ledger_of, summarize_write

_MIN_TRACKED: Final = 3
"""Shorter string values (a room count, `no`) say nothing about where they came from."""


def provenance(run: RunState, arguments: dict[str, Any]) -> dict[str, str]:
    """Where each string argument's value first appeared: `task`, `tool:<tool>:<call id>` (the
    first tool result that carried it), or `model` (neither)."""
    sources: dict[str, str] = {}
    for name, value in arguments.items():
        if not isinstance(value, str) or len(value) < _MIN_TRACKED:
            continue
        if value in run.setup.spec.task:
            sources[name] = "task"
            continue
        needle = render_json(value)  # the value as a JSON string inside a result
        sources[name] = next(
            (
                f"tool:{item['tool']}:{item['call_id']}"
                for item in run.calls.evidence
                if needle in render_json(item.get("result"))
            ),
            "model",
        )
    return sources


def digest_for(runtime: Runtime, contract: CompiledContract) -> str:
    """The policy version an approval of this write is bound to."""
    return policy_digest(
        runtime.policy.model_dump(mode="json"), contract.contract.model_dump(mode="json")
    )


def gate(
    runtime: Runtime,
    run: RunState,
    slot: Slot,
    *,
    contract: CompiledContract,
    key: str,
    params_hash: str,
) -> ToolObservation | None:
    """None when the write may go on to its claim; else the observation that answers it."""
    call = slot.call
    rules = runtime.policy.approval
    reasons = []
    if contract.contract.requires_approval:
        reasons.append("contract")
    if call.name in rules.tools:
        reasons.append("policy:tool")
    if not reasons and not rules.untrusted_arguments:
        return None  # no approval in play: nothing to trace (a write costs no evidence scan)
    sources = provenance(run, dict(call.arguments))
    untrusted = [name for name, source in sources.items() if source.startswith("tool:")]
    if rules.untrusted_arguments:
        reasons += [f"provenance:{name}" for name in untrusted]
    if not reasons:
        return None
    if untrusted:  # recorded where approval is in play (runs without it record as they always did)
        traced(slot, sources)
    grant = run.setup.grants.get(key)
    if grant is not None and grant.get("params_hash") == params_hash:
        approval_noted(
            slot,
            {
                key_: str(grant[key_])
                for key_ in ("verdict", "approver", "token_id")
                if key_ in grant
            },
        )
        if grant.get("verdict") == "approved":
            return None
        return ApprovalDenied(
            call_id=call.id,
            tool=call.name,
            approver=str(grant.get("approver")),
            note=grant.get("note"),
        )
    params = canonical(dict(call.arguments))
    ledger_of(runtime.store).propose(
        Proposal(
            run_id=run.setup.run_id,
            operation_key=key,
            tenant=run.setup.spec.tenant,
            tool=call.name,
            params=params,
            params_hash=params_hash,
            summary=summarize_write(call.name, params, contract.contract.approval_summary),
            policy_digest=digest_for(runtime, contract),
            created_at=runtime.clock.now(),
            call_id=call.id,
            reasons=reasons,
            provenance=sources,
        )
    )
    approval_noted(slot, {"verdict": "required", "reasons": ",".join(reasons)}, proposed=key)
    return ApprovalRequired(
        call_id=call.id, tool=call.name, operation_key=key, reasons=tuple(reasons)
    )
