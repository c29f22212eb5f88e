"""Shared test setup: no network, the repository's contracts, and a fixture builder."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from runner.contracts import ContractSet
from runner.travel import load_travel_contracts
from runner.travel.fixtures import Fixture

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail fast on any outbound connection: the fixtures' world is simulated."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("tests must not open network connections")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


@pytest.fixture(autouse=True)
def _quiet_logging() -> Iterator[None]:
    """Transitions log at info; keep test output to warnings, and undo what the CLI configures."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="session")
def contracts() -> ContractSet:
    return load_travel_contracts()


FLIGHT_ARGS: dict[str, Any] = {
    "origin": "SFO",
    "destination": "NRT",
    "date_start": "2027-04-01",
    "date_end": "2027-04-03",
    "accessibility": "wheelchair",
}

FLIGHTS_OK: dict[str, Any] = {
    "status": "ok",
    "options": [{"flight_id": "NH7", "assistance_status": "reported_available"}],
    "source_timestamp": "2027-03-01T09:00:00Z",
}


def make_fixture(**overrides: Any) -> Fixture:
    """A valid one-tool fixture, with any field replaced."""
    data: dict[str, Any] = {
        "name": "inline",
        "description": "built by a test",
        "task": "Find flights SFO to NRT.",
        "tenant": "optiverse",
        "principal": {"id": "agent-7", "scopes": ["travel.read"]},
        "tools": ["search_flights"],
        "environment": {"search_flights": [{"respond": FLIGHTS_OK}]},
        "model": [
            {"tool_calls": [{"name": "search_flights", "args": FLIGHT_ARGS}]},
            {"final": "NH7."},
        ],
    }
    data.update(overrides)
    return Fixture.model_validate(data)
