"""Where the schemas inside a JSON Schema are: keywords whose values are subschemas (2020-12)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

SCHEMA_LISTS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
"""Keywords whose value is a list of subschemas (`items` was one before 2020-12)."""
SCHEMA_MAPS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
"""Keywords whose value maps names to subschemas."""
DATA_KEYWORDS: Final = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose value is instance data, never a schema."""


def subschemas(schema: Any, where: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every schema object inside `schema` with its JSON pointer (data such as `enum` skipped),
    and every object under other keywords too, since a `$ref` can make any of them a schema."""
    if not isinstance(schema, Mapping):
        return
    yield where or "/", schema
    for key, value in schema.items():
        if key in SCHEMA_MAPS and isinstance(value, Mapping):
            for name, sub in value.items():
                yield from subschemas(sub, f"{where}/{key}/{name}")
        elif key in SCHEMA_LISTS and isinstance(value, list):
            for index, sub in enumerate(value):
                yield from subschemas(sub, f"{where}/{key}/{index}")
        elif key not in DATA_KEYWORDS:  # one subschema (`not`, `items`...), or whatever is
            yield from _reachable(value, f"{where}/{key}")  # under an unknown keyword


def _reachable(value: Any, where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Objects under a keyword, a schema's or not (contentSchema...): a `$ref` may point at them."""
    if isinstance(value, Mapping):
        yield from subschemas(value, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _reachable(item, f"{where}/{index}")
