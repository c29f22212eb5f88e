"""What crosses into the engine from a tool or a model is made plain JSON first, or refused.

A tool payload or model arguments may hold anything Python can: sets, bytes, NaN, integers past
64 bits, non-string keys, custom objects, lone surrogates, nesting deep enough to exhaust the
validators' recursion. Each of these would break a validator, the renderer or the store somewhere
downstream, so they are dealt with once, here, at the seam: `json_value` returns a tree of plain
`dict`/`list`/`str`/`int`/`float`/`bool`/`None` or raises `NotJson` naming the first problem.
Lone surrogates (which no UTF-8 text can hold) become U+FFFD; everything else that is not JSON is
refused, never guessed at.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any, Final

import orjson

MAX_DEPTH: Final = 64
"""Deepest nesting accepted; well below what the validators and the store's reader take (~200)."""

MAX_INT: Final = 2**64 - 1
MIN_INT: Final = -(2**63)
"""The integer range every JSON reader the runner uses (orjson, pydantic) round-trips exactly."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _at(path: str) -> str:
    return path[:200] or "(root)"


class NotJson(ValueError):
    """A value that is not plain JSON; the message says where and why."""


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (so it can be encoded as UTF-8)."""
    return _SURROGATE.sub("\ufffd", text)


def safe_str(value: object) -> str:
    """`str(value)` that cannot raise and is always valid UTF-8 (for exceptions' messages)."""
    try:
        text = str(value)
    except Exception:  # a hostile __str__: the message is lost, the run is not
        return f"<unprintable {type(value).__name__}>"
    return clean_text(text) if type(text) is str else f"<unprintable {type(value).__name__}>"


# orjson refuses what is not a builtin JSON type (no dataclasses, dates or subclasses): with
# these options a payload it accepts is plain JSON, but for NaN, tuples, enums and UUIDs (which
# the round trip below tells apart) and depth (bounded by counting brackets, conservatively).
_STRICT: Final = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def json_value(value: object, *, refuse_surrogates: bool = False) -> Any:
    """`value` as plain JSON, or `NotJson` naming the first problem and where it is.

    A value that already is plain JSON comes back as itself (a tool that answers every call
    with one shared dict costs one dict, not one per call); anything else comes back as a
    plain copy: tuples become lists, lone surrogates in strings (keys too) become U+FFFD, or
    are refused with `refuse_surrogates`. Never raises `RecursionError`, however deep.
    """
    try:  # the hot path: ordinary payloads, in C, then their types
        orjson.dumps(value, option=_STRICT)
        if _builtin_only(value):
            return value
    except Exception:  # anything orjson refuses: walk it
        pass
    return _walk(value, refuse_surrogates=refuse_surrogates)


PLAIN_LEAVES: Final = frozenset({str, int, bool, type(None)})
"""The leaf types that are plain JSON as they are, whatever their value (not float: NaN)."""


def _builtin_only(value: Any) -> bool:
    """Whether `value` holds nothing but dicts, lists, strings, integers, finite floats, booleans
    and None, nested at most `MAX_DEPTH` deep (as `_walk` counts).

    With orjson having taken it (keys all strings, no lone surrogate, no integer past 64 bits),
    that makes it plain JSON; what else orjson takes is written as something it is not (NaN as
    null, a tuple as an array, an enum or a UUID as its value, a `Fragment` as it is). One open
    iterator per level: no recursion, however deep.
    """
    kind = type(value)
    if kind is not dict and kind is not list:
        return kind in PLAIN_LEAVES or (kind is float and math.isfinite(value))
    items: Iterable[Any] = value.values() if kind is dict else value
    if _flat(items, 0):
        return True
    stack: list[Iterator[Any]] = [iter(items)]
    while stack:
        for item in stack[-1]:
            kind = type(item)
            if kind in PLAIN_LEAVES:
                continue
            if kind is dict or kind is list:
                depth = len(stack)
                if depth >= MAX_DEPTH:  # too deep: `_walk` says where
                    return False
                items = item.values() if kind is dict else item
                if not _flat(items, depth):
                    stack.append(iter(items))
                    break
            elif kind is not float or not math.isfinite(item):
                return False
        else:
            stack.pop()
    return True


def _flat(items: Iterable[Any], depth: int) -> bool:
    """Whether the values of a container at `depth` are all strings, integers, booleans or None
    (most model arguments), or all dicts of such (a payload's records): told in C, not one by
    one."""
    if PLAIN_LEAVES.issuperset(map(type, items)):
        return True
    return (
        depth + 1 < MAX_DEPTH
        and _DICTS.issuperset(map(type, items))
        and PLAIN_LEAVES.issuperset(map(type, chain.from_iterable(map(dict.values, items))))
    )


_DICTS: Final = frozenset({dict})


def _walk(value: object, *, refuse_surrogates: bool) -> Any:
    """`json_value` the slow way: iteratively, naming the first problem (no recursion)."""

    def text(raw: str, path: str) -> str:
        cleaned = clean_text(raw)
        if refuse_surrogates and cleaned != raw:
            raise NotJson(f"{_at(path)}: a lone surrogate (not valid UTF-8 text)")
        return cleaned

    root: list[Any] = [None]
    # (value, container to write into, key/index, path, depth)
    stack: list[tuple[object, Any, Any, str, int]] = [(value, root, 0, "", 0)]
    while stack:
        item, into, slot, path, depth = stack.pop()
        kind = type(item)
        if item is None or kind is bool:
            into[slot] = item
        elif kind is str:
            into[slot] = text(item, path)  # type: ignore[arg-type]
        elif kind is int:
            if not MIN_INT <= item <= MAX_INT:  # type: ignore[operator]
                raise NotJson(f"{_at(path)}: integer outside the JSON range")
            into[slot] = item
        elif kind is float:
            if not math.isfinite(item):  # type: ignore[arg-type]
                raise NotJson(f"{_at(path)}: {item} is not a JSON number")
            into[slot] = item
        elif kind is dict or kind is list or kind is tuple:
            if depth >= MAX_DEPTH:
                raise NotJson(f"{_at(path)}: nested deeper than {MAX_DEPTH} levels")
            if kind is dict:
                copy: dict[str, Any] = {}
                for key, child in item.items():  # type: ignore[attr-defined]
                    if type(key) is not str:
                        raise NotJson(f"{_at(path)}: key {type(key).__name__} is not a string")
                    name = text(key, path)
                    if name in copy:
                        raise NotJson(f"{_at(path)}: two keys read {name!r}")
                    copy[name] = None
                    stack.append((child, copy, name, f"{path}/{name}", depth + 1))
                into[slot] = copy
            else:
                items = list(item)  # type: ignore[call-overload]
                array: list[Any] = [None] * len(items)
                for index, child in enumerate(items):
                    stack.append((child, array, index, f"{path}/{index}", depth + 1))
                into[slot] = array
        else:
            raise NotJson(f"{_at(path)}: {kind.__name__} is not a JSON value")
    return root[0]
