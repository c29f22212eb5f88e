"""`runner approvals`, `approve`, `deny`, `continue` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli import main
from runner.store import SqliteStore

from .conftest import FIXTURES

SECRET = "the-runtime-secret-for-the-tests-0001"


def _waiting(db: Path, capsys: pytest.CaptureFixture[str], name: str = "hold_approved") -> str:
    assert (
        main(["run", str(FIXTURES / "approval" / f"{name}.yaml"), "--db", str(db), "--json"]) == 0
    )
    return str(json.loads(capsys.readouterr().out)["run_id"])


def test_list_then_approve_commits_one_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNER_APPROVAL_SECRET", SECRET)
    db = tmp_path / "runs.sqlite"
    run_id = _waiting(db, capsys)
    assert main(["approvals", "--db", str(db), "--json"]) == 0
    (pending,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert pending["run_id"] == run_id and pending["tool"] == "hold_room"
    assert (
        pending["summary"]
        == "Hold 1 accessible room at H-SHIBA, 2027-04-02 to 2027-04-06, 4 guests"
    )
    assert "token" not in json.dumps(pending)
    code = main(["approve", run_id, "hold_room", "--approver", "alice", "--db", str(db), "--json"])
    continued = json.loads(capsys.readouterr().out)
    assert code == 0 and continued["terminal"] == "complete" and continued["holds"] == 1
    assert continued["expect"]["passed"] is True
    assert SECRET not in json.dumps(continued)
    assert main(["approvals", "--db", str(db)]) == 0
    assert capsys.readouterr().out.strip() == "0 pending"
    assert main(["continue", run_id, "--db", str(db)]) == 0  # already continued: reported
    assert "which ended complete" in capsys.readouterr().out


def test_deny_ends_the_continuation_abstain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNER_APPROVAL_SECRET", SECRET)
    db = tmp_path / "runs.sqlite"
    run_id = _waiting(db, capsys, "hold_denied")
    code = main(["deny", run_id, "--approver", "bob", "--note", "no", "--db", str(db), "--json"])
    continued = json.loads(capsys.readouterr().out)
    assert code == 0 and continued["terminal"] == "abstain" and continued["holds"] == 0
    assert continued["reason"] == "approval_denied"
    store = SqliteStore(db, read_only=True)
    decision = store.proposals(run_id)[0].decision
    store.close()
    assert decision is not None and decision.approver == "bob" and decision.note == "no"


def test_without_the_secret_nothing_is_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNNER_APPROVAL_SECRET", raising=False)
    db = tmp_path / "runs.sqlite"
    run_id = _waiting(db, capsys)
    assert main(["approve", run_id, "--approver", "alice", "--db", str(db)]) == 2
    assert "RUNNER_APPROVAL_SECRET is not set" in capsys.readouterr().err
    assert main(["approvals", "--db", str(db)]) == 0
    assert "1 pending" in capsys.readouterr().out
    monkeypatch.setenv("RUNNER_APPROVAL_SECRET", SECRET)
    assert main(["approve", run_id, "--approver", "", "--db", str(db)]) == 2
    assert "approver id" in capsys.readouterr().err
    assert main(["approve", "no-such-run", "--approver", "a", "--db", str(db)]) == 2
    assert "no pending proposal" in capsys.readouterr().err
