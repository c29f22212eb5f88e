"""A row's JSON: the dataclasses inside it are written by generated code (`_rows._nested`), byte
for byte as orjson writes them itself; what orjson refuses is refused alike."""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.core import observations
from runner.core.machine import Trigger
from runner.core.states import State
from runner.record import recording
from runner.record.recording import RecordedOutput, Responded
from runner.record.trace import RECORD_ADAPTER, TransitionRecord
from runner.store._rows import _nested, _row_json

NESTED = [
    kind
    for module in (observations, recording)
    for _, kind in inspect.getmembers(module, inspect.isclass)
    if dataclasses.is_dataclass(kind) and kind.__module__ == module.__name__
]

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(),
)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


def _dumped(value: Any) -> bytes | type[Exception]:
    try:
        return orjson.dumps(value, default=_nested, option=orjson.OPT_PASSTHROUGH_DATACLASS)
    except TypeError:
        return TypeError


def _orjsons(value: Any) -> bytes | type[Exception]:
    try:
        return orjson.dumps(value)
    except TypeError:
        return TypeError


@dataclasses.dataclass(frozen=True, slots=True)
class _Private:
    shown: int
    _hidden: int = 2
    inner: Any = None


@given(st.data())
def test_a_nested_dataclass_is_written_as_orjson_writes_it(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from([*NESTED, _Private]))
    fields = {field.name: data.draw(values) for field in dataclasses.fields(kind) if field.init}
    value = kind(**fields)
    assert _dumped({"row": value, "list": [value]}) == _orjsons({"row": value, "list": [value]})


def test_nested_ones_private_fields_and_refusals_match_orjson() -> None:
    inner = observations.ToolSucceeded(call_id="c1", tool="t", result={"a": [1, None]})
    for value in (
        _Private(1, inner=inner),
        _Private(1, inner=_Private(2, inner=[inner, None])),
        _Private(1, inner=object()),  # refused by both
        _Private(1, inner=2**70),  # refused by both
        _Private(1, inner="\ud800"),  # a lone surrogate: refused by both
        {"a class, not an instance": _Private},
    ):
        assert _dumped(value) == _orjsons(value)
    assert _dumped(_Private(1)) == b'{"shown":1,"inner":null}'


def test_a_row_with_what_orjson_refuses_still_goes_through_pydantic() -> None:
    record = TransitionRecord(
        run_id="r1",
        seq=1,
        time=datetime(2027, 3, 1, tzinfo=UTC),
        from_state=State.CALL,
        to_state=State.OBSERVE,
        trigger=Trigger.CLASSIFY,
        attempt=1,
        observation=observations.ToolSucceeded(call_id="c1", tool="t", result={"a": "\ud800"}),
    )
    assert RECORD_ADAPTER.validate_json(_row_json(record, RECORD_ADAPTER)).observation == (
        observations.ToolSucceeded(call_id="c1", tool="t", result={"a": "\ufffd"})
    )


@pytest.mark.parametrize("payload", [{"ok": True}, {"n": [1, 2.5, None, {"x": "y"}]}])
def test_an_output_row_is_the_same_text_as_before(payload: dict[str, Any]) -> None:
    output = RecordedOutput(
        run_id="r1",
        ordinal=1,
        call_id="c1",
        tool="t",
        operation_key=None,
        outcome=Responded(payload=payload),
        started_at=0.5,
        ended_at=0.75,
    )
    before = orjson.dumps(dataclasses.asdict(output)).decode()
    assert _row_json(output, None) == before
