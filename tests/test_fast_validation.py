"""The hot path's compiled validator accepts and rejects exactly what jsonschema does.

For every contract (the travel ones and the benchmark's), on payloads generated from each schema,
on arbitrary JSON, on mutations of valid payloads, and on the format edge cases where the two
libraries are known to part ways (year 0000, leap seconds) or could (lower-case separators,
offsets, fractions, impossible dates).

One known difference is outside JSON itself: Python's infinities and NaN (which `json.loads`
accepts as `Infinity`/`NaN`). The compiled validator rejects them and jsonschema accepts them; the
hot path only ever trusts the compiled validator when it accepts, so it decides as jsonschema
does there too (`test_non_finite_numbers_fall_back_to_the_reference`).
"""

from __future__ import annotations

import copy
from datetime import UTC, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from bench.workloads import contracts as bench_contracts
from runner.contracts import CompiledContract, load_default_contracts

CONTRACTS: list[CompiledContract] = [
    *load_default_contracts().values(),
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


@pytest.mark.parametrize(("contract", "side"), CASES, ids=IDS)
def test_every_edge_string_in_every_string_slot(contract: CompiledContract, side: str) -> None:
    """Deterministic: the edge cases in each string position of one valid payload."""
    payload = find(from_schema(_schema(contract, side)), lambda p: True)
    for path in _strings(payload):
        for edge in EDGE_STRINGS:
            _agree(contract, side, _replaced(payload, path, edge))


def test_non_finite_numbers_fall_back_to_the_reference() -> None:
    contract = load_default_contracts()["search_flights"]
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
