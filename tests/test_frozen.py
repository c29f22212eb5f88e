"""`quick_new`: the value it builds is the one its dataclass builds (keyword-only parameters,
defaults, frozenness), only built faster (issue 11; kept for `TransitionRecord`, issue 31)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from runner.base._frozen import quick_new
from runner.record.recording import (
    OUTPUT_ADAPTER,
    TURN_ADAPTER,
    RecordedOutput,
    RecordedTurn,
    Responded,
)
from runner.record.trace import TransitionRecord


def _refused() -> tuple[type[Any], ...]:
    """Dataclasses `quick_new` does not take: mutable, with a default factory, with positional
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


def test_many_fields_and_a_class_without_fields() -> None:
    fields = {f"f{i}": i for i in range(14)}
    many = dataclasses.make_dataclass(
        "Many", list(fields), frozen=True, slots=True, kw_only=True, namespace={}
    )
    value = quick_new(many)(**fields)
    assert type(value) is many
    assert dataclasses.asdict(value) == fields
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.f0 = 1

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Empty:
        pass

    assert quick_new(Empty)() == Empty()


NEW: list[type[Any]] = [TransitionRecord, RecordedTurn, RecordedOutput, Responded]


@pytest.mark.parametrize("kind", NEW, ids=lambda kind: kind.__name__)
def test_quick_new_builds_what_the_class_builds(kind: type[Any]) -> None:
    """`quick_new(kind)(...)` is `kind(...)`: the same class and fields, frozen, the same
    keyword-only signature, required fields required and unknown ones refused."""
    new = quick_new(kind)
    fields = dataclasses.fields(kind)
    assert inspect.signature(new).parameters.keys() == inspect.signature(kind).parameters.keys()
    for parameter, field in zip(inspect.signature(new).parameters.values(), fields, strict=True):
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        default = inspect.Parameter.empty if field.default is dataclasses.MISSING else field.default
        assert parameter.default == default
    required = {f.name: object() for f in fields if f.default is dataclasses.MISSING}
    value = new(**required)
    assert type(value) is kind
    assert value == kind(**required)
    for field in fields:
        assert getattr(value, field.name) is required.get(field.name, field.default)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, fields[0].name, None)
    with pytest.raises(TypeError):
        new(**required, colour="red")
    if required:
        with pytest.raises(TypeError):
            new(**dict(list(required.items())[1:]))
        with pytest.raises(TypeError):
            new(*required.values())


def test_quick_new_refuses_what_it_cannot_build_alike() -> None:
    for kind in _refused():
        with pytest.raises(TypeError):
            quick_new(kind)
