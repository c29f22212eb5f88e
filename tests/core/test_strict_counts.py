"""Counts and amounts in fixture and policy files are numbers as written: `true` is not 1 and
`"8"` is not 8 (the service refuses both too). A file that says otherwise is refused, naming the
field, and nothing runs."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.base.errors import ConfigError, FixtureError
from runner.cli import main
from runner.core.budget import Limits
from runner.core.policy import Policy
from runner.harness.fixtures import parse_fixture
from tests.support.paths import FIXTURES
from tests.support.travel import FLIGHTS_OK, fixture_data


def _fixture(folder: Path, **changes: Any) -> Path:
    data = fixture_data(**changes)
    path = folder / "inline.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("value", [True, False, "8", 8.0])
@pytest.mark.parametrize("field", ["max_attempts", "max_model_steps", "max_tokens"])
def test_a_budget_count_that_is_not_an_integer_is_refused(
    tmp_path: Path, field: str, value: object
) -> None:
    with pytest.raises(FixtureError) as info:
        parse_fixture(_fixture(tmp_path, budget={field: value}))
    assert f"budget.{field}: Input should be a valid integer" in str(info.value)


@pytest.mark.parametrize("value", [True, "30"])
@pytest.mark.parametrize("field", ["max_seconds", "max_cost_usd"])
def test_a_budget_amount_that_is_not_a_number_is_refused(
    tmp_path: Path, field: str, value: object
) -> None:
    with pytest.raises(FixtureError, match=rf"budget\.{field}: Input should be a valid number"):
        parse_fixture(_fixture(tmp_path, budget={field: value}))


def test_a_budget_of_integers_loads_and_seconds_may_be_whole(tmp_path: Path) -> None:
    fixture = parse_fixture(_fixture(tmp_path, budget={"max_attempts": 3, "max_seconds": 20}))
    assert fixture.budget == Limits(max_attempts=3, max_seconds=20.0)


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"expect": {"terminal": "complete", "attempts": True}}, "expect.attempts"),
        ({"expect": {"terminal": "complete", "model_steps": "2"}}, "expect.model_steps"),
        ({"expect": {"terminal": "complete", "holds": False}}, "expect.holds"),
        ({"expect": {"terminal": "complete", "waits_s": [True]}}, "expect.waits_s.0"),
        ({"expect": {"terminal": "complete", "cost_usd": "0.1"}}, "expect.cost_usd"),
        (
            {"environment": {"search_flights": [{"respond": FLIGHTS_OK, "latency_s": "1"}]}},
            "environment.search_flights.0.latency_s",
        ),
        ({"retrieval": {"top_k": True}}, "retrieval.top_k"),
        ({"retrieval": {"max_offered": "4"}}, "retrieval.max_offered"),
        (
            {"model": [{"final": "x", "usage": {"input": True, "output": 1}}]},
            "model.0.usage.input",
        ),
        ({"approval": {"ttl_s": True}}, "approval.ttl_s"),
        ({"approval": {"continue_after_s": "60"}}, "approval.continue_after_s"),
    ],
)
def test_other_fixture_numbers_are_strict_too(
    tmp_path: Path, changes: dict[str, Any], where: str
) -> None:
    with pytest.raises(FixtureError, match=re.escape(f"{where}: Input should be")):
        parse_fixture(_fixture(tmp_path, **changes))


def test_the_cli_refuses_the_strangers_fixture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`max_attempts: true` ran as a budget of one attempt."""
    text = (FIXTURES / "read_only_success.yaml").read_text()
    assert "max_attempts: 8" in text
    path = tmp_path / "bool.yaml"
    path.write_text(text.replace("max_attempts: 8", "max_attempts: true"))
    db = tmp_path / "runs.sqlite"
    assert main(["run", str(path), "--db", str(db)]) == 2
    assert "budget.max_attempts: Input should be a valid integer" in capsys.readouterr().err
    if db.exists():  # nothing ran
        with sqlite3.connect(db) as connection:
            assert connection.execute("SELECT count(*) FROM runs").fetchone() == (0,)
        connection.close()


@pytest.mark.parametrize("value", ["true", "false", '"2"', "2.0"])
@pytest.mark.parametrize("field", ["max_retries", "corrections_per_tool"])
def test_a_policy_count_that_is_not_an_integer_is_refused(
    tmp_path: Path, field: str, value: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(f"{field}: {value}\n")
    with pytest.raises(ConfigError) as info:
        Policy.load(path)
    assert f"{field}: Input should be a valid integer" in str(info.value)


@pytest.mark.parametrize("value", ["true", '"1"'])
@pytest.mark.parametrize("field", ["initial_s", "multiplier", "max_s"])
def test_a_policy_backoff_that_is_not_a_number_is_refused(
    tmp_path: Path, field: str, value: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(f"backoff:\n  {field}: {value}\n")
    with pytest.raises(ConfigError, match=rf"backoff\.{field}: Input should be a valid number"):
        Policy.load(path)


def test_a_policy_of_numbers_loads(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("max_retries: 3\ncorrections_per_tool: 0\nbackoff: {initial_s: 1, max_s: 4}\n")
    policy = Policy.load(path)
    assert (policy.max_retries, policy.corrections_per_tool) == (3, 0)
    assert (policy.backoff.initial_s, policy.backoff.max_s) == (1.0, 4.0)


def test_a_retry_after_written_as_a_number_is_delay_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`retry_after: 2` was refused ("a valid string") while the README calls it delay-seconds;
    it now runs as `"2"` does: the rate-limited call waits 2 s once, then succeeds. A boolean
    is still refused."""
    limited = {"respond": {"status": "error", "error_code": "rate_limited", "retryable": True}}
    for value in (2, "2"):
        outcomes = [{**limited, "retry_after": value}, {"respond": FLIGHTS_OK}]
        path = _fixture(
            tmp_path,
            environment={"search_flights": outcomes},
            expect={"terminal": "complete", "waits_s": [2]},
        )
        assert main(["run", str(path), "--db", str(tmp_path / "runs.sqlite")]) == 0, value
    capsys.readouterr()
    path = _fixture(tmp_path, environment={"search_flights": [{**limited, "retry_after": True}]})
    with pytest.raises(FixtureError, match="retry_after"):
        parse_fixture(path)
