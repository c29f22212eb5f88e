"""The hot path's compiled validator accepts and rejects exactly what jsonschema does.

For every contract (the travel ones and the benchmark's), on payloads generated from each schema,
on arbitrary JSON, on mutations of valid payloads, and on edge strings where Python's regular
expressions and ECMA-262 part ways (a trailing newline, Unicode digits and spaces) or formats have
their corners (year 0000, leap seconds, lower-case separators, offsets, fractions, impossible
dates). And for every format a contract may use (`ASSERTED_FORMATS`), on strings generated around
that format's edges: the effective verdict (the compiled validator's acceptance, else the
reference's) must be the reference's verdict.

One known difference is outside JSON itself: Python's infinities and NaN (which `json.loads`
accepts as `Infinity`/`NaN`). The compiled validator rejects them and jsonschema accepts them; the
hot path only ever trusts the compiled validator when it accepts, so it decides as jsonschema
does there too (`test_non_finite_numbers_fall_back_to_the_reference`).
"""

from __future__ import annotations

import copy
import re
from datetime import UTC, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from bench.workloads import contracts as bench_contracts
from runner.tools import _formats as formats_module
from runner.tools._formats import ASSERTED_FORMATS, PLAIN_PATTERNS
from runner.tools._validators import fast_validator, reference_validator
from runner.tools.contracts import CompiledContract
from runner.travel import load_travel_contracts

CONTRACTS: list[CompiledContract] = [
    *load_travel_contracts().values(),
    *bench_contracts().values(),
]
CASES = [
    (contract, side)
    for contract in CONTRACTS
    for side in ("input", "result")
]  # fmt: skip
IDS = [f"{contract.name}.{side}" for contract, side in CASES]

EDGE_STRINGS = [
    "2027-04-01", "2028-02-29", "2027-02-29", "0000-01-01", "0001-01-01", "2027-13-01",
    "2027-04-31", "20270401", "2027-4-01", "2027-04-01T00:00:00", " 2027-04-01",
    "2027-03-01T09:00:00Z", "2027-03-01t09:00:00z", "2027-03-01 09:00:00Z",
    "2027-06-30T23:59:60Z", "2027-03-01T23:59:60+01:00", "0000-01-01T00:00:00Z",
    "2027-03-01T09:00:00+24:00", "2027-03-01T09:00:00+23:59", "2027-03-01T09:00:00.123456789Z",
    "2027-03-01T09:00:00-00:00", "2027-03-01T09:00Z", "2027-03-01T09:00:00+0900",
    "2027-02-29T09:00:00Z", "2027-03-01T25:00:00Z", "SFO", "sfo", "SFOO", "", "x",
    "wheelchair", "reported_available", "ok", "error", "rate_limited", "é", "\u0000",
    "SFO\n", "SF\u09e7", "2027-04-01\n", "2027-03-01T09:00:00Z\n", "1998-12-31T23:59:60Z",
    "1998-12-31T15:59:60.123-08:00", "1998-12-31T23:58:60Z", "2027-0\u09ea-01", "\r", "\u00a0",
]  # fmt: skip


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Valid instances of the subset of JSON Schema the contracts use."""
    if "oneOf" in schema:
        return st.one_of([from_schema(branch) for branch in schema["oneOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {name: from_schema(sub) for name, sub in properties.items() if name in required},
            optional={
                name: from_schema(sub) for name, sub in properties.items() if name not in required
            },
        )
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {})), max_size=schema.get("maxItems", 4))
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.floats(
            schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "string":
        if schema.get("format") == "date":
            return st.dates().map(lambda d: d.isoformat())
        if schema.get("format") == "date-time":
            zones = st.sampled_from(
                [UTC, timezone(timedelta(hours=9)), timezone(-timedelta(hours=5))]
            )
            return st.datetimes(timezones=zones).map(lambda d: d.isoformat())
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 20))
    return JSON


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


def _schema(contract: CompiledContract, side: str) -> dict[str, Any]:
    schema = contract.contract.input_schema if side == "input" else contract.contract.result_schema
    return {k: v for k, v in schema.items() if k != "$schema"}


def _agree(contract: CompiledContract, side: str, payload: Any) -> None:
    fast = contract.fast_input if side == "input" else contract.fast_result
    slow = contract.input_validator if side == "input" else contract.result_validator
    agree = fast.is_valid(payload) == slow.is_valid(payload)
    assert agree, f"{contract.name}.{side} disagrees on {payload!r:.300}"


def _strings(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every string in a JSON value."""
    if isinstance(value, str):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _strings(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _strings(v, (*path, i))]
    return []


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    changed = copy.deepcopy(value)
    target = changed
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return changed


