"""The library never prints: an embedded run logs only where the application configured logging;
the CLI's --verbose still logs every transition."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import structlog

from runner.base._logging import run_logger
from runner.cli import main
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES
from tests.support.travel import make_fixture


def test_an_embedded_run_with_default_config_prints_nothing(
    contracts: ContractSet, capfd: pytest.CaptureFixture[str]
) -> None:
    structlog.reset_defaults()  # as in a fresh process: nobody configured structlog
    outcome = run_fixture(make_fixture(), contracts, MemoryStore())
    assert outcome.result.terminal.value == "complete"
    assert capfd.readouterr() == ("", "")


def test_stdlib_logging_configured_by_the_application_gets_the_transitions(
    contracts: ContractSet, caplog: pytest.LogCaptureFixture
) -> None:
    structlog.reset_defaults()
    with caplog.at_level(logging.INFO, logger="runner"):
        outcome = run_fixture(make_fixture(), contracts, MemoryStore())
    transitions = [r for r in caplog.records if "event='transition'" in r.getMessage()]
    assert len(transitions) == len(outcome.result.transitions)
    assert f"run_id='{outcome.result.run_id}'" in transitions[0].getMessage()


def test_a_run_nobody_listens_to_builds_no_events(contracts: ContractSet) -> None:
    """Logging costs nothing when off: the run asks once and never calls the logger."""
    structlog.reset_defaults()
    seen: list[str] = []

    class Spy(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    spy = Spy(level=logging.INFO)
    logger = logging.getLogger("runner")
    logger.addHandler(spy)  # a handler, but the level (WARNING) filters info out
    try:
        run_fixture(make_fixture(), contracts, MemoryStore())
    finally:
        logger.removeHandler(spy)
    assert seen == []
    assert not run_logger(run_id="r").is_enabled_for(logging.INFO)  # asked once per run


def test_cli_verbose_still_logs_every_transition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "runs.sqlite")
    assert main(["--verbose", "run", str(FIXTURES / "access_denied.yaml"), "--db", db]) == 0
    assert "transition" in capsys.readouterr().err
