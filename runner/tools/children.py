"""Child runs: a tool implemented as a run of its own (a sub-agent with its own task, tools and
model), on a budget carved from what its parent has left.

A child-run tool is a write (it may do anything its own tools do) with a runtime lookup, both
described by `child_contracts`. When the parent dispatches it, the engine hands it what the parent
has left (`ToolInvocation.budget_left`, with what other child calls of the batch hold back taken
off); the child's limits are its own, cut down to that, never more. The child is an ordinary run
in the same store, its id derived from the parent call's operation key and its header linking
the parent (`annotations["parent"]`). When it ends, whatever its terminal, the parent receives a
typed observation and goes on under its own policy:

| child ends | parent observes |
|---|---|
| complete | `ok`, the child's answer as the result |
| abstain | `permanent` (`child_abstained`), the child's partial answer as the detail |
| escalate | `access_denied` (the child needs a person, so does the parent) |
| unknown | `unknown_outcome` (the child's key in the reason): reconciled, then `unknown` |

The child's attempts, model steps, tokens and cost are charged to the parent when its outcome is
classified (from the recorded payload, so a replay charges the same). Its limits hold its final
tool-free request too (`Limits.final_within_caps`), so the family never passes the parent's caps
but by the parent's own final request. A crash while a child runs leaves the parent's call
pending: resuming the parent reconciles it through the lookup, which resumes the child (or reads
how it ended) by the key, and admits no attempt of its own (the child's are charged instead). A
cancel of the parent asks a child in flight to cancel (`ToolInvocation.cancel_requested`).

Here is what a child-run tool is (its contracts, the budget carved for it, its answer and what it
charges); the tool that runs one, `ChildRun`, drives an engine, so it sits in the engine layer
(`runner.engine.children`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Protocol

from ..core.budget import Limits, Usage
from ..core.states import State
from .contracts import CHILD_FIELD, CompiledContract, Contract, compile_contract
from .invocation import BudgetLeft, ToolResponse

"""The payload field a child-run tool's answer (and its lookup's) carries the child in."""
_NAMESPACE: Final = uuid.UUID("6f0c5a52-8d3e-4c1e-9a51-2b7f3f0e9c11")
_LIMIT_FIELDS: Final = ("attempts", "model_steps", "tokens", "seconds")


def child_run_id(operation_key: str) -> str:
    """The child run's id for the parent call holding `operation_key` (the same after a crash)."""
    return str(uuid.uuid5(_NAMESPACE, operation_key))


def lookup_name(tool: str) -> str:
    return f"{tool}_lookup"


_CHILD_RESULT: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["run_id", "terminal", "reason", "attempts", "tokens_in", "tokens_out"],
    "properties": {
        "run_id": {"type": "string"},
        "terminal": {"enum": ["complete", "abstain", "escalate", "unknown"]},
        "reason": {"type": "string"},
        "answer": {"type": ["string", "null"]},
        "attempts": {"type": "integer", "minimum": 0},
        "tokens_in": {"type": "integer", "minimum": 0},
        "tokens_out": {"type": "integer", "minimum": 0},
        "cost_usd": {"type": ["number", "null"], "minimum": 0},
        "operation_key": {"type": ["string", "null"]},
    },
}


def _result_schema(lookup: bool) -> dict[str, Any]:
    ok: dict[str, Any] = {
        "type": "object",
        "required": ["status", CHILD_FIELD],
        "properties": {"status": {"const": "ok"}, CHILD_FIELD: _CHILD_RESULT},
    }
    if lookup:
        ok["required"] = ["status", "found"]
        ok["properties"]["found"] = {"type": ["boolean", "null"]}
    error = {
        "type": "object",
        "required": ["status", "error_code"],
        "properties": {
            "status": {"const": "error"},
            "error_code": {"type": "string"},
            "message": {"type": "string"},
            "retryable": {"type": "boolean"},
            CHILD_FIELD: _CHILD_RESULT,
        },
    }
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "oneOf": [ok, error]}


