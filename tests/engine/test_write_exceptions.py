"""A write that raises does not say whether it happened: its outcome is unknown and the lookup by
key settles it. It was `permanent (tool_error)`, its key marked failed and no lookup made, while
the supplier held the booking it had committed before raising: the record said no write."""

from __future__ import annotations

import asyncio

from runner.base.clock import FakeClock
from runner.core.states import State
from runner.engine.engine import Engine
from runner.models.base import ModelReply, TokenUsage, ToolCall, ToolChoice, ToolSpec
from runner.models.transcript import Transcript
from runner.proof.grading import grade
from runner.proof.replay import Recording, replay
from runner.record.operations import OperationStatus
from runner.record.spec import RunSpec
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.tools.invocation import Principal, ToolInvocation, ToolResponse
from runner.tools.toolbox import FunctionTools
from tests.support.travel import HOLD_ARGS

SPEC = RunSpec(
    task="Hold an accessible room.",
    tenant="acme",
    principal=Principal(id="svc", scopes=frozenset({"travel.book"})),
    tools=("hold_room", "lookup_hold"),
)
USAGE = TokenUsage(input_tokens=10, output_tokens=5)


class HoldThenAnswer:
    def __init__(self) -> None:
        self.requests = 0

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        self.requests += 1
        if self.requests == 1:
            call = ToolCall(id="c1", name="hold_room", arguments=HOLD_ARGS)
            return ModelReply(text="", tool_calls=(call,), usage=USAGE, stop_reason="tool_use")
        return ModelReply(text="Held.", tool_calls=(), usage=USAGE, stop_reason="end_turn")


class BuggyHotel:
    """Commits the hold, then raises (a bug after the commit: a response built from a field
    that is not there)."""

    def __init__(self) -> None:
        self.holds: dict[str, str] = {}
        self.lookups = 0

    def tools(self) -> FunctionTools:
        registry = FunctionTools()
        registry.register("hold_room", self.hold)
        registry.register("lookup_hold", self.lookup)
        return registry

    async def hold(self, invocation: ToolInvocation) -> ToolResponse:
        assert invocation.operation_key is not None
        self.holds[invocation.operation_key] = "HOLD-1"
        raise KeyError("confirmation_number")

    async def lookup(self, invocation: ToolInvocation) -> ToolResponse:
        self.lookups += 1
        hold = self.holds.get(invocation.operation_key or "")
        found = {"status": "ok", "found": True, "hold_id": hold}
        return ToolResponse(payload=found if hold else {"status": "ok", "found": False})


def test_a_write_that_raises_after_committing_is_looked_up_not_marked_failed(
    contracts: ContractSet,
) -> None:
    clock, store, hotel = FakeClock(), MemoryStore(), BuggyHotel()
    engine = Engine(contracts=contracts, toolbox=hotel.tools(), store=store, clock=clock)
    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        result = runner.run(engine.run(SPEC, HoldThenAnswer()))
    assert result.terminal is State.COMPLETE
    assert len(hotel.holds) == 1 and hotel.lookups == 1
    classes = [r.result_class for r in result.transitions if r.trigger == "classify"]
    assert classes == ["unknown_outcome", "ok"]
    [operation] = store.operations(result.run_id)
    assert operation.status is OperationStatus.COMMITTED
    recording = Recording.from_store(store, result.run_id)
    replayed = replay(recording, contracts)
    assert replayed.identical, replayed.divergence
    trial = grade(recording, contracts, None, None)
    assert trial.passed, trial.failed
