import json
import logging

import pytest
import structlog
from freezegun import freeze_time

from runner.base import log
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.travel import make_fixture


@pytest.mark.slow
def test_json_transition_events_carry_run_fields_and_a_pinned_stamp(
    contracts: ContractSet, capsys: pytest.CaptureFixture[str]
) -> None:
    log.configure(json=True, level=logging.INFO)
    with freeze_time("2026-11-30T12:00:00Z", real_asyncio=True):
        outcome = run_fixture(make_fixture(), contracts, MemoryStore())
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    transitions = [e for e in events if e["event"] == "transition"]
    assert len(transitions) == len(outcome.result.transitions)
    first = transitions[0]
    assert first["run_id"] == outcome.result.run_id
    assert first["tenant"] == "optiverse" and first["fixture"] == "inline"
    assert first["timestamp"] == "2026-11-30T12:00:00Z"
    assert first["level"] == "info"


def test_warning_level_keeps_transitions_quiet(
    contracts: ContractSet, capsys: pytest.CaptureFixture[str]
) -> None:
    log.configure(json=True, level=logging.WARNING)
    run_fixture(make_fixture(), contracts, MemoryStore())
    assert capsys.readouterr().err == ""
    structlog.reset_defaults()


def test_a_run_logs_as_structlog_is_configured_when_it_starts(
    contracts: ContractSet, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run's logger follows a configuration made again, and a change made in place to the
    configured processors."""
    log.configure(json=True, level=logging.WARNING)
    run_fixture(make_fixture(), contracts, MemoryStore())  # at WARNING
    assert capsys.readouterr().err == ""
    log.configure(json=True, level=logging.INFO)
    outcome = run_fixture(make_fixture(), contracts, MemoryStore())
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [e["run_id"] for e in events if e["event"] == "transition"] == [
        outcome.result.run_id
    ] * len(outcome.result.transitions)
    processors = structlog.get_config()["processors"]
    processors.insert(0, lambda _logger, _name, event: {**event, "marked": True})
    run_fixture(make_fixture(), contracts, MemoryStore())
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert events and all(e["marked"] for e in events)
    structlog.reset_defaults()
    run_fixture(make_fixture(), contracts, MemoryStore())  # defaults: structlog's own output
    assert capsys.readouterr().err == ""