def child_contracts(
    name: str,
    description: str,
    input_schema: dict[str, Any],
    *,
    scope: str,
    timeout_s: float = 600,
) -> list[CompiledContract]:
    """The contracts of a child-run tool and its runtime lookup (add both to the parent's set).

    `timeout_s` bounds the whole child run (its deadline is carved within it)."""
    tool = Contract(
        name=name,
        description=description,
        input_schema=input_schema,
        result_schema=_result_schema(lookup=False),
        side_effect="write",
        scope=scope,
        timeout_s=timeout_s,
        reconcile_with=lookup_name(name),
    )
    lookup = Contract(
        name=lookup_name(name),
        description=f"Look up the child run of {name} by the parent call's operation key.",
        input_schema={"type": "object", "additionalProperties": False, "properties": {}},
        result_schema=_result_schema(lookup=True),
        side_effect="read",
        scope=scope,
        timeout_s=timeout_s,
        audience="runtime",
    )
    return [compile_contract(tool, f"child:{name}"), compile_contract(lookup, f"child:{name}")]


def is_child_contract(contract: CompiledContract | None) -> bool:
    """Whether a tool's answers carry a child run (whose spending the parent is charged)."""
    return contract is not None and contract.carries_child


def budget_left(
    limits: Limits, usage: Usage, now: float, held: BudgetLeft | None, *, waiting: int = 0
) -> BudgetLeft:
    """What a run has left now, less what child calls in flight hold and the attempts that
    `waiting` calls of the batch, not admitted yet, will take."""
    left = BudgetLeft(
        attempts=max(0, limits.max_attempts - usage.attempts - max(0, waiting)),
        model_steps=max(0, limits.max_model_steps - usage.model_steps),
        tokens=max(0, limits.max_tokens - usage.tokens),
        seconds=max(0.0, usage.started_at + limits.max_seconds - now),
        cost_usd=(
            None
            if limits.max_cost_usd is None
            else max(0.0, float(Decimal(str(limits.max_cost_usd)) - usage.cost_usd))
        ),
    )
    return left if held is None else left.minus(held)


def child_in(payload: object) -> dict[str, Any] | None:
    """The child a child-run tool's answer (or its lookup's) names, or None: what its run is
    charged (`engine/_spending.charge_child`)."""
    child = payload.get(CHILD_FIELD) if isinstance(payload, dict) else None
    return child if isinstance(child, dict) else None


def _count(value: object) -> int:
    return value if type(value) is int and value > 0 else 0


def carve(own: Limits, left: BudgetLeft, timeout_s: float) -> Limits | None:
    """The child's limits: its own, cut to what the parent has left and to the call's timeout
    (a little inside it, so the child records its end before the call times out); None when
    nothing is left to run a child on."""
    seconds = min(own.max_seconds, left.seconds, timeout_s * 0.95)
    if min(left.attempts, left.model_steps, left.tokens) < 1 or seconds <= 0:
        return None
    cost = own.max_cost_usd
    if left.cost_usd is not None:
        if left.cost_usd <= 0:
            return None
        cost = left.cost_usd if cost is None else min(cost, left.cost_usd)
    return Limits(
        max_attempts=min(own.max_attempts, left.attempts),
        max_model_steps=min(own.max_model_steps, left.model_steps),
        max_tokens=min(own.max_tokens, left.tokens),
        max_seconds=seconds,
        max_cost_usd=cost,
        final_within_caps=True,  # what the parent has left holds the child's final request too
    )


