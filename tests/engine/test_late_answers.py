"""A model that answers past the run's deadline, or after a cancel it did not honour, is not
acted on: the deadline and the cancel are bounds the model cannot talk its way past.

An adapter may swallow the cancellation of its request (and answer later), or block the loop
(a synchronous SDK call inside `generate`), so no timer can cut it short. The runner can only
look at the clock once the answer is back: an answer past the deadline ends the run `abstain`
(deadline) with its tokens counted and no answer taken, and a reply after a cancel ends it
`cancelled` with none of its calls dispatched. Both replay identical and grade clean.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable

import pytest

from runner.base.clock import FakeClock
from runner.core.budget import Limits
from runner.core.states import State
from runner.engine.engine import Engine
from runner.models.base import ModelReply, TokenUsage, ToolCall, ToolChoice, ToolSpec
from runner.models.transcript import Transcript
from runner.proof.grading import grade
from runner.proof.replay import Recording, replay
from runner.record.spec import RunResult, RunSpec
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
    limits=Limits(max_seconds=0.2),
)
"""A model request is real I/O, during which a `FakeClock` keeps real time: short waits."""
USAGE = TokenUsage(input_tokens=40, output_tokens=7)


def _answer(text: str = "All done.") -> ModelReply:
    return ModelReply(text=text, tool_calls=(), usage=USAGE, stop_reason="end_turn")


def _hold() -> ModelReply:
    call = ToolCall(id="c1", name="hold_room", arguments=HOLD_ARGS)
    return ModelReply(text="", tool_calls=(call,), usage=USAGE, stop_reason="tool_use")


class Hotel:
    def __init__(self) -> None:
        self.holds = 0

    def tools(self) -> FunctionTools:
        registry = FunctionTools()
        registry.register("hold_room", self.hold)
        registry.register("lookup_hold", self.lookup)
        return registry

    async def hold(self, invocation: ToolInvocation) -> ToolResponse:
        self.holds += 1
        return ToolResponse(
            payload={"status": "ok", "hold_id": "HOLD-1", "expires_at": "2027-03-02T09:00:00Z"}
        )

    async def lookup(self, invocation: ToolInvocation) -> ToolResponse:
        return ToolResponse(payload={"status": "ok", "found": False})


class Stubborn:
    """Ignores the cancellation of its request and answers `reply` `late` seconds after it."""

    def __init__(self, reply: ModelReply, late: float) -> None:
        self.reply, self.late = reply, late
        self.asked = asyncio.Event()
        self.requests = 0

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        self.requests += 1
        self.asked.set()
        try:
            await asyncio.sleep(1000)
        except asyncio.CancelledError:
            await asyncio.sleep(self.late)
        return self.reply


class Blocking:
    """Answers without ever suspending, `seconds` later on the clock (a synchronous SDK call
    that blocks the loop: no timer can fire while it runs)."""

    def __init__(self, clock: FakeClock, reply: ModelReply, seconds: float) -> None:
        self.clock, self.reply, self.seconds = clock, reply, seconds
        self.requests = 0

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        self.requests += 1
        self.clock.advance(self.seconds)
        return self.reply


def _drive(
    contracts: ContractSet,
    hotel: Hotel,
    clock: FakeClock,
    scenario: Callable[[Engine], Awaitable[RunResult]],
) -> tuple[RunResult, MemoryStore]:
    store = MemoryStore()
    engine = Engine(contracts=contracts, toolbox=hotel.tools(), store=store, clock=clock)
    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        result = runner.run(scenario(engine))
    return result, store


def _proves_it(result: RunResult, store: MemoryStore, contracts: ContractSet) -> None:
    recording = Recording.from_store(store, result.run_id)
    replayed = replay(recording, contracts)
    assert replayed.identical, replayed.divergence
    trial = grade(recording, contracts, None, None)
    assert trial.passed, trial.failed


@pytest.mark.parametrize("reply", [_answer(), _hold()], ids=["answer", "hold"])
@pytest.mark.parametrize("kind", ["swallows_the_timeout", "blocks_the_loop"])
def test_a_reply_past_the_deadline_is_not_acted_on(
    contracts: ContractSet, reply: ModelReply, kind: str
) -> None:
    clock, hotel = FakeClock(), Hotel()
    swallows = kind == "swallows_the_timeout"
    model = Stubborn(reply, late=0.3) if swallows else Blocking(clock, reply, 5)

    async def scenario(engine: Engine) -> RunResult:
        return await engine.run(SPEC, model)

    result, store = _drive(contracts, hotel, clock, scenario)
    assert result.terminal is State.ABSTAIN and result.reason == "deadline"
    assert result.answer is None and hotel.holds == 0
    assert model.requests == 1  # no final request: no time is left for one
    last = result.transitions[-1]
    assert (last.from_state, last.trigger, last.result_class) == (
        "plan",
        "give_up",
        "budget_exhausted",
    )
    # the late reply's tokens were spent: they are counted, on the transition that ends the run
    assert (last.tokens_in, last.tokens_out) == (40, 7)
    assert result.tokens_in == 40 and result.model_steps == 1
    _proves_it(result, store, contracts)


def test_a_final_answer_past_the_deadline_is_not_kept(contracts: ContractSet) -> None:
    """The one tool-free request after a bound is spent gets only the time left: an answer
    that comes after it is not the run's answer."""
    clock, hotel = FakeClock(), Hotel()
    spec = dataclasses.replace(SPEC, limits=Limits(max_seconds=2, max_model_steps=1))
    replies = iter([(_hold(), 0.5), (_answer("too late"), 5.0)])

    class Timed:
        requests = 0

        async def generate(
            self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
        ) -> ModelReply:
            self.requests += 1
            reply, seconds = next(replies)
            clock.advance(seconds)
            return reply

    async def scenario(engine: Engine) -> RunResult:
        return await engine.run(spec, Timed())

    result, store = _drive(contracts, hotel, clock, scenario)
    assert result.terminal is State.ABSTAIN and result.reason == "model_steps"
    assert result.answer is None and hotel.holds == 1
    assert result.transitions[-1].tokens_out == 7
    _proves_it(result, store, contracts)


def test_a_reply_after_an_ignored_cancel_dispatches_nothing(contracts: ContractSet) -> None:
    clock, hotel = FakeClock(), Hotel()
    model = Stubborn(_hold(), late=0.2)
    spec = dataclasses.replace(SPEC, limits=Limits(max_seconds=60))

    async def scenario(engine: Engine) -> RunResult:
        handle = engine.start(spec, model)
        await model.asked.wait()
        await asyncio.sleep(0.05)
        handle.cancel()
        return await handle.result()

    result, store = _drive(contracts, hotel, clock, scenario)
    assert result.terminal is State.ABSTAIN and result.reason == "cancelled"
    assert hotel.holds == 0
    assert [r.trigger for r in result.transitions] == ["give_up"]
    assert store.operations(result.run_id) == []  # not even an intent
    _proves_it(result, store, contracts)
