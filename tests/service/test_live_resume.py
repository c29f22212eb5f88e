"""A live run killed midway and resumed (as a `runner worker` resumes a queued live run whose
worker died, or `runner resume` does) goes on in real time: on the system clock, never the world
fixture's fake clock (which a stranger found a live run keeping once before)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runner.cli import main
from runner.store import SqliteStore
from tests.support.crash_sweep import crash_after_the_hold, live_args, llm, resume
from tests.support.llm_server import RecordedLLMServer
from tests.support.paths import FIXTURES
from tests.support.service_harness import loopback

pytestmark = pytest.mark.slow

__all__ = ["llm", "loopback"]


def test_a_resumed_live_run_keeps_the_system_clock_and_replays_identical(
    tmp_path: Path, llm: RecordedLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the resumed transitions were stamped 2027-03-01 (the fixture's clock start)."""
    run_id = crash_after_the_hold(tmp_path, live_args(llm))
    code, _, err = resume(tmp_path, run_id)
    assert code == 0, err
    db = tmp_path / "run" / "runs.sqlite"
    store = SqliteStore(db, read_only=True)
    try:
        header, records = store.header(run_id), store.transitions(run_id)
    finally:
        store.close()
    assert header is not None
    times = [record.time for record in records]
    assert times == sorted(times)  # never back in time at the resume
    assert header.started_at <= times[0] and times[-1] <= datetime.now(UTC)
    assert times[-1] - header.started_at < timedelta(minutes=10)
    capsys.readouterr()
    assert main(["replay", run_id, "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["identical"] is True


@pytest.mark.usefixtures("loopback")
def test_a_live_run_approved_from_the_command_line_goes_on_with_its_live_model(
    tmp_path: Path,
    llm: RecordedLLMServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: `runner approve` continued a live run with the fixture's script (holding for four
    guests where the live model held for three), on the fixture's fake clock."""
    monkeypatch.setenv("RUNNER_APPROVAL_SECRET", "the-runtime-secret-for-the-tests-0001")
    db = tmp_path / "runs.sqlite"
    fixture = str(FIXTURES / "approval" / "hold_approved.yaml")
    assert main(["run", fixture, "--db", str(db), "--json", *live_args(llm)]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    asked = len(llm.requests[("openai", "live-hold")])
    approve = ["approve", run_id, "hold_room", "--approver", "alice", "--db", str(db), "--json"]
    assert main(approve) == 0
    continued = json.loads(capsys.readouterr().out)
    assert (continued["terminal"], continued["holds"]) == ("complete", 1)
    assert continued["answer"] == "Held a room at Shiba Park Hotel."  # the live model's
    assert len(llm.requests[("openai", "live-hold")]) == asked + 1
    holds = [t for t in continued["transitions"] if t["tool"] == "hold_room" and t["args"]]
    assert holds and all(t["args"]["guests"] == 3 for t in holds)  # the live model's hold
    started = datetime.fromisoformat(continued["transitions"][-1]["time"])
    assert abs(datetime.now(UTC) - started) < timedelta(minutes=10)  # the system clock
