"""A hotel whose `hold_room` waits to be released, models that propose one hold, and an approval
secret: the doubles of the tests that cancel, crash or race a write in flight."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from runner.core.confirm import ApprovalSecret
from runner.models.base import ModelReply, TokenUsage, ToolCall, ToolChoice, ToolSpec
from runner.models.transcript import ToolResultMessage, Transcript
from runner.record.spec import RunSpec
from runner.tools.invocation import Principal, ToolInvocation, ToolResponse
from runner.tools.toolbox import FunctionTools
from tests.support.travel import HOLD_ARGS

HELD = {"status": "ok", "hold_id": "HOLD-1", "expires_at": "2027-03-02T09:00:00Z"}


SPEC = RunSpec(
    task="Hold an accessible room.",
    tenant="acme",
    principal=Principal(id="svc", scopes=frozenset({"travel.book"})),
    tools=("hold_room", "lookup_hold"),
    seed=3,
)


def reply(*calls: ToolCall, text: str = "") -> ModelReply:
    return ModelReply(
        text=text,
        tool_calls=calls,
        usage=TokenUsage(input_tokens=10, output_tokens=5),
        stop_reason="tool_use" if calls else "end_turn",
    )


class HoldThenAnswer:
    """Proposes one hold, then answers; counts its requests. `hang`: its next request never
    comes back instead (the process is cut there; `asked_again` is set)."""

    def __init__(self, *, hang: bool = False) -> None:
        self.requests = 0
        self.hang = hang
        self.asked_again = asyncio.Event()

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        self.requests += 1
        if self.requests == 1:
            return reply(ToolCall(id="c1", name="hold_room", arguments=HOLD_ARGS))
        if self.hang:
            self.asked_again.set()
            await asyncio.Event().wait()
        return reply(text="Held HOLD-1.")


class SlowHotel:
    """`hold_room` commits, then waits to be released before it answers (or loses the answer)."""

    def __init__(self, *, lose_response: bool = False) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.holds: dict[str, str] = {}
        self.lose_response = lose_response
        self.lookups = 0

    def tools(self) -> FunctionTools:
        registry = FunctionTools()
        registry.register("hold_room", self.hold)
        registry.register("lookup_hold", self.lookup)
        return registry

    async def hold(self, invocation: ToolInvocation) -> ToolResponse:
        assert invocation.operation_key is not None
        self.holds[invocation.operation_key] = "HOLD-1"
        self.entered.set()
        await self.release.wait()
        if self.lose_response:
            raise ConnectionResetError("the response was lost")
        return ToolResponse(payload=HELD)

    async def lookup(self, invocation: ToolInvocation) -> ToolResponse:
        self.lookups += 1
        hold = self.holds.get(invocation.operation_key or "")
        payload: dict[str, Any] = {"status": "ok", "found": hold is not None}
        return ToolResponse(payload=payload | ({"hold_id": hold} if hold else {}))


class HoldOnce:
    """Proposes one hold until the transcript holds a tool result, then answers (so a resumed
    run, whose first turn is replayed, asks it only for what comes next)."""

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        answered = any(isinstance(m, ToolResultMessage) for m in transcript.messages)
        calls = () if answered else (ToolCall(id="c1", name="hold_room", arguments=HOLD_ARGS),)
        return ModelReply(
            text="Held HOLD-1." if answered else "",
            tool_calls=calls,
            usage=TokenUsage(input_tokens=10, output_tokens=5),
            stop_reason="end_turn" if answered else "tool_use",
        )


SECRET = ApprovalSecret("a test secret of at least 16 bytes")


NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
