"""A quicker `__init__` for the frozen, slotted, keyword-only dataclasses a step builds.

A frozen dataclass's generated `__init__` sets each field with `object.__setattr__`, looked up
anew per field (about 0.1-0.2 us a field on Python 3.11); the values built on every step (a
`TransitionRecord`, 25 fields, three a step; `decide.Facts`; a `RecordedTurn`; the observations
and transcript messages) spent more time there than in what they are for. `quick_init` gives
such a class an `__init__` that sets each field through its slot's descriptor, bound once: the
same keyword-only parameters, defaults, annotations and frozenness, in about half the time.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T", bound=type[Any])
P = ParamSpec("P")
R = TypeVar("R")

_MANY = 8
"""From this many fields the twin swap (see `quick_init`) is quicker than the setters (about
even at 7: Verdict 0.57 -> 0.53 us; RecordedOutput, 8 fields, 0.62 -> 0.57; ToolInvocation,
10, 0.72 -> 0.59)."""


def _prepared(
    kind: type[Any],
) -> tuple[tuple[dataclasses.Field[Any], ...], dict[str, Any], list[str]]:
    """What `quick_init` and `quick_new` generate from: `kind`'s fields, once it is known to be
    a frozen, slotted, keyword-only dataclass they take; the namespace the code runs in (the
    module's globals as they stand, so the annotations resolve as the generated `__init__`'s do,
    and each field's bound setter and default: globals, the quickest names a function reads);
    and the keyword-only parameters, defaults included."""
    params = getattr(kind, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in vars(kind):
        raise TypeError(f"{kind.__name__}: not a frozen, slotted dataclass")
    if hasattr(kind, "__post_init__"):
        raise TypeError(f"{kind.__name__}: has a __post_init__")
    fields = dataclasses.fields(kind)
    namespace: dict[str, Any] = dict(vars(sys.modules[kind.__module__]))
    signature = []
    for item in fields:
        if not item.kw_only or not item.init or item.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{kind.__name__}.{item.name}: keyword-only, no default_factory")
        namespace[f"_set_{item.name}"] = getattr(kind, item.name).__set__
        if item.default is dataclasses.MISSING:
            signature.append(item.name)
        else:
            namespace[f"_default_{item.name}"] = item.default
            signature.append(f"{item.name}=_default_{item.name}")
    return fields, namespace, signature


def quick_init(kind: T) -> T:
    """Replace `kind`'s generated `__init__` (a frozen, slotted, keyword-only dataclass with no
    `default_factory`, `init=False` field or `__post_init__`); returns `kind` (a decorator)."""
    fields, namespace, signature = _prepared(kind)
    head = ", ".join(["self", *(["*", *signature] if signature else [])])
    lines = [f"def __init__({head}):", "    pass"]  # `pass`: a dataclass without fields
    through_slots = [f"_set_{item.name}(self, {item.name})" for item in fields]
    if len(fields) >= _MANY and vars(kind)["__slots__"] == tuple(item.name for item in fields):
        # Many fields: each stored as into a plain slotted object (a twin class of the same
        # layout, not frozen: 15 ns a field where the bound setter takes 50-70), then the
        # value is given its class back; 0.35 us for the two swaps. A subclass (another
        # layout) is set through the descriptors.
        namespace["_kind"], namespace["_swap"] = kind, object.__setattr__
        namespace["_twin"] = type(f"_{kind.__name__}Building", (), {"__slots__": kind.__slots__})
        lines += ["    if type(self) is _kind:", "        _swap(self, '__class__', _twin)"]
        lines += [f"        self.{item.name} = {item.name}" for item in fields]
        lines += ["        self.__class__ = _kind", "        return"]
    lines += [f"    {line}" for line in through_slots]
    exec("\n".join(lines), namespace)  # field names only, from the dataclass
    init = namespace["__init__"]
    init.__qualname__ = f"{kind.__qualname__}.__init__"
    init.__module__ = kind.__module__
    init.__annotations__ = {item.name: item.type for item in fields} | {"return": None}
    kind.__init__ = init
    return kind


def quick_new(kind: Callable[P, R]) -> Callable[P, R]:
    """A plain function that builds a `kind` as `kind(...)` does (the same keyword-only
    parameters and defaults; for a class whose `__init__` is the dataclass's, or `quick_init`'s:
    nothing else runs), for the few values built with many fields on every step.

    Calling a class with keywords goes through `type.__call__`, which on Python 3.11 packs the
    keywords into a dict and unpacks them again for `__init__` (`Facts`, 18 fields: about a
    third of its cost); a function is called with them as they are. A value of many fields is
    built as its twin (see `quick_init`) and given its class once.
    """
    assert isinstance(kind, type)
    fields, namespace, signature = _prepared(kind)
    namespace["_kind"], namespace["_new"] = kind, object.__new__
    head = ", ".join(["*", *signature]) if signature else ""
    lines = [f"def new({head}):"]
    if len(fields) >= _MANY and vars(kind)["__slots__"] == tuple(item.name for item in fields):
        slots = vars(kind)["__slots__"]
        namespace["_twin"] = type(f"_{kind.__name__}New", (), {"__slots__": slots})
        lines.append("    self = _new(_twin)")
        lines += [f"    self.{item.name} = {item.name}" for item in fields]
        lines.append("    self.__class__ = _kind")
    else:
        lines.append("    self = _new(_kind)")
        lines += [f"    _set_{item.name}(self, {item.name})" for item in fields]
    lines.append("    return self")
    exec("\n".join(lines), namespace)  # field names only, from the dataclass
    new: Callable[P, R] = namespace["new"]
    new.__qualname__ = new.__name__ = f"new_{kind.__name__}"
    new.__module__ = kind.__module__
    return new
