"""`ChildRun`: a tool implemented as a run of its own, started (or resumed) in an engine; what a
child-run tool is, its contracts, budget and answer, is the tools layer's (`runner.tools.children`,
whose names are found here too: the old `runner.children` leads here).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.errors import ConfigError
from ..core.budget import Limits
from ..core.states import State
from ..models.base import ModelAdapter
from ..record.spec import RunResult, RunSpec
from ..tools.children import (
    Charged,
    answer_of_child,
    answer_payload,
    budget_left,
    carve,
    charged_by_children,
    charges_by_call,
    child_contracts,
    child_run_id,
    children_of,
    family_ids,
    is_child_contract,
    lookup_name,
    parent_of,
)
from ..tools.contracts import CHILD_FIELD
from ..tools.invocation import BudgetLeft, CancelSignal, ToolInvocation, ToolResponse
from .handle import RunHandle

if TYPE_CHECKING:
    from ..store.base import Store
    from .engine import Engine

__all__ = [
    "CHILD_FIELD",
    "Charged",
    "ChildRun",
    "answer_of_child",
    "answer_payload",
    "budget_left",
    "carve",
    "charged_by_children",
    "charges_by_call",
    "child_contracts",
    "child_run_id",
    "children_of",
    "family_ids",
    "is_child_contract",
    "lookup_name",
    "parent_of",
    "summary_of",
]


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
