"""Grading never vouches for a record its own replay refutes: `grade --stored` and `grade_run`
re-drive each run from its record with the contracts it is graded with, and a replay that does
not come out identical fails `replays_as_recorded`, naming the divergence. A stranger edited a
stored run ten ways (a result class, an attempt, a decision, arguments, a key, an observation,
two inputs swapped, an input deleted, the header's tenant, a retry's wait past the deadline);
each passed `grade --stored` while `runner replay` refuted it."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from runner.cli import main
from runner.proof.api import grade_run_sync
from runner.proof.grading import no_wait_outlasts_the_deadline
from runner.proof.replay import Recording
from runner.store import SqliteStore
from runner.store.base import RunListing
from runner.tools.contracts import ContractSet
from tests.support.paths import FIXTURES


def _ran(tmp_path: Path, fixture: str) -> tuple[Path, str]:
    db = tmp_path / "s.sqlite"
    assert main(["run", str(FIXTURES / f"{fixture}.yaml"), "--db", str(db)]) == 0
    store = SqliteStore(db, read_only=True)
    try:
        [listed] = store.runs()
    finally:
        store.close()
    assert isinstance(listed, RunListing)
    return db, listed.header.run_id


def _edit(db: Path, sql: str, *params: object) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql, params)
    conn.close()


def _transition(field: str, value: object, seq: int) -> tuple[str, tuple[object, ...]]:
    return (
        f"UPDATE transitions SET record = json_set(record, '$.{field}', json(?)) "
        "WHERE run_id = ? AND seq = ?",
        (json.dumps(value), seq),
    )


EDITS: dict[str, tuple[str, tuple[object, ...]]] = {
    "result class": _transition("result_class", "empty", 2),
    "attempt": _transition("attempt", 2, 4),
    "decision": _transition("decision", "back_to_model", 2),
    "arguments": _transition("args.guests", 3, 2),
    "operation key": _transition("operation_key", "optiverse:hold_room:" + "0" * 32, 6),
    "observation": _transition("observation.result", {"forged": True}, 2),
    "tenant": ("UPDATE runs SET header = json_set(header, '$.tenant', ?) WHERE run_id = ?", ("x",)),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_record_fails_its_grade(
    tmp_path: Path, edit: str, contracts: ContractSet
) -> None:
    db, run_id = _ran(tmp_path, "hold_timeout_after_commit")
    sql, params = EDITS[edit]
    if "transitions" in sql:
        _edit(db, sql, params[0], run_id, *params[1:])
    else:
        _edit(db, sql, *params, run_id)
    store = SqliteStore(db, read_only=True)
    try:
        trial = grade_run_sync(store, run_id, contracts)
    finally:
        store.close()
    failed = {check.name: check.detail for check in trial.failed}
    assert "replays_as_recorded" in failed, failed
    assert "divergence" in failed["replays_as_recorded"]


def _run_no(db: Path, run_id: str) -> int:
    conn = sqlite3.connect(db)
    (run_no,) = conn.execute("SELECT run_no FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    conn.close()
    return int(run_no)


def test_swapped_or_deleted_inputs_fail_the_grade(
    tmp_path: Path, contracts: ContractSet, capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = _ran(tmp_path, "hold_timeout_after_commit")
    run_no = _run_no(db, run_id)
    conn = sqlite3.connect(db)
    with conn:  # outputs 1 and 2 swap their bodies (each keeps its ordinal)
        rows = conn.execute(
            "SELECT entry, body FROM run_log WHERE kind = 2 AND number IN (1, 2) "
            "AND entry >> 32 = ? ORDER BY number",
            (run_no,),
        ).fetchall()
        (first, one), (second, two) = rows
        one_ = {**json.loads(two), "ordinal": 1}
        two_ = {**json.loads(one), "ordinal": 2}
        conn.execute("UPDATE run_log SET body = ? WHERE entry = ?", (json.dumps(one_), first))
        conn.execute("UPDATE run_log SET body = ? WHERE entry = ?", (json.dumps(two_), second))
    conn.close()
    capsys.readouterr()
    assert main(["grade", "--stored", "--db", str(db), "--json"]) != 0
    graded = json.loads(capsys.readouterr().out)
    assert "replays_as_recorded" in json.dumps(graded)

    (tmp_path / "b").mkdir()
    db2, run_id2 = _ran(tmp_path / "b", "hold_timeout_after_commit")
    _edit(
        db2,
        "DELETE FROM run_log WHERE kind = 2 AND number = 3 AND entry >> 32 = ?",
        _run_no(db2, run_id2),
    )
    store = SqliteStore(db2, read_only=True)
    try:
        trial = grade_run_sync(store, run_id2, contracts)
    finally:
        store.close()
    assert "replays_as_recorded" in {check.name for check in trial.failed}


def test_a_wait_past_the_deadline_fails_its_check_and_the_grade(
    tmp_path: Path, contracts: ContractSet, capsys: pytest.CaptureFixture[str]
) -> None:
    """The retry's transition is stamped when the wait ended; a wait_s edited to 100 s on a 30 s
    run kept that stamp (2 s), and the check read only the stamp: it passed."""
    db, run_id = _ran(tmp_path, "rate_limited")
    store = SqliteStore(db, read_only=True)
    try:
        recording = Recording.from_store(store, run_id)
    finally:
        store.close()
    assert no_wait_outlasts_the_deadline(recording, contracts).passed
    [retry] = [record for record in recording.transitions if record.wait_s is not None]
    edited = dataclasses.replace(
        recording,
        transitions=[
            dataclasses.replace(record, wait_s=100.0) if record is retry else record
            for record in recording.transitions
        ],
    )
    check = no_wait_outlasts_the_deadline(edited, contracts)
    assert not check.passed
    assert f"seq {retry.seq}: a 100 s wait" in check.detail and "30 s deadline" in check.detail
    _edit(db, _transition("wait_s", 100.0, retry.seq)[0], "100.0", run_id, retry.seq)
    capsys.readouterr()
    assert main(["grade", "--stored", "--db", str(db)]) != 0
    out = capsys.readouterr().out
    assert "no_wait_outlasts_the_deadline" in out and "replays_as_recorded" in out


def test_an_untouched_store_still_grades(tmp_path: Path, contracts: ContractSet) -> None:
    db, run_id = _ran(tmp_path, "hold_timeout_after_commit")
    store = SqliteStore(db, read_only=True)
    try:
        trial = grade_run_sync(store, run_id, contracts)
    finally:
        store.close()
    assert trial.passed, trial.failed
    assert "replays_as_recorded" in {check.name for check in trial.checks}


def _killed_run(folder: Path, db: Path) -> str:
    """The id of a `rate_limited` run killed (SIGKILL) after its 5th commit, stored in `db`."""
    env = {**os.environ, "RUNNER_KILL_AFTER_COMMITS": "5"}
    fixture = str(FIXTURES / "rate_limited.yaml")
    killed = subprocess.run(
        [sys.executable, "-m", "runner", "run", fixture, "--db", str(db)],
        env=env, capture_output=True, check=False, cwd=folder,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    ((cut,),) = sqlite3.connect(db).execute("SELECT run_id FROM runs")
    return str(cut)


def test_grade_stored_names_a_run_that_has_not_ended_and_grades_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run still being driven (or killed and not yet resumed) was graded as a failed trial,
    `terminal_as_declared: None, declared complete`, with exit 1: its end is not known yet."""
    db = tmp_path / "runs.sqlite"
    cut = _killed_run(tmp_path, db)
    assert main(["run", str(FIXTURES / "read_only_success.yaml"), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["grade", "--stored", "--db", str(db), "--json"]) == 2
    captured = capsys.readouterr()
    graded = json.loads(captured.out)
    assert [(f["fixture"], f["pass_k"]) for f in graded["fixtures"]] == [
        ("read_only_success", True)
    ]
    assert [entry["run_id"] for entry in graded["not_graded"]] == [cut]
    assert f"error: run {cut}: it has not ended" in captured.err


def test_grade_run_of_a_run_that_has_not_ended_fails_run_ended(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """`grade_run` of a killed run passed: every check held as far as its record went."""
    db = tmp_path / "runs.sqlite"
    cut = _killed_run(tmp_path, db)
    store = SqliteStore(db, read_only=True)
    try:
        trial = grade_run_sync(store, cut, contracts)
    finally:
        store.close()
    assert not trial.passed
    assert [c.name for c in trial.failed] == ["run_ended"]
