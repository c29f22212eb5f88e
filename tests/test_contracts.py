import json
from pathlib import Path
from typing import Any

import pytest

from runner.contracts import ContractSet, load_contracts, load_default_contracts
from runner.errors import ContractError
from runner.travel import SEMANTIC_RULES, TaskConstraints

from .conftest import FLIGHT_ARGS, FLIGHTS_OK, ROOT


def test_every_shipped_contract_compiles(contracts: ContractSet) -> None:
    assert sorted(contracts) == [
        "check_rail",
        "hold_room",
        "lookup_hold",
        "search_flights",
        "search_hotels",
    ]


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
    assert load_default_contracts() is load_default_contracts()
