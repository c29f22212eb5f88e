"""`runner approvals`, `approve`, `deny`, `continue` from the command line."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runner.base.errors import ConfigError
from runner.cli import main
from runner.core.confirm import ApprovalSecret
from runner.engine.approvals import approve
from runner.store import SqliteStore
from tests.support.paths import FIXTURES

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
    store = SqliteStore(db)  # a run waiting for approval let go of its lease: taken at once
    now, ttl = datetime.now(UTC), timedelta(seconds=30)
    lease = store.acquire_lease(run_id, "worker-1", now, ttl)
    assert lease is not None
    store.release_lease(lease)
    store.close()
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
    assert main(["continue", run_id, "--db", str(db), "--json"]) == 0  # as resume --json says
    again = json.loads(capsys.readouterr().out)
    assert again["already_ended"] is True and again["run_id"] == continued["run_id"]
    assert (again["terminal"], again["holds"]) == ("complete", 1)


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


@pytest.mark.parametrize("ttl", ["0", "-5", "nan", "inf", "1e300", "1e12"])
def test_a_ttl_out_of_range_is_one_error_line_and_decides_nothing(
    ttl: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--ttl 0` used to burn the approval (a token that expired at once, the proposal no longer
    pending); nan, inf or a huge value were a traceback."""
    monkeypatch.setenv("RUNNER_APPROVAL_SECRET", SECRET)
    db = tmp_path / "runs.sqlite"
    run_id = _waiting(db, capsys)
    with pytest.raises(SystemExit) as exited:
        main(["approve", run_id, "--approver", "alice", "--ttl", ttl, "--db", str(db)])
    assert exited.value.code == 2
    assert "--ttl" in capsys.readouterr().err
    store = SqliteStore(db)
    try:
        assert [p.status for p in store.proposals(run_id)] == ["pending"]
    finally:
        store.close()


def test_the_library_refuses_a_ttl_not_above_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = _waiting(db, capsys)
    store = SqliteStore(db)
    try:
        for ttl in (timedelta(0), timedelta(seconds=-1), timedelta.max):
            with pytest.raises(ConfigError, match="ttl"):
                approve(
                    store,
                    run_id,
                    approver="alice",
                    secret=ApprovalSecret(SECRET),
                    now=datetime(2027, 3, 1, tzinfo=UTC),
                    ttl=ttl,
                )
        assert [p.status for p in store.proposals(run_id)] == ["pending"]
    finally:
        store.close()


def test_runner_continue_checks_the_token_when_it_starts_not_when_it_was_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision whose token expired before `runner continue` began (the process that decided
    stopped first) is refused at the continuation's start: nothing stored, no hold."""
    monkeypatch.setenv("RUNNER_APPROVAL_SECRET", SECRET)
    db = tmp_path / "runs.sqlite"
    run_id = _waiting(db, capsys)
    store = SqliteStore(db)
    decided_at = datetime.now(UTC) - timedelta(minutes=31)
    approve(store, run_id, "hold_room", approver="alice", secret=ApprovalSecret(SECRET),
            now=decided_at, ttl=timedelta(minutes=30))  # fmt: skip
    store.close()
    assert main(["continue", run_id, "--db", str(db)]) == 2
    assert "expired" in capsys.readouterr().err
    store = SqliteStore(db, read_only=True)
    try:
        assert [item.header.run_id for item in store.runs()] == [run_id]  # no continuation
    finally:
        store.close()
