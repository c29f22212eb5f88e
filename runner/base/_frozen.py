"""`quick_init`: a quicker `__init__` for a frozen, slotted, keyword-only dataclass.

Kept for the one class it pays for: `TransitionRecord` (25 fields, three built a step), where it
saves about 8% of a step's instructions (docs/performance.md). A frozen dataclass's
generated `__init__` sets each field through `object.__setattr__`; this one gives the new value
the class of a plain slotted twin of the same layout (not frozen), stores the fields as into any
slotted object and gives the value its class back. The same keyword-only parameters, defaults,
annotations and frozenness.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, TypeVar

T = TypeVar("T", bound=type[Any])


def quick_init(kind: T) -> T:
    """Replace `kind`'s generated `__init__`; returns `kind` (a decorator). `kind` is a frozen
    dataclass whose `__slots__` are its fields, keyword-only, with no `default_factory`,
    `init=False` field or `__post_init__`. A subclass (another layout) is built as usual, through
    `object.__setattr__`."""
    params = getattr(kind, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in vars(kind):
        raise TypeError(f"{kind.__name__}: not a frozen, slotted dataclass")
    if hasattr(kind, "__post_init__"):
        raise TypeError(f"{kind.__name__}: has a __post_init__")
    fields = dataclasses.fields(kind)
    slots = vars(kind)["__slots__"]
    if tuple(slots) != tuple(item.name for item in fields):
        raise TypeError(f"{kind.__name__}: its slots are not its fields")
    # The module's globals, so that the annotations resolve as the generated `__init__`'s do.
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
    namespace["_kind"], namespace["_swap"] = kind, object.__setattr__
    namespace["_twin"] = type(f"_{kind.__name__}Building", (), {"__slots__": slots})
    head = ", ".join(["self", *(["*", *signature] if signature else [])])
    lines = [f"def __init__({head}):"]
    lines += ["    if type(self) is _kind:", "        _swap(self, '__class__', _twin)"]
    lines += [f"        self.{item.name} = {item.name}" for item in fields]
    lines += ["        self.__class__ = _kind", "    else:"]
    lines += [f"        _swap(self, {item.name!r}, {item.name})" for item in fields]
    lines += ["        pass"]  # a dataclass without fields
    exec("\n".join(lines), namespace)  # field names only, from the dataclass
    init = namespace["__init__"]
    init.__qualname__ = f"{kind.__qualname__}.__init__"
    init.__module__ = kind.__module__
    init.__annotations__ = {item.name: item.type for item in fields} | {"return": None}
    kind.__init__ = init
    return kind
