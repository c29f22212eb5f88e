"""Replaying or grading a run with contracts that do not declare its tools is refused, named:
a run can only have started with contracts for every tool it was offered, so these are another
set, and replayed with them its calls would read as `unknown_tool` (a divergence that is not
the run's)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sqlite3
from pathlib import Path
from types import ModuleType

import pytest

from runner.base.errors import ConfigError
from runner.cli import main
from runner.proof.api import grade_run_sync, replay_run_sync
from runner.store import SqliteStore
from runner.store.base import RunListing
from runner.tools.contracts import load_contracts
from runner.travel import load_travel_contracts
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"


def _embedding_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("embed_service", EXAMPLES / "embed_service.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_ids(store: SqliteStore) -> list[str]:
    return [item.header.run_id for item in store.runs() if isinstance(item, RunListing)]


@pytest.fixture
def embedded_runs(tmp_path: Path) -> Path:
    """The embedding example's store: its runs were offered `lookup_order` and `refund_order`."""
    asyncio.run(_embedding_example().main(tmp_path))
    return tmp_path / "runs.sqlite"


def test_the_library_refuses_to_replay_or_grade_with_other_contracts(embedded_runs: Path) -> None:
    store = SqliteStore(embedded_runs, read_only=True)
    try:
        run_id = _run_ids(store)[0]
        travel = load_travel_contracts()
        for attempt in (replay_run_sync, grade_run_sync):
            with pytest.raises(ConfigError, match="lookup_order, refund_order"):
                attempt(store, run_id, travel)
        own = load_contracts(EXAMPLES / "contracts")
        assert replay_run_sync(store, run_id, own).identical
        assert grade_run_sync(store, run_id, own).passed
    finally:
        store.close()


def test_the_command_line_names_the_missing_contracts(
    embedded_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(embedded_runs)
    store = SqliteStore(embedded_runs, read_only=True)
    try:
        run_ids = _run_ids(store)
    finally:
        store.close()
    assert main(["replay", run_ids[0], "--db", db]) == 2
    assert (
        "give the contracts it ran with (on the command line: `runner --contracts DIR"
        in capsys.readouterr().err
    )
    assert main(["grade", "--stored", "--db", db]) == 2  # each run named, none graded
    out, err = capsys.readouterr()
    assert err.count("these contracts do not declare") == len(run_ids) == 3
    assert "overall: nothing graded" in out and "not graded: 3 runs" in out
    assert main(["grade", "--stored", "--db", db, "--json"]) == 2
    graded = json.loads(capsys.readouterr().out)
    assert graded["pass_k"] is False
    assert sorted(item["run_id"] for item in graded["not_graded"]) == sorted(run_ids)
    assert "lookup_order" in graded["not_graded"][0]["problem"]
    contracts = str(EXAMPLES / "contracts")
    assert main(["--contracts", contracts, "replay", run_ids[0], "--db", db]) == 0
    assert main(["--contracts", contracts, "grade", "--stored", "--db", db]) == 0


def test_runner_resume_of_an_embedded_run_says_where_it_can_be_resumed(
    embedded_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line resumes fixture runs only; an unfinished run of your own embedding is
    refused, pointing at `Engine.resume` (it said only "cannot be resumed here")."""
    store = SqliteStore(embedded_runs, read_only=True)
    try:
        run_id = _run_ids(store)[0]
    finally:
        store.close()
    conn = sqlite3.connect(embedded_runs)  # as if its process died before its end was stored
    with conn:
        conn.execute("UPDATE runs SET terminal = NULL, summary = NULL WHERE run_id = ?", (run_id,))
    conn.close()
    assert main(["resume", run_id, "--db", str(embedded_runs)]) == 2
    assert "with Engine.resume (its own tools, model and limits)" in capsys.readouterr().err
