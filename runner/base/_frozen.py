"""`quick_new`: a plain function that builds a frozen, slotted, keyword-only dataclass.

Kept for the one value it pays for: the `TransitionRecord` a move builds (25 fields, three a
step), where it saves about 9% of a step's instructions (see the README's "Performance").
Calling a class with keywords goes through `type.__call__`, which on Python 3.11 packs the
keywords into a dict and unpacks them again for `__init__`, and a frozen dataclass's `__init__`
sets each field through `object.__setattr__`; the function takes the keywords as they are, fills
a plain slotted twin of the same layout (not frozen) and gives the value its class once.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def quick_new(kind: Callable[P, R]) -> Callable[P, R]:
    """A function that builds a `kind` as `kind(...)` does: the same keyword-only parameters
    and defaults, for a frozen dataclass whose `__slots__` are its fields (no base class
    layout), keyword-only, with no `default_factory`, `init=False` field or `__post_init__`."""
    assert isinstance(kind, type)
    params = getattr(kind, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in vars(kind):
        raise TypeError(f"{kind.__name__}: not a frozen, slotted dataclass")
    if hasattr(kind, "__post_init__"):
        raise TypeError(f"{kind.__name__}: has a __post_init__")
    fields = dataclasses.fields(kind)
    slots = vars(kind)["__slots__"]
    if tuple(slots) != tuple(item.name for item in fields):
        raise TypeError(f"{kind.__name__}: its slots are not its fields")
    # The module's globals, so that defaults and names resolve as in the class's own module.
    namespace: dict[str, Any] = dict(vars(sys.modules[kind.__module__]))
    signature = []
    for item in fields:
        if not item.kw_only or not item.init or item.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{kind.__name__}.{item.name}: keyword-only, no default_factory")
        if item.default is dataclasses.MISSING:
            signature.append(item.name)
        else:
            namespace[f"_default_{item.name}"] = item.default
            signature.append(f"{item.name}=_default_{item.name}")
    namespace["_kind"], namespace["_new"] = kind, object.__new__
    namespace["_twin"] = type(f"_{kind.__name__}New", (), {"__slots__": slots})
    lines = [f"def new({', '.join(['*', *signature]) if signature else ''}):"]
    lines.append("    self = _new(_twin)")
    lines += [f"    self.{item.name} = {item.name}" for item in fields]
    lines += ["    self.__class__ = _kind", "    return self"]
    exec("\n".join(lines), namespace)  # field names only, from the dataclass
    new: Callable[P, R] = namespace["new"]
    new.__qualname__ = new.__name__ = f"new_{kind.__name__}"
    new.__module__ = kind.__module__
    return new