@pytest.mark.slow
@pytest.mark.parametrize(("contract", "side"), CASES, ids=IDS)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_valid_payloads_and_their_mutations(
    contract: CompiledContract, side: str, data: st.DataObject
) -> None:
    payload = data.draw(from_schema(_schema(contract, side)))
    _agree(contract, side, payload)
    if isinstance(payload, dict) and payload:
        key = data.draw(st.sampled_from(sorted(payload)))
        _agree(contract, side, {k: v for k, v in payload.items() if k != key})
        _agree(contract, side, {**payload, key: data.draw(JSON)})
        _agree(contract, side, {**payload, data.draw(st.text(max_size=8)): data.draw(JSON)})
    for path in _strings(payload):
        _agree(contract, side, _replaced(payload, path, data.draw(st.sampled_from(EDGE_STRINGS))))


@pytest.mark.parametrize(("contract", "side"), CASES, ids=IDS)
@settings(max_examples=60, deadline=None)
@given(payload=JSON)
def test_arbitrary_json(contract: CompiledContract, side: str, payload: Any) -> None:
    _agree(contract, side, payload)


@pytest.mark.slow
@pytest.mark.parametrize(("contract", "side"), CASES, ids=IDS)
def test_every_edge_string_in_every_string_slot(contract: CompiledContract, side: str) -> None:
    """Deterministic: the edge cases in each string position of one valid payload."""
    payload = find(from_schema(_schema(contract, side)), lambda p: True)
    for path in _strings(payload):
        for edge in EDGE_STRINGS:
            _agree(contract, side, _replaced(payload, path, edge))


def test_non_finite_numbers_fall_back_to_the_reference() -> None:
    contract = load_travel_contracts()["search_flights"]
    payload = {
        "status": "ok",
        "options": [
            {"flight_id": "NH7", "assistance_status": "unknown", "price_usd": float("inf")}
        ],
        "source_timestamp": "2027-03-01T09:00:00Z",
    }
    assert not contract.fast_result.is_valid(payload)
    assert contract.result_validator.is_valid(payload)
    assert contract.check_result(payload) == ()  # the hot path decides as the reference does


# Per format: strings that are valid or nearly so, then mutated at the places formats break.
_DIGITS = "0123456789"
_EDGE_CHARS = '\n\r\t \u00a0\u09ea\u0663\uff11é-:.+%@/~#?[]TtZz0169_\\"<>'


def _format_seeds(form: str) -> st.SearchStrategy[str]:
    zones = st.sampled_from([UTC, timezone(timedelta(hours=9)), timezone(-timedelta(hours=8))])
    date_times = st.datetimes(timezones=zones).map(lambda d: d.isoformat())
    leap = st.from_regex(
        r"[0-9]{4}-12-31[Tt]((23:59)|(15:59)|(22:59)|(23:58)|(00:29)):60(\.[0-9]{1,3})?"
        r"([Zz]|[+-](00|08|23|01):(00|30|59))",
        fullmatch=True,
    )
    seeds: dict[str, st.SearchStrategy[str]] = {
        "date": st.dates().map(lambda d: d.isoformat())
        | st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", fullmatch=True),
        "date-time": date_times | leap,
        "time": date_times.map(lambda s: s[11:]) | leap.map(lambda s: s[11:]),
        "duration": st.from_regex(
            r"P([0-9]{1,3}[YMWD]){0,3}(T([0-9]{1,3}[HMS]){0,3})?", fullmatch=True
        ),
        "email": st.emails()
        | st.from_regex(
            r'("[a-z @.]{0,5}"|[a-z.~]{0,6})@([a-z0-9.-]{0,10}|\[(IPv6:)?[0-9a-f:.]{1,15}\])',
            fullmatch=True,
        ),
        "hostname": st.from_regex(
            r"(xn--)?[a-zA-Z0-9-]{0,10}(\.[a-zA-Z0-9-]{0,64}){0,3}", fullmatch=True
        )
        | st.sampled_from(["xn--9n2bp8q.xn--9t4b11yi5a", "xn--X", "XN--aa---o47jg78q", "a--b.com"]),
        "ipv4": st.ip_addresses(v=4).map(str) | st.from_regex(r"[0-9.]{0,16}", fullmatch=True),
        "ipv6": st.ip_addresses(v=6).map(str)
        | st.from_regex(r"[0-9a-f:]{0,20}(%eth0|/64|:1\.2\.3\.4|:01\.2\.3\.4)?", fullmatch=True),
        "uuid": st.uuids().map(str),
        "json-pointer": st.from_regex(r"(/([a-z~01]|~[0-2]){0,4}){0,3}", fullmatch=True),
        "relative-json-pointer": st.from_regex(
            r"[0-9]{0,3}#?(/([a-z~01]|~[0-2]){0,4}){0,3}", fullmatch=True
        ),
    }
    uris = st.from_regex(
        r"([a-z][a-z0-9+.-]{0,4}:)?(//([a-z]{0,3}@)?([a-z0-9.-]{0,8}|\[[0-9a-f:.]{1,12}\]|\[v1\.x\])"
        r"(:[0-9a-z]{0,3})?)?(/[a-zA-Z0-9%:@!$&'()*+,;= \\<>^`{|}-]{0,6}){0,3}"
        r"(\?[a-z=&/?]{0,6})?(#[a-z/?\\]{0,4})?",
        fullmatch=True,
    )
    seeds["uri"] = uris | st.sampled_from(["http://foo.bar/?baz=qux#quux", "urn:isbn:0451450523"])
    seeds["uri-reference"] = seeds["uri"] | st.sampled_from(["", "//", "./a:b", "1:b", "#f"])
    return seeds[form]


