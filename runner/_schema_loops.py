"""Reference loops that consume nothing: a schema that applies itself to the same value again
(`{"$ref": "#/properties/a"}` at `/properties/a`, or through `allOf`, `not`, `if`...) never
ends validating. jsonschema recurses until Python's stack runs out (a `RecursionError` in the
middle of a run) while jsonschema-rs accepts, so such a schema is refused when it loads.

A loop that consumes some of the value on its way (`properties`, `items`...) is a recursive
schema, such as a tree's, and stays allowed: each turn reads a smaller value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final
from urllib.parse import unquote

from ._schema_walk import subschemas

IN_PLACE_ONES: Final = ("not", "if", "then", "else")
"""Keywords whose one subschema applies to the same value."""
IN_PLACE_LISTS: Final = ("allOf", "anyOf", "oneOf")
"""Keywords whose subschemas all apply to the same value."""
REFERENCES: Final = ("$ref", "$dynamicRef")


def reference_loop(schema: Any) -> str | None:
    """The JSON pointer of a subschema that reaches itself again on the same value, or None.

    References are resolved from the root: a schema that embeds a resource of its own (an `$id`
    below the root) is not judged here, and the validators' guard (`contracts.py`) answers a
    loop found while validating instead."""
    if not isinstance(schema, Mapping):
        return None
    if any("$id" in sub for where, sub in subschemas(schema) if where != "/"):
        return None
    anchors = {
        name: sub
        for _, sub in subschemas(schema)
        for key in ("$anchor", "$dynamicAnchor")
        if isinstance(name := sub.get(key), str)
    }
    where_of = {id(sub): where for where, sub in subschemas(schema)}
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for where, sub in subschemas(schema):
        if state.get(id(sub)):
            continue
        path = [(sub, iter(_in_place(sub, schema, anchors)))]
        state[id(sub)] = 1
        while path:
            node, nexts = path[-1]
            following = next(nexts, None)
            if following is None:
                state[id(node)] = 2
                path.pop()
                continue
            seen = state.get(id(following))
            if seen == 1:
                return where_of.get(id(following), where)
            if seen is None:
                state[id(following)] = 1
                path.append((following, iter(_in_place(following, schema, anchors))))
    return None


def _in_place(
    sub: Mapping[str, Any], root: Mapping[str, Any], anchors: Mapping[str, Any]
) -> Iterator[Mapping[str, Any]]:
    """The subschemas `sub` applies to the very value it is given."""
    for key in IN_PLACE_ONES:
        if isinstance(sub.get(key), Mapping):
            yield sub[key]
    for key in IN_PLACE_LISTS:
        for item in sub.get(key) or () if isinstance(sub.get(key), list) else ():
            if isinstance(item, Mapping):
                yield item
    dependent = sub.get("dependentSchemas")
    if isinstance(dependent, Mapping):
        yield from (item for item in dependent.values() if isinstance(item, Mapping))
    for key in REFERENCES:
        target = _target(sub.get(key), root, anchors)
        if target is not None:
            yield target


def _target(ref: object, root: Mapping[str, Any], anchors: Mapping[str, Any]) -> Any:
    """What a reference within the schema points at (`#`, `#/json/pointer` or `#anchor`)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None  # a reference outside is refused before this is asked
    fragment = unquote(ref[1:])
    if not fragment.startswith("/"):
        found = anchors.get(fragment) if fragment else root
        return found if isinstance(found, Mapping) else None
    node: Any = root
    for escaped in fragment[1:].split("/"):
        token = escaped.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node if isinstance(node, Mapping) else None
