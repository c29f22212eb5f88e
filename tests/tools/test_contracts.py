import collections.abc
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from runner.base.errors import ContractError
from runner.tools._validators import fast_validator
from runner.tools.contracts import (
    Contract,
    ContractSet,
    compile_contract,
    load_contracts,
)
from runner.travel import SEMANTIC_RULES, TaskConstraints, load_travel_contracts
from tests.support.paths import ROOT
from tests.support.travel import FLIGHT_ARGS, FLIGHTS_OK


def test_every_shipped_contract_compiles(contracts: ContractSet) -> None:
    """The contract files, the 56 catalogue tools made in code, and the child-run tool with its
    lookup: the travel world's whole set."""
    files = sorted(load_contracts(ROOT / "contracts"))
    assert files == [
        "cancel_all_holds",
        "check_rail",
        "hold_room",
        "lookup_hold",
        "search_flights",
        "search_hotels",
    ]
    assert set(files) < set(contracts) and len(contracts) == 6 + 56 + 2
    assert {"research_trip", "research_trip_lookup", "search_charter_flights"} <= set(contracts)


def test_bad_date_is_rejected(contracts: ContractSet) -> None:
    problem = contracts["search_flights"].check_arguments(
        {**FLIGHT_ARGS, "date_start": "2027-02-30"}, {}
    )
    assert problem is not None and problem.field == "date_start"
    assert "date" in problem.reason


def test_bad_date_time_is_rejected(contracts: ContractSet) -> None:
    errors = contracts["search_flights"].check_result(
        {**FLIGHTS_OK, "source_timestamp": "2027-03-01 9am"}
    )
    assert errors and "source_timestamp" in errors[0] and "date-time" in errors[0]


def test_date_time_without_offset_is_rejected(contracts: ContractSet) -> None:
    errors = contracts["search_flights"].check_result(
        {**FLIGHTS_OK, "source_timestamp": "2027-03-01T09:00:00"}
    )
    assert errors


def test_extra_property_is_rejected(contracts: ContractSet) -> None:
    problem = contracts["search_flights"].check_arguments({**FLIGHT_ARGS, "cabin": "first"}, {})
    assert problem is not None and problem.field == "cabin" and "unexpected" in problem.reason


def test_extra_result_property_is_rejected(contracts: ContractSet) -> None:
    assert contracts["search_flights"].check_result({**FLIGHTS_OK, "debug": True})


def test_valid_arguments_and_result_pass(contracts: ContractSet) -> None:
    assert contracts["search_flights"].check_arguments(FLIGHT_ARGS, {}) is None
    assert contracts["search_flights"].check_result(FLIGHTS_OK) == ()


def test_missing_argument_is_named(contracts: ContractSet) -> None:
    args = {k: v for k, v in FLIGHT_ARGS.items() if k != "destination"}
    problem = contracts["search_flights"].check_arguments(args, {})
    assert problem is not None and problem.field == "destination"


@pytest.mark.parametrize("name", ["tenant", "credentials", "api_key", "operation_key"])
def test_runtime_names_are_never_model_arguments(contracts: ContractSet, name: str) -> None:
    problem = contracts["search_flights"].check_arguments({**FLIGHT_ARGS, name: "x"}, {})
    assert problem is not None and problem.field == name and "runtime" in problem.reason


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"date_start": "2027-04-05", "date_end": "2027-04-01"}, "after its end"),
        ({"origin": "XXX"}, "unknown airport code XXX"),
        ({"destination": "SFO"}, "same airport"),
        ({"date_end": "2027-05-01"}, "after the authorized window"),
    ],
)
def test_semantic_rules_run_after_the_schema(
    contracts: ContractSet, change: dict[str, Any], fragment: str
) -> None:
    context = {
        "task": TaskConstraints.model_validate({"earliest": "2027-03-25", "latest": "2027-04-15"})
    }
    problem = contracts["search_flights"].check_arguments({**FLIGHT_ARGS, **change}, context)
    assert problem is not None and fragment in problem.reason