@st.composite
def _mutated(draw: st.DrawFn, seed: str) -> str:
    """One edit where formats break: an edge character put in, a character dropped or doubled."""
    char = draw(st.sampled_from(_EDGE_CHARS + _DIGITS))
    if not seed:
        return char
    at = draw(st.integers(0, len(seed)))
    edit = draw(st.sampled_from(["insert", "replace", "drop", "double", "newline"]))
    if edit == "insert":
        return seed[:at] + char + seed[at:]
    if edit == "replace":
        return seed[:at] + char + seed[at + 1 :]
    if edit == "drop":
        return seed[:at] + seed[at + 1 :]
    if edit == "double":
        return seed[:at] + seed[at : at + 1] * 2 + seed[at + 1 :]
    return seed + "\n"


def _around(form: str) -> st.SearchStrategy[str]:
    """Strings around `form`'s edges: seeds, and seeds with one edit."""
    seeds = _format_seeds(form)
    return seeds | seeds.flatmap(_mutated)


FORMATS = sorted(ASSERTED_FORMATS)


@pytest.mark.slow
@pytest.mark.parametrize("form", FORMATS)
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_asserted_format_decides_alike_on_its_edges(form: str, data: st.DataObject) -> None:
    """Both validators, compiled as the runner compiles them, on seeds and their mutations."""
    schema = {"type": "object", "properties": {"value": {"type": "string", "format": form}}}
    fast, reference = fast_validator(schema), reference_validator(schema)
    for text in (data.draw(_around(form)), data.draw(_around(form))):
        payload = {"value": text}
        expected = reference.is_valid(payload)
        effective = fast.is_valid(payload) or expected
        assert fast.is_valid(payload) == expected, f"{form}: {text!r} fast/reference disagree"
        assert effective == expected == ASSERTED_FORMATS[form](text), f"{form}: {text!r}"


def test_the_strings_around_each_format_hold_valid_and_invalid_ones() -> None:
    """The generators are not vacuous: for each format they reach both verdicts."""
    for form in FORMATS:
        check = ASSERTED_FORMATS[form]
        quick = settings(phases=[Phase.generate], database=None, max_examples=500)
        assert check(find(_around(form), check, settings=quick)), form
        invalid = find(_around(form), lambda text, check=check: not check(text), settings=quick)
        assert not check(invalid), form


@pytest.mark.slow
@pytest.mark.parametrize("form", sorted(PLAIN_PATTERNS))
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_plain_pattern_accepts_only_what_its_format_accepts(
    form: str, data: st.DataObject
) -> None:
    """The shortcut the compiled validator takes (`with_shortcuts`) never accepts a value the
    format's own function refuses: on the format's edge strings, and on strings of the
    pattern itself."""
    pattern = re.compile(PLAIN_PATTERNS[form].removeprefix("^").removesuffix("$"), re.ASCII)
    for text in (data.draw(_around(form)), data.draw(st.from_regex(pattern, fullmatch=True))):
        if pattern.fullmatch(text):
            assert ASSERTED_FORMATS[form](text), f"{form}: {text!r}"


def test_plainly_valid_values_are_settled_without_calling_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ordinary timestamp is accepted inside the compiled validator; the format function is
    asked only about what the plain pattern leaves out (a leap second, the 29th-31st)."""
    asked: list[str] = []
    check = ASSERTED_FORMATS["date-time"]

    def counted(text: str) -> bool:
        asked.append(text)
        return check(text)

    monkeypatch.setitem(formats_module.ASSERTED_FORMATS, "date-time", counted)  # type: ignore[arg-type]
    schema = {"type": "array", "items": {"type": "string", "format": "date-time"}}
    fast = fast_validator(schema)
    assert fast.is_valid(["2027-03-01T09:00:00Z", "2027-04-01T10:00:00.5+09:00"])
    assert asked == []
    assert fast.is_valid(["2027-03-31T09:00:00Z", "1998-12-31T23:59:60Z"])
    assert asked == ["2027-03-31T09:00:00Z", "1998-12-31T23:59:60Z"]
    assert not fast.is_valid(["2027-02-30T09:00:00Z"])
    assert not fast.is_valid(["2027-03-01T09:00:00Z\n"])
