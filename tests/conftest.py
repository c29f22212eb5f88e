"""Shared test setup: no network, nothing written into the checkout, the travel contracts, and a
fixture builder."""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

from runner.cli import main
from runner.harness.fixtures import Fixture
from runner.tools.contracts import ContractSet
from runner.travel import load_travel_contracts

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

# Hypothesis keeps its caches in `./.hypothesis`, inside the checkout: they go to the system's temp
# folder instead, and there is no example database (a failure prints its example and seed, which
# reproduce it).
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "runner-tests-hypothesis")
settings.register_profile("runner", database=None)
settings.load_profile("runner")

_SCRATCH = frozenset(
    {".git", ".venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "build"}
)
"""What the tools around the tests keep in the checkout (all ignored by git), not the tests."""


def _checkout_files() -> set[Path]:
    found: set[Path] = set()
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [
            name for name in subfolders if name not in _SCRATCH and not name.endswith(".egg-info")
        ]
        found.update(Path(folder, name) for name in files)
    return found


_BEFORE = _checkout_files()
"""Taken when this file is imported: before collection, which may write too."""


@pytest.fixture(scope="session", autouse=True)
def _nothing_written_into_the_checkout() -> Iterator[None]:
    """No test leaves a file in the working tree (a `./runs.sqlite`, a log, a world, a cache)."""
    yield
    new = sorted(str(path.relative_to(ROOT)) for path in _checkout_files() - _BEFORE)
    assert not new, f"tests wrote into the checkout: {', '.join(new)}"


@pytest.fixture(autouse=True)
def _run_from_elsewhere(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test runs in a scratch directory, so a default path (`runs.sqlite`, `--log x.jsonl`)
    lands there and never in the user's checkout."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail fast on any outbound connection: the fixtures' world is simulated."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("tests must not open network connections")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


def allow_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lift the no-network guard for loopback alone (tests of real local servers)."""
    monkeypatch.undo()  # drop the blanket guard, then allow 127.0.0.1, localhost and ::1
    original = socket.socket.connect

    def loopback_only(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if host not in {"127.0.0.1", "localhost", "::1"}:
            raise AssertionError(f"tests may only connect to loopback, not {host}")
        return original(self, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)


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

HOLD_ARGS: dict[str, Any] = {
    "hotel_id": "H-SHIBA",
    "check_in": "2027-04-02",
    "check_out": "2027-04-06",
    "guests": 4,
    "room_type": "accessible",
}
"""A valid `hold_room` call (the write the exactly-once tests make)."""

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


def stored_run_with_a_forged_summary(db: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run `hold_reconcile_inconclusive` (it ends `unknown`) into `db` through the CLI, then edit
    only its summary row to say `complete (model_final)`; the run id."""
    fixture = str(FIXTURES / "hold_reconcile_inconclusive.yaml")
    assert main(["run", fixture, "--db", str(db), "--json"]) == 0
    run_id: str = json.loads(capsys.readouterr().out)["run_id"]
    with sqlite3.connect(db) as connection:
        connection.execute(
            "UPDATE runs SET terminal = 'complete', summary = json_set(summary, "
            "'$.terminal', 'complete', '$.reason', 'model_final') WHERE run_id = ?",
            (run_id,),
        )
    connection.close()
    return run_id


# The throwaway PostgreSQL cluster (started only when a test asks for it).
from tests.pg import pg_cluster, pg_url  # noqa: E402, F401