def _write(folder: Path, name: str, **changes: Any) -> Path:
    data = json.loads((ROOT / "contracts" / "search_flights.json").read_text())
    data.update(name=name, **changes)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        (
            {
                "input_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"a": {"type": "nope"}},
                }
            },
            "input_schema",
        ),
        ({"input_schema": {"type": "object", "properties": {}}}, "additionalProperties"),
        (
            {
                "input_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"tenant": {"type": "string"}},
                }
            },
            "only the runtime supplies",
        ),
        ({"result_schema": {"$ref": "#/$defs/missing"}}, "unresolvable"),
        ({"side_effect": "maybe"}, "side_effect"),
        ({"side_effect": "write"}, "reconcile_with"),
        ({"timeout_s": 0}, "timeout_s"),
    ],
)
def test_a_contract_that_does_not_compile_is_one_clear_error(
    tmp_path: Path, changes: dict[str, Any], fragment: str
) -> None:
    _write(tmp_path, "broken_tool", **changes)
    with pytest.raises(ContractError) as info:
        load_contracts(tmp_path, SEMANTIC_RULES)
    message = str(info.value)
    assert fragment in message and "broken_tool.json" in message and "\n" not in message


def test_not_json_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{\n  "name": "bad",\n  oops\n}')
    with pytest.raises(ContractError, match="line 3"):
        load_contracts(tmp_path)


def test_name_must_match_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "one_tool")
    path.rename(tmp_path / "other_tool.json")
    with pytest.raises(ContractError, match="must match the file name"):
        load_contracts(tmp_path)


def test_contracts_are_compiled_once_per_process() -> None:
    assert load_travel_contracts() is load_travel_contracts()


# Issue 17: validation that keeps its word.


def _with_string(tmp_path: Path, name: str, **string_schema: Any) -> Path:
    """A contract whose arguments are one string `value` with the given keywords."""
    return _write(
        tmp_path,
        name,
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"value": {"type": "string", **string_schema}},
        },
    )


def _value_problem(tmp_path: Path, value: str, **string_schema: Any) -> str | None:
    _with_string(tmp_path, "probe_tool", **string_schema)
    problem = load_contracts(tmp_path)["probe_tool"].check_arguments({"value": value}, {})
    return None if problem is None else f"{problem.field}: {problem.reason}"


@pytest.mark.parametrize(
    ("form", "value"),
    [
        ("uri", "http:// shouldfail.com"),
        ("uri", "https://example.org/foobar\\.txt"),
        ("uri", "https://example.org/foobar<>.txt"),
        ("uri", "https://example.org/foobar®.txt"),
        ("email", "@example.com"),
        ("email", "user1@oceania.org, user2@oceania.org"),
        ("email", '"Winston Smith" <winston.smith@recdep.minitrue> (Records Department)'),
        ("email", "joe bloggs@example.com"),
        ("hostname", "example.com\n"),
        ("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d16380\n"),
        ("ipv6", "fe80::a%eth1"),
    ],
)
def test_every_asserted_format_is_really_checked(tmp_path: Path, form: str, value: str) -> None:
    """Issue 17.1: these passed before, because jsonschema skipped the format or checked "@"."""
    problem = _value_problem(tmp_path, value, format=form)
    assert problem is not None and problem.startswith("value:") and form in problem


@pytest.mark.parametrize(
    ("form", "value"),
    [
        ("uri", "https://example.org/a%20b?q=1#frag"),
        ("email", '"joe@bloggs"@example.com'),
        ("email", "joe.bloggs@[IPv6:::1]"),
        ("hostname", "xn--9n2bp8q.xn--9t4b11yi5a"),
    ],
)
def test_valid_values_of_asserted_formats_pass(tmp_path: Path, form: str, value: str) -> None:
    assert _value_problem(tmp_path, value, format=form) is None


@pytest.mark.parametrize("form", ["idn-email", "iri", "uri-template", "regex", "int64", "color"])
def test_a_format_the_runner_cannot_assert_is_refused_at_load(tmp_path: Path, form: str) -> None:
    """Issue 17.1: never accepted silently; the message names the format and where it is."""
    _with_string(tmp_path, "odd_format", format=form)
    with pytest.raises(ContractError) as info:
        load_contracts(tmp_path)
    message = str(info.value)
    assert f"format {form!r} cannot be asserted" in message
    assert "odd_format.json" in message and "/properties/value" in message and "\n" not in message


def test_a_property_named_format_is_not_a_format(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "named_format",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"format": {"enum": ["pdf", "html"]}},
        },
    )
    assert load_contracts(tmp_path)["named_format"].check_arguments({"format": "pdf"}, {}) is None


def test_a_date_time_with_a_trailing_newline_is_rejected(contracts: ContractSet) -> None:
    """Issue 17.2: `$` in Python's regex also matches before a final newline."""
    errors = contracts["search_flights"].check_result(
        {**FLIGHTS_OK, "source_timestamp": "1963-06-19T08:30:06Z\n"}
    )
    assert errors and "source_timestamp" in errors[0] and "date-time" in errors[0]


