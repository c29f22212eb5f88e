"""Where the references within a schema lead, for what is refused when it loads.

- A loop that consumes nothing: a schema that applies itself to the same value again
  (`{"$ref": "#/properties/a"}` at `/properties/a`, or through `allOf`, `not`, `if`...) never
  ends validating. jsonschema recursed until Python's stack ran out (a `RecursionError` in the
  middle of a run) while jsonschema-rs accepted. A loop that consumes some of the value on its
  way (`properties`, `items`...) is a recursive schema, such as a tree's, and stays allowed.
- A pointer into data (`const`, `enum`, `default`, `examples`): the validators would apply
  that data as a schema, which no check of the load ever read (a refused format or pattern
  in a `const` was enforced through a `$ref` to it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final
from urllib.parse import unquote

from ._schema_walk import DATA_KEYWORDS, SCHEMA_LISTS, SCHEMA_MAPS, subschemas

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


def data_reference(schema: Any) -> tuple[str, str] | None:
    """Where a reference points into data rather than a schema, and the reference; or None."""
    if not isinstance(schema, Mapping):
        return None
    for where, sub in subschemas(schema):
        for key in REFERENCES:
            ref = sub.get(key)
            if isinstance(ref, str) and ref.startswith("#/") and _into_data(schema, ref):
                return where, ref
    return None


def _into_data(root: Mapping[str, Any], ref: str) -> bool:
    """Whether the JSON pointer of `ref` passes through a data keyword of a schema on its way
    (a property named `default` is a name, not the keyword: the walk knows which is which)."""
    node: Any = root
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in unquote(ref[2:]).split("/")]
    index = 0
    while index < len(tokens) and isinstance(node, Mapping):
        keyword = tokens[index]
        if keyword in DATA_KEYWORDS:
            return True
        value = node.get(keyword)
        if keyword in SCHEMA_MAPS and isinstance(value, Mapping) and index + 1 < len(tokens):
            node, index = value.get(tokens[index + 1]), index + 2  # a name, then its schema
        elif keyword in SCHEMA_LISTS and isinstance(value, list) and index + 1 < len(tokens):
            position = tokens[index + 1]
            inside = position.isdigit() and int(position) < len(value)
            node, index = (value[int(position)] if inside else None), index + 2
        else:
            node, index = value, index + 1
    return False
