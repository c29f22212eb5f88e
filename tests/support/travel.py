"""The travel world's calls and answers the tests make, and a builder of one-tool fixtures."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runner import RunSpec
from runner.cli import main
from runner.harness.fixtures import Fixture
from runner.record.spec import Principal
from tests.support.paths import FIXTURES

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


def fixture_data(**overrides: Any) -> dict[str, Any]:
    """A valid one-tool fixture as a file holds it (not validated yet), any field replaced."""
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
    return data


def make_fixture(**overrides: Any) -> Fixture:
    """A valid one-tool fixture, with any field replaced."""
    return Fixture.model_validate(fixture_data(**overrides))


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


def flight_spec(**changes: Any) -> RunSpec:
    return RunSpec(
        task="Find flights SFO to NRT.",
        tenant="optiverse",
        principal=Principal(id="agent-7", scopes=frozenset({"travel.read"})),
        tools=("search_flights",),
        seed=1,
        **changes,
    )
