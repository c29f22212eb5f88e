"""`quick_init`: a class given it keeps its dataclass `__init__`'s meaning (keyword-only
parameters, defaults, frozenness), only built faster (issue 11; kept for `TransitionRecord`
alone, the one class it pays for, issue 31)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any

import pytest

from runner.base._frozen import quick_init
from runner.record.recording import (
    OUTPUT_ADAPTER,
    TURN_ADAPTER,
    RecordedOutput,
    RecordedTurn,
    Responded,
)
from runner.record.trace import TransitionRecord

QUICK: list[type[Any]] = [TransitionRecord]


@pytest.mark.parametrize("kind", QUICK, ids=lambda kind: kind.__name__)
def test_the_quick_init_takes_what_the_dataclass_declares(kind: type[Any]) -> None:
    fields = dataclasses.fields(kind)
    parameters = list(inspect.signature(kind).parameters.values())
    assert [p.name for p in parameters] == [f.name for f in fields]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)
    assert list(typing.get_type_hints(kind.__init__)) == [*(f.name for f in fields), "return"]
    for parameter, field in zip(parameters, fields, strict=True):
        default = inspect.Parameter.empty if field.default is dataclasses.MISSING else field.default
        assert parameter.default == default
    required = {f.name: object() for f in fields if f.default is dataclasses.MISSING}
    value = kind(**required)
    for field in fields:
        assert getattr(value, field.name) is required.get(field.name, field.default)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, fields[0].name, None)
    if required:
        with pytest.raises(TypeError):
            kind(**dict(list(required.items())[1:]))
        with pytest.raises(TypeError):
            kind(*required.values())
    assert value == kind(**required)
    assert dataclasses.replace(value) == value


def _refused() -> tuple[type[Any], ...]:
    """Dataclasses `quick_init` does not take: mutable, with a default factory, with positional
    fields, with a base class's layout."""

    @dataclasses.dataclass(slots=True, kw_only=True)
    class Mutable:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Factory:
        xs: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Positional:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Derived(TransitionRecord):
        extra: int = 0

    return Mutable, Factory, Positional, Derived


def test_only_frozen_slotted_keyword_only_dataclasses_get_one() -> None:
    for kind in _refused():
        with pytest.raises(TypeError):
            quick_init(kind)


def test_a_dataclass_without_fields() -> None:
    @quick_init
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Empty:
        pass

    assert Empty() == Empty()


# The records and messages of the plan half, built from real values.
TURN: dict[str, Any] = {
    "run_id": "r1", "ordinal": 1, "tool_choice": "auto", "text": "", "tool_calls": [],
    "input_tokens": 1, "output_tokens": 2, "stop_reason": "end_turn", "started_at": 0.5,
    "ended_at": 0.75, "transcript_digest": "d",
}  # fmt: skip
OUTPUT: dict[str, Any] = {
    "run_id": "r1", "ordinal": 1, "call_id": "c1", "tool": "t", "operation_key": None,
    "outcome": Responded(payload=[1]), "started_at": 0.5, "ended_at": 0.75,
}  # fmt: skip


def test_records_read_back_equal() -> None:
    turn, output = RecordedTurn(**TURN), RecordedOutput(**OUTPUT)
    assert TURN_ADAPTER.validate_json(TURN_ADAPTER.dump_json(turn)) == turn
    assert OUTPUT_ADAPTER.validate_json(OUTPUT_ADAPTER.dump_json(output)) == output


def test_many_fields_are_built_through_a_twin_and_a_subclass_keeps_its_own() -> None:
    fields = {f"f{i}": i for i in range(14)}
    many = quick_init(
        dataclasses.make_dataclass(
            "Many", list(fields), frozen=True, slots=True, kw_only=True, namespace={}
        )
    )
    value = many(**fields)
    assert type(value) is many
    assert dataclasses.asdict(value) == fields
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.f0 = 1

    class Sub(many):  # type: ignore[misc,valid-type]  # another layout (it has a __dict__)
        pass

    sub = Sub(**fields)
    assert type(sub) is Sub
    assert dataclasses.asdict(sub) == fields
