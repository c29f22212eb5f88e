"""`quick_init`: the values a step builds keep their dataclass `__init__`'s meaning (keyword-only
parameters, defaults, frozenness), only built faster (issue 11)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from runner._frozen import quick_init
from runner._state import Decided
from runner.decide import Batch, Exit, Facts, Verdict
from runner.observations import ModelAnswered, ToolObservation
from runner.tools import ToolInvocation, ToolResponse

QUICK: list[type[Any]] = [
    Decided,
    Batch,
    Exit,
    Facts,
    Verdict,
    ToolInvocation,
    ToolResponse,
    ModelAnswered,
    *ToolObservation.__args__,
]


@pytest.mark.parametrize("kind", QUICK, ids=lambda kind: kind.__name__)
def test_the_quick_init_takes_what_the_dataclass_declares(kind: type[Any]) -> None:
    fields = dataclasses.fields(kind)
    parameters = list(inspect.signature(kind).parameters.values())
    assert [p.name for p in parameters] == [f.name for f in fields]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)
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


def test_only_frozen_slotted_keyword_only_dataclasses_get_one() -> None:
    @dataclasses.dataclass(slots=True, kw_only=True)
    class Mutable:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Factory:
        xs: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Positional:
        x: int

    for kind in (Mutable, Factory, Positional):
        with pytest.raises(TypeError):
            quick_init(kind)


def test_a_dataclass_without_fields() -> None:
    @quick_init
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Empty:
        pass

    assert Empty() == Empty()
