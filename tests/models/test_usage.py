"""Usage is untrusted whichever adapter reports it: the runner counts only believable integers and
estimates the rest, marking the turn."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.base.clock import FakeClock
from runner.engine.engine import Engine
from runner.models._usage import MAX_REPORTED_TOKENS, checked_usage
from runner.models.base import ModelReply, TokenUsage, ToolChoice, ToolSpec
from runner.models.transcript import SystemMessage, Transcript, UserMessage
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.environment import ScriptedEnvironment
from runner.travel.scenario import spec_for
from tests.support.travel import make_fixture

ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=5,
)


def transcript() -> Transcript:
    built = Transcript()
    built.append(SystemMessage(text="You plan tool calls."))
    built.append(UserMessage(text="Find flights SFO to NRT."))
    return built


@settings(max_examples=150, deadline=None)
@given(raw_input=ANY_JSON, raw_output=ANY_JSON)
def test_any_reported_value_becomes_a_countable_usage(raw_input: Any, raw_output: Any) -> None:
    usage = checked_usage(raw_input, raw_output, transcript=transcript(), text="NH7.", calls=())
    for count in (usage.input_tokens, usage.output_tokens):
        assert type(count) is int and 0 <= count < MAX_REPORTED_TOKENS
    believable = all(
        type(raw) is int and 0 < raw < MAX_REPORTED_TOKENS for raw in (raw_input, raw_output)
    )  # 0 is too few to be true: a transcript was sent, and "NH7." came back
    assert usage.estimated is not believable
    if believable:
        assert (usage.input_tokens, usage.output_tokens) == (raw_input, raw_output)


class CarelessModel:
    """An adapter of someone else's that passes the provider's numbers on unchecked."""

    def __init__(self, tokens_in: Any) -> None:
        self.tokens_in = tokens_in

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        usage = TokenUsage(input_tokens=self.tokens_in, output_tokens=2)
        return ModelReply(text="NH7.", tool_calls=(), usage=usage, stop_reason="end_turn")


def test_the_engine_checks_usage_from_any_adapter(contracts: ContractSet) -> None:
    for hostile in (math.nan, -5, "12", 1.5, None):
        clock, store = FakeClock(), MemoryStore()
        fixture = make_fixture()
        environment = ScriptedEnvironment(fixture.environment, fixture.tools, clock, None, {})
        engine = Engine(contracts=contracts, toolbox=environment, store=store, clock=clock)
        result = engine.run_sync(spec_for(fixture, 0), CarelessModel(hostile))
        assert result.terminal.value == "complete"
        assert type(result.tokens_in) is int and result.tokens_in > 0
        assert [turn.usage_estimated for turn in store.turns(result.run_id)] == [True]
