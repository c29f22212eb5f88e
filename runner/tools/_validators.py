"""The one place schema validators are built: none of them ever fetches, and all read 2020-12.

Every validator of the runner comes from here, through `contracts.compile_contract` (contract
files, declared tools, child runs, MCP tools, their result schemas, and so replay, grading and
the service, which compile the same contracts): the compiled one (`fast_validator`,
jsonschema-rs), the reference (`reference_validator`, jsonschema) and the meta-schema check
(`meta_schema_error`). Each is given a retriever that refuses every URI, so nothing a schema
names (`$schema`, `$ref`, an `$id`'s base) is opened, on the network or on disk.

Left to themselves, both libraries read a subschema's `$schema` as a switch: jsonschema-rs
fetches an unknown one and validates with the vocabularies it declares (one declaring only the
core vocabulary turns every assertion off), and both switch a subschema naming draft 7 to draft 7
(where `prefixItems` means nothing and `$ref` hides its siblings). So `dialect_problem` lets a
schema name only the drafts real servers emit (`ALLOWED_DIALECTS`), and the copies the
validators get carry no `$schema` at all (`_patterns.for_fast`, `_patterns.for_reference`):
every schema is read as Draft 2020-12.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, NoReturn

import jsonschema_rs

from ._formats import ASSERTED_FORMATS, format_checker, with_shortcuts
from ._patterns import for_fast, for_reference, reference_validator_class
from ._schema_walk import subschemas

if TYPE_CHECKING:  # jsonschema (the reference) is imported when a contract is compiled
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError as SchemaViolation
    from referencing import Registry

ALLOWED_DIALECTS: Final[frozenset[str]] = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
        "http://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft/2020-12/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2019-09/schema#",
        "http://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft/2019-09/schema#",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft-07/schema#",
    }
)
"""The `$schema` values a schema may carry, at any depth: 2020-12, 2019-09 and draft 7 as
servers spell them. Each is read as 2020-12, as every schema is; any other value is refused."""

REFUSED_KEYWORDS: Final[Mapping[str, str]] = {
    "$vocabulary": "only a meta-schema declares vocabularies, and a tool's schema is not one",
}
"""Keywords no schema of the runner's may carry, anywhere, and why."""


class RetrievalRefused(ValueError):
    """A validator asked for a URI: the runner never opens one."""


def refuse_retrieval(uri: str) -> NoReturn:
    """The retriever every validator gets: it opens nothing."""
    raise RetrievalRefused(f"{uri!r} is not fetched: a schema may name only what it contains")


def dialect_problem(schema: Any) -> tuple[str, str] | None:
    """Where `schema` names a draft it may not (or a keyword it may not carry), and what: the
    JSON pointer and a sentence naming the value; None when it names none."""
    for where, sub in subschemas(schema):
        if "$schema" in sub:
            value = sub["$schema"]
            if not (isinstance(value, str) and value in ALLOWED_DIALECTS):
                return where, (
                    f"$schema {value!r} is refused: a schema may name only Draft 2020-12, "
                    "2019-09 or 7 (read as 2020-12), by its published URI; nothing is fetched"
                )
        for keyword, why in REFUSED_KEYWORDS.items():
            if keyword in sub:
                return where, f"{keyword} {sub[keyword]!r} is refused: {why}"
    return None


def fast_validator(schema: dict[str, Any]) -> jsonschema_rs.Validator:
    """The compiled validator, its formats checked by the same functions as the reference's.

    Draft 2020-12 whatever `$schema` says, as the reference reads it (an MCP server's schemas
    often name draft 7, where `prefixItems` means nothing: the two would part ways)."""
    return jsonschema_rs.Draft202012Validator(
        with_shortcuts(for_fast(schema)),
        validate_formats=True,
        ignore_unknown_formats=False,
        formats=dict(ASSERTED_FORMATS),
        retriever=refuse_retrieval,
    )


@functools.cache
def _registry() -> Registry[Any]:
    """No resource of its own, and a retrieval that refuses (jsonschema's default fetches any
    http(s) URI a reference names, with a deprecation warning); the drafts' meta-schemas are
    added by jsonschema itself."""
    from referencing import Registry  # noqa: PLC0415  # with the reference, on first use

    return Registry(retrieve=refuse_retrieval)  # type: ignore[call-arg]  # attrs' private alias


def reference_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """The reference validator: jsonschema, asserting exactly the runner's formats."""
    return reference_validator_class()(
        for_reference(schema), format_checker=format_checker(), registry=_registry()
    )


def meta_schema_error(schema: dict[str, Any]) -> SchemaViolation | None:
    """The first way `schema` breaks the 2020-12 meta-schema (None: it does not), checked as
    jsonschema's `check_schema` does, but with the refusing registry."""
    from jsonschema.validators import validator_for  # noqa: PLC0415  # loaded by now

    meta = reference_validator_class().META_SCHEMA
    checker_class = validator_for(meta)
    checker = checker_class(meta, format_checker=checker_class.FORMAT_CHECKER, registry=_registry())
    return next(iter(checker.iter_errors(schema)), None)
