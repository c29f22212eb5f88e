"""Grading approvals from the record alone: a write that needed approval and went out without one
fails, a token used by two runs fails both, and each run's decisions are reported."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from runner.cli import main
from runner.core.confirm import ApprovalSecret
from runner.harness.fixtures import load_fixture
from runner.proof._approval_checks import tokens_used_by_several_runs
from runner.proof.grading import grade
from runner.proof.replay import Recording
from runner.store import SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.approval_play import play_approval
from tests.support.paths import FIXTURES

SECRET = "the-runtime-secret-for-the-tests-0001"


def _approved(contracts: ContractSet, tmp_path: Path) -> tuple[Path, str, str]:
    db = tmp_path / "runs.sqlite"
    store = SqliteStore(db)
    try:
        fixture = load_fixture(FIXTURES / "approval" / "hold_approved.yaml", contracts)
        play = play_approval(
            fixture, contracts, store, secret=ApprovalSecret(SECRET), world_dir=tmp_path / "w"
        )
        assert play.continued is not None
        return db, play.first.result.run_id, play.continued.result.run_id
    finally:
        store.close()


def _recording(db: Path, run_id: str) -> Recording:
    store = SqliteStore(db, read_only=True)
    try:
        return Recording.from_store(store, run_id)
    finally:
        store.close()


def _check(recording: Recording, contracts: ContractSet, name: str) -> tuple[bool, str]:
    found = [c for c in grade(recording, contracts, None, None).checks if c.name == name]
    return found[0].passed, found[0].detail


def test_an_approved_continuation_grades_clean_and_reports_its_approval(
    contracts: ContractSet, tmp_path: Path
) -> None:
    db, waiting, continued = _approved(contracts, tmp_path)
    trial = grade(_recording(db, continued), contracts, None, None)
    assert trial.passed, [(c.name, c.detail) for c in trial.failed]
    assert len(trial.approvals) == 1 and trial.approvals[0].startswith("approved by alice")
    assert grade(_recording(db, waiting), contracts, None, None).approvals[0].startswith("required")


def test_a_write_sent_without_its_required_approval_fails(
    contracts: ContractSet, tmp_path: Path
) -> None:
    db, _, continued = _approved(contracts, tmp_path)
    recording = _recording(db, continued)
    stripped = dataclasses.replace(recording.header, continues=None)
    passed, detail = _check(
        dataclasses.replace(recording, header=stripped),
        contracts,
        "no_write_without_required_approval",
    )
    assert not passed and "hold_room sent without approval" in detail


def test_a_token_used_for_another_write_or_by_two_runs_fails(
    contracts: ContractSet, tmp_path: Path
) -> None:
    db, _, continued = _approved(contracts, tmp_path)
    recording = _recording(db, continued)
    assert recording.header.continues is not None
    grants = recording.header.continues["grants"]
    doubled = {
        **recording.header.continues,
        "grants": [*grants, {**grants[0], "operation_key": "x"}],
    }
    header = dataclasses.replace(recording.header, continues=doubled)
    passed, _ = _check(
        dataclasses.replace(recording, header=header), contracts, "no_token_used_twice"
    )
    assert not passed
    twin = dataclasses.replace(
        recording, header=dataclasses.replace(recording.header, run_id="twin")
    )
    assert list(tokens_used_by_several_runs([recording, twin]).values()) == [[continued, "twin"]]


def test_grade_stored_reports_approvals_per_run(
    contracts: ContractSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _, continued = _approved(contracts, tmp_path)
    assert main(["grade", "--stored", "--db", str(db), "--json"]) == 0
    graded = json.loads(capsys.readouterr().out)
    trials = {t["run_id"]: t for f in graded["fixtures"] for t in f["trials"]}
    assert trials[continued]["approvals"][0].startswith("approved by alice: hold_room")
    assert all(t["passed"] for t in trials.values())


def test_a_write_record_naming_another_approver_than_its_grant_fails(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """An edited record claiming someone else approved the write (the grant names alice)."""
    db, _, continued = _approved(contracts, tmp_path)
    recording = _recording(db, continued)
    forged = [
        dataclasses.replace(r, approval={**r.approval, "approver": "mallory"})
        if r.approval is not None
        else r
        for r in recording.transitions
    ]
    passed, detail = _check(
        dataclasses.replace(recording, transitions=forged),
        contracts,
        "no_write_without_required_approval",
    )
    assert not passed and "differs from its grant" in detail


def test_grade_stored_fails_a_grant_the_approval_ledger_never_issued(
    contracts: ContractSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stored continuation edited to name another approver and token, in its header's grant
    and its write's record alike, agrees with itself; the store's approval ledger does not."""
    db, _, continued = _approved(contracts, tmp_path)
    forged_token = "ffffffff-0000-0000-0000-000000000000"
    conn = sqlite3.connect(db)
    with conn:
        (text,) = conn.execute("SELECT header FROM runs WHERE run_id = ?", (continued,)).fetchone()
        header = json.loads(text)
        header["continues"]["grants"][0].update(approver="mallory", token_id=forged_token)
        conn.execute("UPDATE runs SET header = ? WHERE run_id = ?", (json.dumps(header), continued))
        for seq, text in conn.execute(
            "SELECT seq, record FROM transitions WHERE run_id = ?", (continued,)
        ).fetchall():
            record = json.loads(text)
            if record.get("approval"):
                record["approval"].update(approver="mallory", token_id=forged_token)
                conn.execute(
                    "UPDATE transitions SET record = ? WHERE run_id = ? AND seq = ?",
                    (json.dumps(record), continued, seq),
                )
    conn.close()
    assert main(["grade", "--stored", continued, "--db", str(db), "--json"]) == 1
    graded = json.loads(capsys.readouterr().out)
    (trial,) = [t for f in graded["fixtures"] for t in f["trials"] if t["run_id"] == continued]
    failed = {c["name"]: c["detail"] for c in trial["checks"] if not c["passed"]}
    assert "not the decision in the approval ledger" in failed["no_write_without_required_approval"]
