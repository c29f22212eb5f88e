"""`runner fixtures check`: a fixture writer learns what the runner would refuse before running."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.cli import main
from runner.cli._fixture_check import check_script
from runner.harness.fixtures import load_fixture
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES
from tests.support.travel import FLIGHT_ARGS, FLIGHTS_OK, make_fixture

FIXTURE = """\
name: wrong_names
description: A fixture written with the wrong argument names.
task: Find flights SFO to NRT.
tenant: optiverse
principal: {{id: agent-7, scopes: [travel.read]}}
tools: [search_flights]
environment:
  search_flights:
    - respond: {{status: ok, options: [], source_timestamp: "yesterday"}}
model:
  - tool_calls: [{{name: search_flights, args: {args}}}]
  - final: "done"
expect: {{terminal: {terminal}}}
"""
WRONG = (
    '{from: SFO, to: NRT, date_start: "2027-04-01", date_end: "2027-04-03", accessibility: none}'
)


def write(tmp_path: Path, *, args: str = WRONG, terminal: str = "complete") -> Path:
    path = tmp_path / "wrong_names.yaml"
    path.write_text(FIXTURE.format(args=args, terminal=terminal))
    return path


def test_wrong_argument_names_and_a_bad_response_are_warned(
    tmp_path: Path, contracts: ContractSet
) -> None:
    findings = check_script(load_fixture(write(tmp_path), contracts), contracts)
    assert [(f.where, f.result_class, f.anticipated) for f in findings] == [
        ("model[0].tool_calls[0] search_flights", "invalid_arguments", False),
        ("environment.search_flights[0]", "malformed_result", False),
    ]
    assert findings[0].detail == "from: unexpected argument"
    assert "source_timestamp: 'yesterday' is not a 'date-time'" in findings[1].detail


def test_the_cli_warns_names_the_file_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path)
    assert main(["fixtures", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert (
        f"{path}: warning: model[0].tool_calls[0] search_flights: would be invalid_arguments: "
        "from: unexpected argument"
    ) in out
    assert "1 fixtures checked: 2 warnings, 0 notes (scripted on purpose), 0 unreadable" in out


def test_the_shipped_fixtures_script_their_refusals_on_purpose(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["fixtures", "check", str(FIXTURES)]) == 0
    out = capsys.readouterr().out
    assert "warning:" not in out
    assert "tenant_in_arguments.yaml: note: model[0].tool_calls[0] search_flights" in out
    assert "0 warnings, 8 notes" in out


def test_an_unreadable_fixture_is_named_the_others_still_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    assert main(["fixtures", "check", str(bad), str(good)]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and str(bad) in captured.err
    assert "2 fixtures checked: 2 warnings, 0 notes (scripted on purpose), 1 unreadable" in (
        captured.out
    )


def test_a_path_that_is_not_there_is_named_the_others_still_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It stopped at the missing path: one error line, no tally, the other files unchecked. A
    folder with no fixtures beside a good file is no error (as for `runner run`)."""
    good = write(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["fixtures", "check", str(empty), str(good)]) == 1  # good's warnings
    capsys.readouterr()
    missing = tmp_path / "missing.yaml"
    assert main(["fixtures", "check", str(good), str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: fixture {missing}: no such file or folder\n"
    assert "2 fixtures checked: 2 warnings, 0 notes (scripted on purpose), 1 unreadable" in (
        captured.out
    )


@pytest.mark.parametrize("state", ["plan", "call", "observe"])
def test_expect_terminal_accepts_only_terminal_states(
    tmp_path: Path, state: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, terminal=state)
    assert main(["fixtures", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: fixture {path}: expect.terminal: must be a terminal state "
        f"(complete, abstain, escalate, unknown), got '{state}'\n"
    )
    assert main(["run", str(path), "--db", str(tmp_path / "r.sqlite")]) == 2


def test_an_unquoted_yaml_date_is_named_not_a_crash(tmp_path: Path, contracts: ContractSet) -> None:
    args = '{origin: SFO, destination: NRT, date_start: 2027-04-01, date_end: "2027-04-03", ' + (
        "accessibility: none}"
    )
    findings = check_script(load_fixture(write(tmp_path, args=args), contracts), contracts)
    assert findings[0].result_class == "invalid_arguments"
    assert findings[0].detail == (
        "arguments are not plain JSON: /date_start: date is not a JSON value "
        "(YAML reads an unquoted date or time as one: quote it)"
    )


NEAR_VALUES: dict[str, list[Any]] = {
    "origin": ["SFO", "XXX", "sfo", 7, None, date(2027, 4, 1)],
    "destination": ["NRT", "SFO", "NRTX"],
    "date_start": ["2027-04-01", "2027-03-01", "2027-02-30", date(2027, 4, 1)],
    "date_end": ["2027-04-03", "2027-03-30", "2027-05-30"],
    "accessibility": ["none", "wheelchair", "some"],
    "max_results": [1, 10, 11, "3"],
    "from": ["SFO"],
    "tenant": ["acme"],
}
RESPONSES: list[Any] = [
    FLIGHTS_OK,
    {**FLIGHTS_OK, "source_timestamp": "yesterday"},
    {**FLIGHTS_OK, "source_timestamp": datetime(2027, 3, 1, 9, tzinfo=UTC)},
    {"status": "error", "error_code": "rate_limited", "retryable": True},
    {"status": "ok"},
    "",
]


@settings(max_examples=60, deadline=None)
@given(
    changes=st.lists(st.sampled_from(sorted(NEAR_VALUES)), max_size=3, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({k: st.sampled_from(NEAR_VALUES[k]) for k in keys})
    ),
    response=st.sampled_from(RESPONSES),
    scopes=st.sampled_from([["travel.read"], ["travel.book"]]),
)
def test_the_check_says_what_the_run_records(
    changes: dict[str, Any], response: Any, scopes: list[str], contracts: ContractSet
) -> None:
    """Whatever the script, the check's verdict on the first call is the class the run records."""
    arguments = {**FLIGHT_ARGS, **changes}
    fixture = make_fixture(
        principal={"id": "agent-7", "scopes": scopes},
        environment={"search_flights": [{"respond": response}]},
        model=[
            {"tool_calls": [{"name": "search_flights", "args": arguments}]},
            {"final": "done"},
        ],
        constraints={"earliest": "2027-03-25", "latest": "2027-04-15"},
    )
    findings = check_script(fixture, contracts)
    recorded = next(
        r.result_class
        for r in run_fixture(fixture, contracts, MemoryStore()).result.transitions
        if r.trigger == "classify"
    )
    call_findings = [f.result_class for f in findings if f.where.startswith("model[0]")]
    response_findings = [f.result_class for f in findings if f.where.startswith("environment")]
    if call_findings:
        assert recorded == call_findings[0]
    elif response_findings:
        assert recorded == response_findings[0]
    else:
        assert recorded in {"ok", "empty", "rate_limited"}
