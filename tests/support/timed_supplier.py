"""A supplier whose search takes time on a clock (rate limited first, when asked) and whose hold
counts its writes, and a model that searches, then holds, then answers."""

from __future__ import annotations

from runner.base.clock import Clock
from runner.models.base import ModelReply, ToolCall, ToolChoice, ToolSpec
from runner.models.transcript import ToolResultMessage, Transcript
from runner.tools.invocation import ToolInvocation, ToolResponse
from runner.tools.toolbox import FunctionTools
from tests.support.hostile_runs import FLIGHTS_OK, HOLD_ARGS, answer, calls
from tests.support.travel import FLIGHT_ARGS

RATE_LIMITED = {"status": "error", "error_code": "rate_limited", "retryable": True}


HELD = {"status": "ok", "hold_id": "HX-1", "expires_at": "2027-03-02T09:00:00Z"}


class SearchThenHold:
    """Searches, then holds a room, then answers: the step it takes depends only on the
    transcript, so a resumed run asks it only for what comes next."""

    def __init__(self) -> None:
        self.requests = 0

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        self.requests += 1
        results = [m for m in transcript.messages if isinstance(m, ToolResultMessage)]
        if tool_choice == "none" or len(results) >= 2:
            return answer("Found NH7 and held HX-1.")
        if not results:
            return calls(ToolCall(id="s1", name="search_flights", arguments=dict(FLIGHT_ARGS)))
        return calls(ToolCall(id="h1", name="hold_room", arguments=dict(HOLD_ARGS)))


class Supplier:
    """A search that takes `latency` seconds on `clock` (rate limited first, with Retry-After,
    when `limited`), and a hold that counts every write it takes."""

    def __init__(self, clock: Clock, *, latency: float, limited: str | None = None) -> None:
        self.clock, self.latency, self.limited = clock, latency, limited
        self.searches = 0
        self.holds = 0

    def tools(self) -> FunctionTools:
        registry = FunctionTools()
        registry.register("search_flights", self.search)
        registry.register("hold_room", self.hold)
        registry.register("lookup_hold", self.lookup)
        return registry

    async def search(self, invocation: ToolInvocation) -> ToolResponse:
        self.searches += 1
        await self.clock.sleep(self.latency)
        if self.limited is not None and self.searches == 1:
            return ToolResponse(payload=RATE_LIMITED, retry_after=self.limited)
        return ToolResponse(payload=FLIGHTS_OK)

    async def hold(self, invocation: ToolInvocation) -> ToolResponse:
        self.holds += 1
        return ToolResponse(payload=HELD)

    async def lookup(self, invocation: ToolInvocation) -> ToolResponse:
        return ToolResponse(payload={"status": "ok", "found": self.holds > 0})
