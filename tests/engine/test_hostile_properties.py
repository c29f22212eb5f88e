"""Property tests: arbitrary tool payloads and model replies never crash a run (issue 9, item 7).

Whatever hypothesis makes a tool return or raise, or a model reply with (text, tool calls, their
ids, names and arguments, usage), `Engine.run` returns; the run ends in one declared terminal
state with one terminal record; and the store (SQLite on a temporary file, and memory) reads back
every row of it: header, transitions, turns, outputs, summary. Example counts are below
(`EXAMPLES`); each run is also replayed from the store. The module takes ~10-25 s.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runner.models.base import ModelReply, TokenUsage, ToolCall
from runner.store import MemoryStore, SqliteStore
from runner.store.base import Store
from runner.tools.contracts import ContractSet
from runner.tools.invocation import ToolResponse
from runner.travel import load_travel_contracts
from tests.support.hostile_runs import (
    FLIGHTS_OK,
    HOLD_ARGS,
    OneOutcome,
    ReplyList,
    answer,
    assert_declared,
    assert_replays,
    engine,
    hold,
    search,
    spec,
)
from tests.support.travel import FLIGHT_ARGS

pytestmark = pytest.mark.slow

EXAMPLES = 250
"""Examples per property (4 properties: about 1,000 runs in all)."""

CONTRACTS: ContractSet = load_travel_contracts()

# Text: anything Python's str holds, lone surrogates and control characters included.
surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
texts = st.one_of(
    st.text(max_size=20),
    st.text(st.characters(codec=None, categories=None), max_size=20),
    st.builds(lambda head, odd: head + odd, st.text(max_size=8), surrogates),
)


class Opaque:
    def __repr__(self) -> str:
        return "Opaque()"


class Boom(BaseException):
    pass


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63, max_value=2**80) | st.integers(max_value=-(2**63) - 1),
    st.floats(),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    texts,
    st.binary(max_size=4),
    st.builds(Opaque),
)

# Hashable keys of any kind: strings (some lone surrogates), ints, None, tuples.
keys = st.one_of(texts, texts, st.integers(), st.none(), st.tuples(st.integers()))

values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner),
        st.frozensets(st.integers(), max_size=3),
        st.dictionaries(keys, inner, max_size=4),
    ),
    max_leaves=12,
)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


# Near-valid payloads (so the classifier's deeper paths run) beside anything at all.
payloads = st.one_of(
    values,
    st.builds(lambda extra: {**FLIGHTS_OK, **extra}, st.dictionaries(texts, values, max_size=2)),
    st.builds(
        lambda opts: {**FLIGHTS_OK, "options": opts},
        st.lists(st.dictionaries(st.sampled_from(["flight_id", "assistance_status"]), values)),
    ),
    st.builds(
        lambda code, message: {
            "status": "error",
            "error_code": code,
            "retryable": True,
            "message": message,
        },
        st.sampled_from(["rate_limited", "service_unavailable", "access_denied", "x"]),
        texts,
    ),
    st.integers(min_value=60, max_value=400).map(nested),
)

exceptions = st.one_of(
    st.builds(ValueError, texts),
    st.builds(TimeoutError, texts),
    st.builds(ConnectionError, texts),
    st.builds(RecursionError),
    st.builds(SystemExit, st.integers()),
    st.builds(KeyboardInterrupt),
    st.builds(GeneratorExit),
    st.builds(Boom, texts),
)

outcomes = st.one_of(
    st.builds(ToolResponse, payload=payloads, retry_after=st.none() | texts | st.integers()),
    payloads,  # not wrapped in a ToolResponse at all
    exceptions,
)


# A real SQLite file; in memory-backed /dev/shm where there is one, so fsyncs cost nothing.
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None


def drive(kind: str, toolbox: Any, replies: list[object]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="runner-prop-", dir=SCRATCH))
    store: Store = MemoryStore() if kind == "memory" else SqliteStore(folder / "runs.sqlite")
    try:
        result = engine(CONTRACTS, toolbox, store).run_sync(spec(), ReplyList(replies))
        assert_declared(store, result)
        assert_replays(store, CONTRACTS, result.run_id)  # what was stored re-drives the run
        event(f"ends {result.terminal.value}: {result.reason.split(':')[0]}")  # for the statistics
        for record in result.transitions:
            if record.result_class is not None:
                event(f"class {record.result_class}")
    finally:
        store.close()
        shutil.rmtree(folder)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outcome=outcomes, kind=st.sampled_from(["memory", "sqlite"]))
def test_any_read_outcome_ends_the_run_declared(outcome: object, kind: str) -> None:
    drive(kind, OneOutcome(outcome), [search(), answer("done")])


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outcome=outcomes, kind=st.sampled_from(["memory", "sqlite"]))
def test_any_write_outcome_ends_the_run_declared(outcome: object, kind: str) -> None:
    drive(kind, OneOutcome(outcome), [hold(), search(), answer("done")])


arguments = st.one_of(
    st.just(FLIGHT_ARGS),
    st.just(HOLD_ARGS),
    st.dictionaries(keys, values, max_size=4),
    st.builds(lambda extra: {**FLIGHT_ARGS, **extra}, st.dictionaries(texts, values, max_size=1)),
    st.builds(lambda v: {**FLIGHT_ARGS, "origin": v}, values),
    st.builds(lambda v: {**HOLD_ARGS, "guests": v}, values),
    values,  # not even a dict
)

tool_calls = st.builds(
    ToolCall,
    id=st.sampled_from(["c1", "c2"]) | texts,
    name=st.one_of(
        st.sampled_from(["search_flights", "hold_room"]),
        st.sampled_from(["search_flights", "hold_room", "lookup_hold", "nope"]),
        texts,
    ),
    arguments=arguments,
    arguments_error=st.none() | st.none() | texts,
)

# A call the tool is dispatched for (so the outcome strategies are reached), beside anything.
proper_calls = st.builds(
    lambda call_id, pair: ToolCall(id=call_id, name=pair[0], arguments=dict(pair[1])),
    st.sampled_from(["c1", "c2", "c3"]),
    st.sampled_from([("search_flights", FLIGHT_ARGS), ("hold_room", HOLD_ARGS)]),
)
some_calls = st.one_of(proper_calls, proper_calls, tool_calls)

hostile_counts = st.integers() | st.floats() | st.none() | st.integers(min_value=2**64)
counts = st.integers(min_value=0, max_value=10_000)

# Well-formed replies whose text and calls are anything a provider might send...
well_formed = st.builds(
    ModelReply,
    text=texts,
    tool_calls=st.lists(some_calls, max_size=3).map(tuple),
    usage=st.builds(TokenUsage, input_tokens=counts, output_tokens=counts),
    stop_reason=st.sampled_from(["tool_use", "end_turn", "refusal", "max_tokens"]) | texts,
)
calling = st.builds(
    ModelReply,
    text=texts,
    tool_calls=st.lists(some_calls, min_size=1, max_size=3).map(tuple),
    usage=st.just(TokenUsage(input_tokens=5, output_tokens=5)),
    stop_reason=st.just("tool_use"),
)
# ...and, about one reply in five, one of the wrong shape, not a reply at all, or an exception.
misshapen = st.one_of(
    st.builds(
        ModelReply,
        text=texts | st.none() | values,
        tool_calls=st.lists(tool_calls | values, max_size=2).map(tuple) | values,
        usage=st.builds(TokenUsage, input_tokens=hostile_counts, output_tokens=counts) | values,
        stop_reason=texts | values,
    ),
    values,
    exceptions,
)
replies = st.one_of(well_formed, calling, well_formed, calling, misshapen)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(replies, min_size=1, max_size=3), kind=st.sampled_from(["memory", "sqlite"]))
def test_any_model_replies_end_the_run_declared(script: list[object], kind: str) -> None:
    toolbox = OneOutcome(ToolResponse(payload=FLIGHTS_OK))
    drive(kind, toolbox, script)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=calling,
    then=st.lists(replies, max_size=2),
    outcome=outcomes,
    kind=st.sampled_from(["memory", "sqlite"]),
)
def test_any_replies_and_outcomes_together(
    first: ModelReply, then: list[object], outcome: object, kind: str
) -> None:
    """The model calls tools (with any arguments) that answer anything, then says anything."""
    drive(kind, OneOutcome(outcome), [first, *then])


def test_the_strategies_reach_the_hostile_cases() -> None:
    """The properties above are only as strong as what they generate: check it reaches each case."""
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, database=None)
    @given(values)
    def sample(value: Any) -> None:
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, str) and any("\ud800" <= ch <= "\udfff" for ch in item):
                seen.add("surrogate")
            elif isinstance(item, float) and not math.isfinite(item):
                seen.add("nan/inf")
            elif type(item) is int and not -(2**63) <= item < 2**64:
                seen.add("big int")
            elif isinstance(item, bytes | Opaque | frozenset):
                seen.add(type(item).__name__)
            elif isinstance(item, dict):
                if any(not isinstance(k, str) for k in item):
                    seen.add("non-string key")
                stack.extend(item.values())
            elif isinstance(item, list | tuple):
                stack.extend(item)

    sample()
    assert seen >= {"surrogate", "nan/inf", "big int", "bytes", "Opaque", "non-string key"}