@pytest.mark.parametrize(
    "stamp", ["1998-12-31T23:59:60Z", "1998-12-31T15:59:60.123-08:00", "1998-12-31t23:59:60z"]
)
def test_a_leap_second_is_a_valid_date_time(contracts: ContractSet, stamp: str) -> None:
    """Issue 17.3: RFC 3339 allows second 60 in the last minute of the day (UTC)."""
    assert contracts["search_flights"].check_result({**FLIGHTS_OK, "source_timestamp": stamp}) == ()


@pytest.mark.parametrize(
    "stamp", ["1998-12-31T23:59:61Z", "1998-12-31T23:58:60Z", "1998-12-31T23:59:60-08:00"]
)
def test_second_60_outside_the_last_utc_minute_is_rejected(
    contracts: ContractSet, stamp: str
) -> None:
    assert contracts["search_flights"].check_result({**FLIGHTS_OK, "source_timestamp": stamp})


@pytest.mark.parametrize("where", ["pattern", "patternProperties"])
def test_a_pattern_python_cannot_compile_is_refused_at_load(tmp_path: Path, where: str) -> None:
    """Issue 17.4: refused when the contract loads, not raised while validating a call."""
    value: dict[str, Any] = {"type": "string"}
    if where == "pattern":
        value["pattern"] = "^\\p{Digit}+$"
    else:
        value = {"type": "object", "patternProperties": {"^\\p{Digit}+$": {"type": "string"}}}
    _write(
        tmp_path,
        "digits_tool",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"value": value},
        },
    )
    with pytest.raises(ContractError) as info:
        load_contracts(tmp_path)
    message = str(info.value)
    assert "digits_tool.json" in message and "pattern '^\\\\p{Digit}+$' is refused" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("pattern", "value"),
    [
        ("^[A-Z]{3}$", "SFO\n"),  # `$` is the end of the string
        ("^\\d+$", "১২"),  # `\d` is [0-9]
        ("^\\w+$", "école"),  # `\w` is [A-Za-z0-9_]
        ("^.$", "\r"),  # `.` stops at line terminators
        ("^\\s$", "\x1c"),  # `\s` is ECMA-262 white space, not Python's
    ],
)
def test_patterns_mean_what_ecma_262_says(tmp_path: Path, pattern: str, value: str) -> None:
    assert _value_problem(tmp_path, value, pattern=pattern) is not None


def test_an_ecma_white_space_matches_backslash_s(tmp_path: Path) -> None:
    assert _value_problem(tmp_path, "\u00a0", pattern="^\\s$") is None


def test_pattern_properties_and_additional_properties_agree_on_ecma_meaning(
    tmp_path: Path,
) -> None:
    _write(
        tmp_path,
        "keyed_tool",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "tags": {
                    "type": "object",
                    "patternProperties": {"^\\wcole$": True},
                    "additionalProperties": False,
                }
            },
        },
    )
    contract = load_contracts(tmp_path)["keyed_tool"]
    assert contract.check_arguments({"tags": {"ecole": 1}}, {}) is None
    assert contract.check_arguments({"tags": {"école": 1}}, {}) is not None
    assert contract.check_arguments({"tags": {"ecole\n": 1}}, {}) is not None


@pytest.mark.parametrize("pattern", ["(?i)^[a-z]{3}$", "(?s)^a.b$", "(?x) a", "(?u)^\\w$", "(?L)a"])
def test_a_pattern_with_inline_global_flags_is_refused_at_load(
    tmp_path: Path, pattern: str
) -> None:
    """Issue 17.4: Python's global flags (not ECMA-262) compiled alone but not in the ASCII-scoped
    form the reference uses, so they raised `re.error` (or a bare ValueError) mid-validation."""
    _write(
        tmp_path,
        "flags_tool",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"value": {"type": "string", "pattern": pattern}},
        },
    )
    with pytest.raises(ContractError) as info:
        load_contracts(tmp_path)
    assert "flags_tool.json" in str(info.value) and "is refused" in str(info.value)