def answer_payload(child: dict[str, Any]) -> dict[str, Any]:
    """The child-run tool's answer for a child that ended (see the table above)."""
    terminal, reason = child["terminal"], child["reason"]
    if terminal == State.COMPLETE.value:
        return {"status": "ok", CHILD_FIELD: child}
    if terminal == State.ABSTAIN.value:
        partial = f": {child['answer']}" if child.get("answer") else ""
        message = f"child run {child['run_id']} abstained ({reason}){partial}"
        return _error("child_abstained", message, child)
    if terminal == State.ESCALATE.value:
        message = f"child run {child['run_id']} escalated ({reason}): it needs a person"
        return _error("access_denied", message, child)
    message = f"child run {child['run_id']} ended unknown ({reason}); key {child['operation_key']}"
    return _error("outcome_unknown", message, child)


def answer_of_child(found: Mapping[str, Any]) -> ToolResponse | None:
    """What a child-run call answers, from its lookup's answer naming the child that ended
    (None when it names none): after a crash the call is settled as it would have been, so a
    child that abstained or escalated is not read as a success."""
    child = found.get(CHILD_FIELD)
    if not isinstance(child, dict):
        return None
    return ToolResponse(payload=answer_payload(child))


def _error(code: str, message: str, child: dict[str, Any]) -> dict[str, Any]:
    return {"status": "error", "error_code": code, "message": message[:480], CHILD_FIELD: child}


class RunReads(Protocol):
    """What `family_ids` reads of a store (every `Store` does)."""

    def header(self, run_id: str) -> object | None: ...

    def outputs(self, run_id: str) -> Sequence[Any]: ...


def family_ids(store: RunReads, run_id: str) -> list[str]:
    """`run_id` and every run it started, depth first (children in call order)."""
    found = [run_id]
    for _, child in children_of(store.outputs(run_id)):
        if child not in found and store.header(child) is not None:
            found += [i for i in family_ids(store, child) if i not in found]
    return found


def parent_of(header: Any) -> str | None:
    """The run that started a child run (from its header), or None."""
    parent = header.annotations.get("parent")
    run_id = parent.get("run_id") if isinstance(parent, dict) else None
    return run_id if isinstance(run_id, str) else None


@dataclass(frozen=True, slots=True)
class Charged:
    """What a run was charged for its children (or for one of them)."""

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    model_steps: int = 0


def charged_by_children(outputs: Sequence[Any]) -> Charged:
    """What a run was charged for its children, from its recorded outputs."""
    charges = charges_by_call(outputs).values()
    return Charged(
        tokens_in=sum(charge.tokens_in for charge in charges),
        tokens_out=sum(charge.tokens_out for charge in charges),
        cost_usd=sum(charge.cost_usd for charge in charges),
        model_steps=sum(charge.model_steps for charge in charges),
    )


def charges_by_call(outputs: Sequence[Any]) -> dict[str, Charged]:
    """What each child-run call charged its run, by call id, from the recorded outputs (once
    per call, as the engine charges: the first answer naming a child)."""
    charges: dict[str, Charged] = {}
    for output in outputs:
        payload = getattr(output.outcome, "payload", None)
        child = payload.get(CHILD_FIELD) if isinstance(payload, dict) else None
        call = output.call_id.removesuffix("~lookup")
        if not isinstance(child, dict) or call in charges:
            continue
        spent = child.get("cost_usd")
        charges[call] = Charged(
            tokens_in=_count(child.get("tokens_in")),
            tokens_out=_count(child.get("tokens_out")),
            cost_usd=spent
            if isinstance(spent, int | float) and not isinstance(spent, bool)
            else 0.0,
            model_steps=_count(child.get("model_steps")),
        )
    return charges


def children_of(outputs: Sequence[Any]) -> list[tuple[str, str]]:
    """(call id, child run id) for every child a run's recorded outputs name, in order."""
    found: list[tuple[str, str]] = []
    for output in outputs:
        payload = getattr(output.outcome, "payload", None)
        child = payload.get(CHILD_FIELD) if isinstance(payload, dict) else None
        if isinstance(child, dict) and isinstance(child.get("run_id"), str):
            pair = (output.call_id.removesuffix("~lookup"), child["run_id"])
            if pair not in found:
                found.append(pair)
    return found
