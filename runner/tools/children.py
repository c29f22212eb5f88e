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
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from ..base.errors import ConfigError
from ..core.budget import Limits, Usage
from ..core.states import State
from ..engine.handle import RunHandle
from ..models.base import ModelAdapter
from ..record.spec import RunResult, RunSpec
from .contracts import CompiledContract, Contract, compile_contract
from .invocation import BudgetLeft, CancelSignal, ToolInvocation, ToolResponse

if TYPE_CHECKING:
    from ..engine.engine import Engine
    from ..store.base import Store

CHILD_FIELD: Final = "child_run"
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
    if contract is None:
        return False
    for branch in contract.contract.result_schema.get("oneOf", ()):  # (a loop: twice a step)
        if CHILD_FIELD in branch.get("properties", ()):
            return True
    return False


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


def summary_of(result: RunResult, key: str | None) -> dict[str, Any]:
    """What the parent is told (and charged) of a child that ended."""
    handed = result.transitions[-1].operation_key if result.terminal is State.UNKNOWN else None
    return {
        "run_id": result.run_id,
        "terminal": result.terminal.value,
        "reason": result.reason,
        "answer": result.answer,
        "attempts": result.attempts,
        "model_steps": result.model_steps,
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
        "cost_usd": result.cost_usd,
        "operation_key": handed,
    }


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


@dataclass(slots=True, kw_only=True)
class ChildRun:
    """A tool that runs a child: its task from the call's arguments, its own tools and model,
    run by `engine` (which must share the parent's store and clock).

    Register it (or `tool()`) and its `lookup` (or `lookup_tool()`) under `name` and
    `lookup_name(name)` in the parent's toolbox, and `child_contracts(name, ...)` in the
    parent's contracts.
    """

    name: str
    engine: Engine
    task: Callable[[Mapping[str, Any]], str]
    tools: Sequence[str]
    model: Callable[[], ModelAdapter]
    """A fresh model for each child (and for a child resumed after a crash)."""
    limits: Limits = field(default_factory=Limits)
    """The most the child may ever have; cut down to what the parent has left."""
    system_prompt: str | None = None

    def spec(
        self, invocation: ToolInvocation, limits: Limits, *, task: str | None = None
    ) -> RunSpec:
        key = invocation.operation_key
        return RunSpec(
            task=task if task is not None else self.task(invocation.arguments),
            tenant=invocation.tenant,
            principal=invocation.principal,  # never more authority than the parent
            tools=tuple(self.tools),
            limits=limits,
            credentials=invocation.credentials,
            name=f"{self.name}:child",
            seed=int(uuid.UUID(child_run_id(key or invocation.call_id)).int % 2**63),
            system_prompt=self.system_prompt,
            annotations={
                "parent": {
                    "run_id": invocation.run_id,
                    "call_id": invocation.call_id,
                    "tool": invocation.tool,
                    "operation_key": key,
                }
            },
        )

    async def __call__(self, invocation: ToolInvocation) -> ToolResponse:
        """Run the child for one call, on what the parent has left."""
        key = invocation.operation_key
        if key is None:
            raise ConfigError(f"{self.name} must be declared with child_contracts (a write)")
        left = invocation.budget_left or BudgetLeft.of(self.limits)
        limits = carve(self.limits, left, invocation.timeout_s)
        if limits is None:
            return ToolResponse(
                payload={
                    "status": "error",
                    "error_code": "budget_exhausted",
                    "message": "the parent has no budget left to carve a child run from",
                }
            )
        run_id = child_run_id(key)
        tie = _Tie(invocation.cancel_requested)
        handle = self.engine.start(self.spec(invocation, limits), self.model(), run_id=run_id)
        tie.adopt(handle)
        result = await tie.result(handle.result())
        return ToolResponse(payload=answer_payload(summary_of(result, key)))

    async def lookup(self, invocation: ToolInvocation) -> ToolResponse:
        """Reconcile the parent's call by its key: how its child ended (resumed first if a
        crash left it unfinished); `found: false` when no child was ever started."""
        key = invocation.operation_key
        store: Store = self.engine.runtime.store
        run_id = child_run_id(key or "")
        header = store.header(run_id)
        if header is None:
            return ToolResponse(payload={"status": "ok", "found": False})
        summary = store.summary(run_id)
        if summary is None:  # the crash took the child down mid-run: it goes on from its record
            limits = Limits.model_validate(header.limits)
            spec = self.spec(invocation, limits, task=header.task)
            tie = _Tie(invocation.cancel_requested)
            resumed = self.engine.resume(run_id, spec, self.model(), started=tie.adopt)
            result = await tie.result(resumed)
            child = summary_of(result, key)
        else:
            transitions = store.transitions(run_id)
            result = RunResult.of(summary, name=header.name, transitions=transitions, evidence=[])
            child = summary_of(result, key)
        answer = answer_payload(child)
        if answer["status"] == "ok":
            return ToolResponse(payload={"status": "ok", "found": True, CHILD_FIELD: child})
        if child["terminal"] == State.UNKNOWN.value:
            return ToolResponse(payload=answer)  # inconclusive: the parent ends unknown
        # The child ended (abstain, escalate): the call happened; the parent reads how.
        return ToolResponse(payload={"status": "ok", "found": True, CHILD_FIELD: child})

    def tool(self) -> Callable[[ToolInvocation], Any]:
        return self.__call__

    def lookup_tool(self) -> Callable[[ToolInvocation], Any]:
        return self.lookup


class _Tie:
    """A child's run tied to its parent's: a cancel of the parent asks the child to cancel (it
    settles its own batch in flight, then ends `abstain`, reason `cancelled`), and the parent
    stopping (its task cancelled: the process going down) stops the child where it is, to be
    resumed with it."""

    def __init__(self, parent_cancel: CancelSignal | None) -> None:
        self.parent_cancel = parent_cancel
        self.handles: list[RunHandle] = []

    def adopt(self, handle: RunHandle) -> None:
        """Tie the child's `handle` (a started or resumed run's) to the parent."""
        self.handles.append(handle)
        if self.parent_cancel is not None and self.parent_cancel.is_set():
            handle.cancel()

    async def result(self, child: Awaitable[RunResult]) -> RunResult:
        """Await the child's end under the tie."""
        watch = None
        if self.parent_cancel is not None:
            watch = asyncio.ensure_future(self._cancel_on_request(self.parent_cancel))
        try:
            return await child
        except asyncio.CancelledError:
            for handle in self.handles:
                handle.stop()
            raise
        finally:
            if watch is not None:
                watch.cancel()

    async def _cancel_on_request(self, parent_cancel: CancelSignal) -> None:
        await parent_cancel.wait()
        for handle in self.handles:
            handle.cancel()


def family_ids(store: Store, run_id: str) -> list[str]:
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