@pytest.mark.parametrize(
    ("hidden", "refused"),
    [
        ({"type": "string", "format": "idn-email"}, "format 'idn-email' cannot be asserted"),
        ({"type": "string", "pattern": "^\\p{Lu}{3}$"}, "is refused"),
        ({"type": "string", "pattern": "(?i)^[a-z]{3}$"}, "is refused"),
    ],
)
@pytest.mark.parametrize("keyword", ["x-hidden", "contentSchema"])
def test_a_format_or_pattern_reached_only_through_a_ref_is_checked_at_load(
    tmp_path: Path, hidden: dict[str, Any], refused: str, keyword: str
) -> None:
    """A `$ref` may point into any keyword, an unknown one or an annotation such as
    `contentSchema` included: the walk skipped those, so an unassertable format there was
    accepted silently and a pattern there raised PatternRefused while validating a call."""
    _write(
        tmp_path,
        "hidden_tool",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"value": {"$ref": f"#/{keyword}"}},
            keyword: hidden,
        },
    )
    with pytest.raises(ContractError) as info:
        load_contracts(tmp_path)
    assert "hidden_tool.json" in str(info.value) and refused in str(info.value)
    assert f"/{keyword}" in str(info.value)


def test_pattern_properties_reached_through_a_ref_mean_what_ecma_262_says(tmp_path: Path) -> None:
    """Keys under an unknown keyword were left as Python read them: `$` matched before "\\n"."""
    _write(
        tmp_path,
        "hidden_tool",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"value": {"$ref": "#/x-hidden"}},
            "x-hidden": {
                "type": "object",
                "patternProperties": {"^[a-z]+$": {"type": "string"}},
                "additionalProperties": False,
            },
        },
    )
    compiled = load_contracts(tmp_path)["hidden_tool"]
    assert compiled.check_arguments({"value": {"abc": "x"}}, {}) is None
    assert compiled.check_arguments({"value": {"abc\n": "x"}}, {}) is not None


def test_iterating_a_contract_set_is_typed_for_a_users_mypy(contracts: ContractSet) -> None:
    """`ContractSet.__iter__` was unannotated: a user's `mypy --strict` saw `Any` (a function
    returning `next(iter(contracts))` as `str` failed `no-any-return`)."""
    assert typing.get_type_hints(ContractSet.__iter__)["return"] == collections.abc.Iterator[str]
    assert sorted(contracts) == sorted(contracts.keys())


def test_an_approval_summary_names_only_arguments_and_requires_approval_only_writes(
    contracts: ContractSet,
) -> None:
    base = contracts["hold_room"].contract.model_dump()
    with pytest.raises(ContractError, match="names hotel"):
        compile_contract(Contract(**{**base, "approval_summary": "Hold {hotel}"}), "x", None)
    with pytest.raises(ContractError, match=r"names hotel_id\.__class__"):
        compile_contract(
            Contract(**{**base, "approval_summary": "{hotel_id.__class__}"}), "x", None
        )
    read = contracts["search_hotels"].contract.model_dump()
    with pytest.raises(ContractError, match="writes only"):
        compile_contract(Contract(**{**read, "requires_approval": True}), "x", None)


def test_the_compiled_validator_reads_a_dot_as_ecma_262_does_whatever_its_version() -> None:
    """jsonschema-rs 0.60 (what schemathesis pins) let `.` match `\\r`: the fast path accepted
    what the reference refused. Only a bare `.` outside a class is spelled out."""
    from runner.tools._patterns import ecma_dots  # noqa: PLC0415  # a private helper, tested here

    assert ecma_dots(r"^a.\.[.]$") == "^a[^\n\r\u2028\u2029]\\.[.]$"
    for value in ("\r", "\u2028", "\u2029", "\n"):
        assert fast_validator({"type": "string", "pattern": "^.$"}).is_valid(value) is False
    assert fast_validator({"type": "string", "pattern": "^.$"}).is_valid("x")


def test_a_huge_value_is_quoted_briefly_in_what_breaks_the_schema(contracts: ContractSet) -> None:
    """jsonschema quotes the offending value whole: eleven options of 100,000 characters each
    (one more than `maxItems`) made one 1.1 MB message, shown to the model past `render_limit`
    and kept in every record of the call. Each message is cut to about 300 characters, saying
    how long it was."""
    search = contracts["search_flights"]
    options = [{"flight_id": "X" * 100_000, "assistance_status": "unknown"}] * 11
    payload = {**FLIGHTS_OK, "options": options}
    errors = search.check_result(payload)
    assert errors and all(len(error) <= 400 for error in errors), [len(e) for e in errors]
    assert any("characters in all" in error for error in errors), errors
    problem = search.check_arguments({**FLIGHT_ARGS, "origin": "S" * 100_000}, {})
    assert problem is not None and len(problem.reason) <= 400, problem
