"""`json_value`: plain JSON passes through as itself; anything else is copied plain or refused.

A tool that answers every call with one shared dict must cost one dict, not one copy per call
(1,000 concurrent benchmark runs went from 108 MB to 217 MB when every payload was copied).
"""

from __future__ import annotations

import enum
import math
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.base._jsonsafe import MAX_DEPTH, NotJson, json_value
from runner.record.recording import Responded
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.tools.invocation import ToolResponse
from tests.support.hostile_runs import (
    FLIGHTS_OK,
    OneOutcome,
    ReplyList,
    answer,
    engine,
    search,
    spec,
)
from tests.support.travel import FLIGHT_ARGS

PLAIN: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text().filter(lambda s: s == s.encode("utf-8", "replace").decode("utf-8")),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text().filter(lambda s: s == s.encode("utf-8", "replace").decode("utf-8")),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=200)
@given(PLAIN)
def test_plain_json_comes_back_as_itself(value: Any) -> None:
    assert json_value(value) is value


def test_a_value_that_must_change_is_copied_and_the_original_left_alone() -> None:
    original = {"options": ({"id": "NH7", "name": "bad \ud800"},), "n": 1}
    plain = json_value(original)
    assert plain == {"options": [{"id": "NH7", "name": "bad \ufffd"}], "n": 1}
    assert original["options"] == ({"id": "NH7", "name": "bad \ud800"},)


@pytest.mark.parametrize(
    "value", [{"x": math.nan}, {"x": {1, 2}}, {1: "a"}, [2**64], {"x": b"\xff"}]
)
def test_what_is_not_json_is_still_refused(value: object) -> None:
    with pytest.raises(NotJson):
        json_value(value)


def test_a_shared_tool_payload_is_recorded_without_a_copy(contracts: ContractSet) -> None:
    """The recorded output holds the payload the tool returned, not a copy of it."""
    store, shared = MemoryStore(), ToolResponse(payload=FLIGHTS_OK)
    again = search("c2", **{**FLIGHT_ARGS, "max_results": 3})
    result = engine(contracts, OneOutcome(shared), store).run_sync(
        spec(), ReplyList([search(), again, answer("none")])
    )
    outcomes = [o.outcome for o in store.outputs(result.run_id)]
    assert len(outcomes) == 2
    assert all(isinstance(o, Responded) and o.payload is FLIGHTS_OK for o in outcomes)


class Colour(enum.Enum):
    RED = "red"


@pytest.mark.parametrize("value", [{"x": Colour.RED}, {"x": uuid.UUID(int=7)}, {"x": math.inf}])
def test_a_flat_object_holding_what_json_cannot_is_refused(value: object) -> None:
    """Objects of plain leaves skip the round trip (issue 11); these are not plain leaves."""
    with pytest.raises(NotJson):
        json_value(value)


def test_a_flat_object_holding_a_tuple_is_copied() -> None:
    value = {"x": (1, "a"), "y": "b"}
    assert json_value(value) == {"x": [1, "a"], "y": "b"}
    flat = {"x": 1, "y": "b", "z": None, "w": True}
    assert json_value(flat) is flat


def test_a_large_plain_payload_comes_back_as_itself() -> None:
    """Plain is told by the types (no round trip): a hundred records, more brackets than
    MAX_DEPTH, are not copied either."""
    payload = {
        "status": "ok",
        "options": [{"id": f"NH{i}", "price": 900.5 + i, "seats": [1, None]} for i in range(100)],
        "pages": [[i, "x"] for i in range(100)],
    }
    assert json_value(payload) is payload


BAD = [math.nan, -math.inf, Colour.RED, uuid.UUID(int=7), orjson.Fragment(b"1")]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize(
    "where",
    [
        lambda bad: [{"id": "a", "n": 1}, {"id": "b", "n": bad}],  # a list of records
        lambda bad: {"records": [{"id": "a"}], "meta": {"deep": [[bad]]}},
        lambda bad: bad,
    ],
)
def test_what_orjson_writes_as_something_else_is_refused_wherever_it_is(
    bad: object, where: Callable[[object], object]
) -> None:
    with pytest.raises(NotJson):
        json_value(where(bad))


def test_a_tuple_among_records_is_copied_as_a_list() -> None:
    value = [{"id": "a"}, {"id": "b", "tags": ("x",)}]
    assert json_value(value) == [{"id": "a"}, {"id": "b", "tags": ["x"]}]


def test_records_one_level_too_deep_are_refused() -> None:
    """The records of a list at the deepest level allowed are one level too deep."""
    deepest: list[Any] = [{"id": "a"}]
    value: list[Any] = deepest
    for _ in range(MAX_DEPTH - 1):
        value = [value]
    with pytest.raises(NotJson, match="nested deeper"):
        json_value(value)
    assert json_value(value[0]) is value[0]
