"""`quick_init`: the values a step builds keep their dataclass `__init__`'s meaning (keyword-only
parameters, defaults, frozenness), only built faster (issue 11)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any

import pytest

from runner.base._frozen import quick_init, quick_new
from runner.core.decide import Batch, Exit, Facts, Verdict
from runner.core.observations import ModelAnswered, ToolObservation
from runner.engine._state import Decided
from runner.models.base import ModelReply, TokenUsage, ToolCall
from runner.models.transcript import AssistantMessage, ToolResultMessage
from runner.record.recording import (
    OUTPUT_ADAPTER,
    TURN_ADAPTER,
    RecordedOutput,
    RecordedTurn,
    Responded,
)
from runner.record.trace import TransitionRecord
from runner.tools.invocation import ToolInvocation, ToolResponse

QUICK: list[type[Any]] = [
    Decided,
    Batch,
    Exit,
    Facts,
    Verdict,
    ToolInvocation,
    ToolResponse,
    ModelAnswered,
    TransitionRecord,
    *ToolObservation.__args__,
]


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
    """Dataclasses neither `quick_init` nor `quick_new` takes: mutable, with a default factory,
    with positional fields."""

    @dataclasses.dataclass(slots=True, kw_only=True)
    class Mutable:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Factory:
        xs: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Positional:
        x: int

    return Mutable, Factory, Positional


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
CASES: list[tuple[type[Any], dict[str, Any]]] = [
    (ToolCall, {"id": "c1", "name": "search", "arguments": {"q": 1}}),
    (TokenUsage, {"input_tokens": 3, "output_tokens": 4}),
    (
        ModelReply,
        {
            "text": "",
            "tool_calls": (),
            "usage": TokenUsage(input_tokens=1, output_tokens=2),
            "stop_reason": "end_turn",
        },
    ),
    (Responded, {"payload": {"ok": True}}),
    (AssistantMessage, {"text": "hi"}),
    (
        ToolResultMessage,
        {"call_id": "c1", "tool": "t", "result_class": "ok", "content": "{}", "is_error": False},
    ),
    (RecordedTurn, TURN),
    (RecordedOutput, OUTPUT),
]


@pytest.mark.parametrize(("kind", "given"), CASES, ids=[kind.__name__ for kind, _ in CASES])
def test_built_as_the_dataclass_would_build_it(kind: type[Any], given: dict[str, Any]) -> None:
    """Keyword-only, required fields required, unknown ones refused, defaults filled in,
    frozen, equal to what the dataclass's own field defaults say, and the same signature
    (annotations resolving) as the generated `__init__`."""
    built = kind(**given)
    for item in dataclasses.fields(kind):
        expected = given.get(item.name, item.default)
        assert getattr(built, item.name) == expected
    assert dataclasses.replace(built) == built
    names = [item.name for item in dataclasses.fields(kind)]
    assert list(inspect.signature(kind).parameters) == names
    assert list(typing.get_type_hints(kind.__init__)) == [*names, "return"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, next(iter(given)), None)
    with pytest.raises(TypeError):
        kind(**given, colour="red")
    with pytest.raises(TypeError):
        kind(**dict(list(given.items())[1:]))
    with pytest.raises(TypeError):
        kind(*given.values())


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


NEW: list[type[Any]] = [
    Facts, ToolInvocation, RecordedOutput, RecordedTurn, TransitionRecord, Verdict, Decided,
    ToolResultMessage, AssistantMessage, Responded, *ToolObservation.__args__,
]  # fmt: skip


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


def test_quick_new_takes_what_quick_init_takes() -> None:
    for kind in _refused():
        with pytest.raises(TypeError):
            quick_new(kind)

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Empty:
        pass

    assert quick_new(Empty)() == Empty()
