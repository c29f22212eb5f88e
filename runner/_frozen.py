"""A quicker `__init__` for the frozen values a step builds several of.

A frozen dataclass's generated `__init__` sets each field with `object.__setattr__`, looked up
anew per field (about 0.1-0.2 us a field on Python 3.11); the values built on every step
(`decide.Facts`, 16 fields; `Verdict`; `ToolInvocation`; observations) spent more time there
than in what they are for. `quick_init` gives such a class an `__init__` that sets each field
through its slot's descriptor, bound once: the same keyword-only parameters, defaults and
frozenness (as `trace._quick_init` does for `TransitionRecord`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T", bound=type[Any])


def quick_init(kind: T) -> T:
    """Replace `kind`'s generated `__init__` (a frozen, slotted, keyword-only dataclass with no
    `default_factory`, `init=False` field or `__post_init__`); returns `kind` (a decorator)."""
    params = dataclasses.fields(kind)
    if not (
        kind.__dataclass_params__.frozen
        and "__slots__" in kind.__dict__
        and not hasattr(kind, "__post_init__")
    ):
        raise TypeError(f"{kind.__name__}: not a frozen, slotted dataclass without __post_init__")
    namespace: dict[str, Any] = {}
    signature = []
    for item in params:
        if not item.kw_only or not item.init or item.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{kind.__name__}.{item.name}: keyword-only, no default_factory")
        namespace[f"_set_{item.name}"] = getattr(kind, item.name).__set__
        if item.default is dataclasses.MISSING:
            signature.append(item.name)
        else:
            namespace[f"_default_{item.name}"] = item.default
            signature.append(f"{item.name}=_default_{item.name}")
    head = ", ".join(["self", *(["*", *signature] if signature else [])])
    lines = [f"def __init__({head}):", "    pass"]  # `pass`: a dataclass without fields
    lines += [f"    _set_{item.name}(self, {item.name})" for item in params]
    exec("\n".join(lines), namespace)  # field names only, from the dataclass
    init = namespace["__init__"]
    init.__qualname__ = f"{kind.__qualname__}.__init__"
    init.__module__ = kind.__module__
    kind.__init__ = init
    return kind
