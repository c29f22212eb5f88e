"""Schema patterns read as JSON Schema says (ECMA-262), checked by Python's `re` in the reference.

jsonschema hands `pattern` straight to `re.search`, where `$` also matches before a trailing
newline, `.` matches `\\r` and U+2028, and `\\d`, `\\w`, `\\s` cover Unicode digits, letters and
spaces. ECMA-262 (and the compiled validator) disagree on each, so "SFO\\n" would pass
`^[A-Z]{3}$`. `python_source` rewrites exactly those constructs; a pattern that cannot be rewritten
faithfully or that `re` cannot compile (a Unicode property escape such as `\\p{Digit}`) raises
`PatternRefused`, which the contract loader turns into a `ContractError`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

from ._schema_walk import DATA_KEYWORDS, SCHEMA_LISTS, SCHEMA_MAPS

if TYPE_CHECKING:  # jsonschema is imported when a contract is loaded, not with the package
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

# ECMA-262 WhiteSpace and LineTerminator.
_SPACE: Final = r"\t\n\x0b\f\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_LINE_END: Final = r"\n\r\u2028\u2029"
_OUTSIDE: Final = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": "[A-Za-z0-9_]",
    "W": "[^A-Za-z0-9_]",
    "s": f"[{_SPACE}]",
    "S": f"[^{_SPACE}]",
}
_INSIDE: Final = {"d": "0-9", "w": "A-Za-z0-9_", "s": _SPACE}


class PatternRefused(ValueError):
    """A pattern the reference validator cannot check as ECMA-262 reads it."""


def _rewrite(pattern: str) -> Iterator[str]:
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            if index + 1 == len(pattern):
                raise PatternRefused("ends with a lone backslash")
            escaped = pattern[index + 1]
            index += 2
            if in_class and escaped in "DWS":
                raise PatternRefused(f"\\{escaped} inside a character class")
            table = _INSIDE if in_class else _OUTSIDE
            yield table.get(escaped, "\\" + escaped)
            continue
        index += 1
        if in_class:
            in_class = char != "]"
            yield char
        elif char == "[":
            if pattern[index : index + 1] == "]" or pattern[index : index + 2] == "^]":
                raise PatternRefused("empty character class [] or [^]")
            in_class = True
            yield char
        elif char == "$":
            yield r"\Z"
        elif char == ".":
            yield f"[^{_LINE_END}]"
        else:
            yield char


@functools.cache
def python_source(pattern: str) -> str:
    """`pattern` rewritten for `re` with its ECMA-262 meaning; raises `PatternRefused`.

    ASCII mode is a scoped flag, so sources can be joined with `|` (jsonschema joins the
    `patternProperties` keys that way to find additional properties).
    """
    source = f"(?a:{''.join(_rewrite(pattern))})"
    try:  # the scoped form itself: global flags such as (?i) compile alone but not inside it
        re.compile(source)
    except (re.error, ValueError) as exc:  # (?u) with ASCII is a bare ValueError
        raise PatternRefused(f"Python's re cannot compile it: {exc}") from exc
    return source


def _pattern(
    validator: Draft202012Validator, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not re.search(python_source(pattern), instance):
        from jsonschema.exceptions import ValidationError  # noqa: PLC0415  # loaded by now

        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def ecma_dots(pattern: str) -> str:
    """`pattern` with each `.` outside a class spelled out as ECMA-262 reads it: any character
    but a line terminator. jsonschema-rs before 0.61 let `.` match `\\r` and U+2028 (the Rust
    regex meaning); the compiled validator must agree with the reference whatever its version."""
    out: list[str] = []
    in_class, index = False, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        index += 1
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == ".":
            char = "[^\n\r\u2028\u2029]"  # the characters themselves: every dialect reads them
        out.append(char)
    return "".join(out)


def for_reference(schema: Any) -> Any:
    """A copy of `schema` whose `patternProperties` keys are `python_source` rewrites, and
    without `$schema` (see `_rewritten`).

    jsonschema reads those keys in three keywords (patternProperties, additionalProperties,
    unevaluatedProperties); rewriting the keys serves all three. `pattern` keeps its text, so
    messages quote the pattern as the contract wrote it.
    """
    return _rewritten(schema, python_source, rewrite_pattern=False)


def for_fast(schema: Any) -> Any:
    """A copy of `schema` for the compiled validator: `pattern` values and `patternProperties`
    keys with `ecma_dots` (its messages are never shown: the reference's are), and without
    `$schema` (see `_rewritten`)."""
    return _rewritten(schema, ecma_dots, rewrite_pattern=True)


def _rewritten(schema: Any, source: Callable[[str], str], *, rewrite_pattern: bool) -> Any:
    """The copy, reaching every object `_schema_walk.subschemas` reaches. Each schema object
    loses its `$schema`: both validators read a subschema naming another draft under that draft
    (jsonschema-rs even fetches one it does not know), and every schema is read as 2020-12."""
    if not isinstance(schema, Mapping):
        return _reachable(schema, source, rewrite_pattern=rewrite_pattern)
    copy: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$schema":
            continue
        if key == "patternProperties" and isinstance(value, Mapping):
            copy[key] = {
                source(k): _rewritten(v, source, rewrite_pattern=rewrite_pattern)
                for k, v in value.items()
            }
        elif key == "pattern" and rewrite_pattern and isinstance(value, str):
            copy[key] = source(value)
        elif key in SCHEMA_MAPS and isinstance(value, Mapping):
            copy[key] = {
                name: _rewritten(sub, source, rewrite_pattern=rewrite_pattern)
                for name, sub in value.items()
            }
        elif key in SCHEMA_LISTS and isinstance(value, list):
            copy[key] = [_rewritten(sub, source, rewrite_pattern=rewrite_pattern) for sub in value]
        elif key not in DATA_KEYWORDS:  # one subschema, or any object a `$ref` may point at
            copy[key] = _rewritten(value, source, rewrite_pattern=rewrite_pattern)
        else:
            copy[key] = value
    return copy


def _reachable(value: Any, source: Callable[[str], str], *, rewrite_pattern: bool) -> Any:
    """A list's objects rewritten too (under an unknown keyword a `$ref` may reach them)."""
    if isinstance(value, list):
        return [_rewritten(item, source, rewrite_pattern=rewrite_pattern) for item in value]
    return value


@functools.cache
def reference_validator_class() -> type[Draft202012Validator]:
    """Draft 2020-12 as jsonschema implements it, `pattern` read as an ECMA-262 regular expression
    (give it schemas passed through `for_reference`, for `patternProperties`).

    Built on first use: jsonschema is imported when a contract is loaded, not with the package.
    """
    from jsonschema import Draft202012Validator, validators  # noqa: PLC0415  # see above

    return cast(
        "type[Draft202012Validator]",
        validators.extend(  # type: ignore[no-untyped-call]  # jsonschema leaves extend untyped
            Draft202012Validator, {"pattern": _pattern}
        ),
    )
