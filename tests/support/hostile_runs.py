"""Doubles for driving the engine with whatever a tool or a model may send.

A `ReplyList` model plays given replies (then answers), a `OneOutcome` toolbox gives every tool the
same outcome (a value to return, or an exception to raise), and `assert_declared` checks what every
run must come to: one declared terminal state, one stored summary, every row readable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from runner.base.clock import FakeClock
from runner.core.states import TERMINAL
from runner.engine.engine import Engine
from runner.models.base import ModelReply, TokenUsage, ToolCall, ToolChoice, ToolSpec
from runner.models.transcript import Transcript
from runner.proof.grading import grade
from runner.proof.replay import Recording, replay
from runner.proof.report import RunView, context_table, run_json, run_text
from runner.record.spec import RunResult, RunSpec
from runner.store.base import RunListing, Store
from runner.tools.contracts import ContractSet
from runner.tools.invocation import Principal, ToolImplementation, ToolInvocation, ToolResponse
from tests.support.travel import FLIGHT_ARGS

START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
HOLD_ARGS: dict[str, Any] = {
    "hotel_id": "H1",
    "check_in": "2027-04-01",
    "check_out": "2027-04-03",
    "guests": 2,
    "room_type": "accessible",
}
FLIGHTS_OK: dict[str, Any] = {
    "status": "ok",
    "options": [{"flight_id": "NH7", "assistance_status": "unknown"}],
    "source_timestamp": "2027-03-01T09:00:00Z",
}


def usage() -> TokenUsage:
    return TokenUsage(input_tokens=10, output_tokens=5)


def calls(*tool_calls: ToolCall, text: str = "") -> ModelReply:
    return ModelReply(
        text=text, tool_calls=tuple(tool_calls), usage=usage(), stop_reason="tool_use"
    )


def answer(text: str) -> ModelReply:
    return ModelReply(text=text, tool_calls=(), usage=usage(), stop_reason="end_turn")


def search(call_id: str = "c1", **arguments: Any) -> ModelReply:
    return calls(ToolCall(id=call_id, name="search_flights", arguments=arguments or FLIGHT_ARGS))


def hold(call_id: str = "h1") -> ModelReply:
    return calls(ToolCall(id=call_id, name="hold_room", arguments=dict(HOLD_ARGS)))


class ReplyList:
    """A model that plays `replies` (anything at all, as an adapter might return) in order, then
    answers; with tools disabled it answers at once."""

    def __init__(self, replies: Sequence[object]) -> None:
        self.replies = list(replies)

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        if tool_choice == "none" or not self.replies:
            return answer("done")
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply  # type: ignore[return-value]  # deliberately anything


class OneOutcome:
    """Every tool returns `outcome` (raises it, if it is an exception); lookups find nothing."""

    def __init__(self, outcome: object) -> None:
        self.outcome = outcome
        self.invocations: list[ToolInvocation] = []

    def implementation(self, tool: str) -> ToolImplementation | None:
        async def respond(invocation: ToolInvocation) -> ToolResponse:
            self.invocations.append(invocation)
            if tool == "lookup_hold":
                return ToolResponse(payload={"status": "ok", "found": False})
            if isinstance(self.outcome, BaseException):
                raise self.outcome
            return self.outcome  # type: ignore[return-value]  # deliberately anything

        return respond


def engine(contracts: ContractSet, toolbox: Any, store: Store) -> Engine:
    return Engine(
        contracts=contracts,
        toolbox=toolbox,
        store=store,
        clock=FakeClock(START),
    )


def spec(**changes: Any) -> RunSpec:
    data: dict[str, Any] = {
        "task": "Find a flight and hold a room.",
        "tenant": "optiverse",
        "principal": Principal(id="agent-7", scopes=frozenset({"travel.read", "travel.book"})),
        "tools": ("search_flights", "hold_room", "lookup_hold"),
        "seed": 0,  # the engine's rng is Random(0): a replay re-seeds from the header
    }
    data.update(changes)
    return RunSpec(**data)


def assert_declared(store: Store, result: RunResult) -> None:
    """One declared terminal state, its one summary, and every row of the run read back."""
    assert result.terminal in TERMINAL
    run_id = result.run_id
    header, summary = store.header(run_id), store.summary(run_id)
    assert header is not None and summary is not None
    assert summary.terminal == result.terminal.value
    transitions = store.transitions(run_id)
    assert [record.seq for record in transitions] == list(range(1, len(transitions) + 1))
    assert transitions[-1].to_state == result.terminal.value
    assert sum(record.to_state in {s.value for s in TERMINAL} for record in transitions) == 1
    store.turns(run_id)
    store.outputs(run_id)
    store.operations(run_id)
    listed = [item for item in store.runs() if isinstance(item, RunListing)]
    assert run_id in {item.header.run_id for item in listed}
    view = RunView.of_stored(header, summary, transitions)  # what `runner show` prints
    assert run_text(view, header.name).encode() and context_table(view).encode()
    assert json.dumps(run_json(view, None), sort_keys=True).encode()


def assert_replays(store: Store, contracts: ContractSet, run_id: str) -> None:
    """The stored run re-drives exactly from what was stored, and can be graded."""
    recording = Recording.from_store(store, run_id)
    outcome = replay(recording, contracts)
    assert outcome.divergence is None, outcome.divergence
    assert outcome.identical
    assert grade(recording, contracts, None, None).run_id == run_id
