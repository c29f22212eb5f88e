"""The simulated world a fixture scripts: each tool's outcomes, consumed in call order.

Plain tools play their scripted outcomes. `hold_room` and `lookup_hold` are backed by the supplier
database (`supplier.py`): a hold is really stored (or not) as the script says, and the lookup tells
the truth about it unless the script says otherwise.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from ..base.clock import Clock
from ..harness.fixtures import ToolOutcome
from ..tools.invocation import ToolImplementation, ToolInvocation, ToolResponse
from .supplier import PayloadMismatch, SupplierDatabase


class ScriptExhausted(RuntimeError):
    """The fixture scripted fewer outcomes than the run made calls."""


def _error(code: str, message: str) -> ToolResponse:
    return ToolResponse(
        payload={"status": "error", "error_code": code, "retryable": False, "message": message}
    )


async def _no_answer(clock: Clock, invocation: ToolInvocation, name: str) -> ToolResponse:
    """Outlast the call's timeout; the engine's timeout ends the wait."""
    await clock.sleep(invocation.timeout_s + 1.0)
    raise TimeoutError(f"{name} did not answer")


async def _play(
    clock: Clock, name: str, outcome: ToolOutcome, invocation: ToolInvocation
) -> ToolResponse:
    if outcome.timeout:
        return await _no_answer(clock, invocation, name)
    if outcome.fail == "connection":
        raise ConnectionResetError(f"{name}: connection reset by peer")
    if outcome.fail == "crash":
        raise RuntimeError(f"{name} crashed")
    return ToolResponse(payload=copy.deepcopy(outcome.respond), retry_after=outcome.retry_after)


class ScriptedTool:
    """A read tool that plays its script; `skip` outcomes were consumed before a resume."""

    def __init__(
        self, name: str, outcomes: Sequence[ToolOutcome], clock: Clock, skip: int = 0
    ) -> None:
        self.name = name
        self._outcomes = list(outcomes)
        self._next = skip
        self._clock = clock
        self.invocations: list[ToolInvocation] = []

    async def __call__(self, invocation: ToolInvocation) -> ToolResponse:
        self.invocations.append(invocation)
        if self._next >= len(self._outcomes):
            raise ScriptExhausted(f"no scripted outcome left for {self.name} call {self._next + 1}")
        outcome = self._outcomes[self._next]
        self._next += 1
        if outcome.latency_s:
            await self._clock.sleep(outcome.latency_s)
        return await _play(self._clock, self.name, outcome, invocation)

    def answered_from_record(self, invocation: ToolInvocation) -> None:
        """A resumed run was served this dispatch's recorded outcome: the script's outcome it
        played before the crash is not played again (told in dispatch order, as calls come)."""
        self._next += 1


class HoldRoom:
    """`hold_room` against the supplier database.

    Call n plays the script's n-th outcome; past the script's end the last one repeats, and with no
    script at all every call commits and responds.
    """

    name = "hold_room"

    def __init__(
        self, outcomes: Sequence[ToolOutcome], clock: Clock, supplier: SupplierDatabase
    ) -> None:
        self._outcomes = list(outcomes)
        self._clock = clock
        self._supplier = supplier
        self.invocations: list[ToolInvocation] = []

    async def __call__(self, invocation: ToolInvocation) -> ToolResponse:
        self.invocations.append(invocation)
        number = self._supplier.receive(self.name)  # durable: a resumed run continues the script
        # Past the script, the supplier keeps behaving as it last did (a denial stays a denial).
        outcome = self._outcomes[min(number, len(self._outcomes)) - 1] if self._outcomes else None
        if outcome is not None and outcome.latency_s:
            await self._clock.sleep(outcome.latency_s)
        action = outcome.write if outcome is not None else "commit"
        if action is None:
            assert outcome is not None
            return await _play(self._clock, self.name, outcome, invocation)
        if action == "fail_before_commit":
            return await _no_answer(self._clock, invocation, self.name)
        if invocation.operation_key is None:
            return _error("invalid_arguments", "an idempotency key is required")
        payload: dict[str, Any] = {"tenant": invocation.tenant, **invocation.arguments}
        try:
            hold = self._supplier.hold(
                invocation.operation_key, invocation.tenant, payload, self._clock.now()
            )
        except PayloadMismatch:
            return _error("idempotency_mismatch", "this key was used with another payload")
        if action == "commit_then_lose_response":
            return await _no_answer(self._clock, invocation, self.name)
        return ToolResponse(
            payload={
                "status": "ok",
                "hold_id": hold.hold_id,
                "expires_at": hold.expires_at.isoformat(),
            }
        )


class LookupHold:
    """`lookup_hold` by operation key: the script's answers first, then the supplier's truth."""

    name = "lookup_hold"

    def __init__(
        self,
        outcomes: Sequence[ToolOutcome],
        clock: Clock,
        supplier: SupplierDatabase,
        skip: int = 0,
    ) -> None:
        self._outcomes = list(outcomes)
        self._next = skip
        self._clock = clock
        self._supplier = supplier
        self.invocations: list[ToolInvocation] = []

    async def __call__(self, invocation: ToolInvocation) -> ToolResponse:
        self.invocations.append(invocation)
        if self._next < len(self._outcomes):
            outcome = self._outcomes[self._next]
            self._next += 1
            if outcome.latency_s:
                await self._clock.sleep(outcome.latency_s)
            return await _play(self._clock, self.name, outcome, invocation)
        hold_id = self._supplier.find(invocation.operation_key or "")
        if hold_id is None:
            return ToolResponse(payload={"status": "ok", "found": False})
        return ToolResponse(payload={"status": "ok", "found": True, "hold_id": hold_id})

    def answered_from_record(self, invocation: ToolInvocation) -> None:
        """As `ScriptedTool.answered_from_record`: a scripted answer played before the crash."""
        self._next += 1


class ScriptedEnvironment:
    """A `ToolBox` whose tools play a fixture's script. Build a fresh one per run.

    `consumed` counts outcomes already played per tool; a resumed run instead tells each
    scripted tool of every dispatch it serves from the record (`answered_from_record`), in
    dispatch order, so a call that was still running at the crash replays its own outcome even
    when a later call of its batch had answered and was recorded first. The supplier's tools keep
    their own count in the supplier database.
    """

    def __init__(
        self,
        script: Mapping[str, Sequence[ToolOutcome]],
        tools: Sequence[str],
        clock: Clock,
        supplier: SupplierDatabase | None = None,
        consumed: Mapping[str, int] | None = None,
    ) -> None:
        consumed = consumed or {}
        self.supplier = supplier
        self.tools: dict[str, Any] = {}
        names = list(tools)
        if supplier is not None and LookupHold.name not in names:
            names.append(LookupHold.name)  # the runner's own reconciliation lookup
        for name in names:
            outcomes = script.get(name, ())
            if name == HoldRoom.name and supplier is not None:
                self.tools[name] = HoldRoom(outcomes, clock, supplier)
            elif name == LookupHold.name and supplier is not None:
                self.tools[name] = LookupHold(outcomes, clock, supplier, consumed.get(name, 0))
            else:
                self.tools[name] = ScriptedTool(name, outcomes, clock, consumed.get(name, 0))

    def implementation(self, tool: str) -> ToolImplementation | None:
        found: ToolImplementation | None = self.tools.get(tool)
        return found
