"""A run's summary row is a claim its terminal transition must back. One edited to say
`complete (model_final)` where the run ended `unknown` was listed by `runner runs` as complete
(`"unreadable": null`), and `show` refused it saying its terminal transition was missing when
the transition was there (stranger finding). Listing reads each ended run's last transition
in the same query and names a run whose summary disagrees as unreadable; `show` says what each
says."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from runner.cli import main
from runner.store import MemoryStore, SqliteStore, UnreadableRun
from runner.store.base import RunListing
from tests.support.paths import FIXTURES


def _forged(tmp_path: Path) -> tuple[Path, str, str]:
    """A run that ended unknown, its summary row edited to complete; and a whole one."""
    db = tmp_path / "s.sqlite"
    for name in ("hold_reconcile_inconclusive", "read_only_success"):
        assert main(["run", str(FIXTURES / f"{name}.yaml"), "--db", str(db)]) == 0
    store = SqliteStore(db, read_only=True)
    try:
        forged, whole = (item.header.run_id for item in store.runs())  # type: ignore[union-attr]
    finally:
        store.close()
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(
            "UPDATE runs SET terminal = 'complete', summary = json_set(summary, '$.terminal', "
            "'complete', '$.reason', 'model_final') WHERE run_id = ?",
            (forged,),
        )
    conn.close()
    return db, forged, whole


def test_runs_names_a_run_whose_summary_its_log_does_not_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, forged, whole = _forged(tmp_path)
    store = SqliteStore(db, read_only=True)
    try:
        listed = store.runs()
    finally:
        store.close()
    [bad] = [item for item in listed if isinstance(item, UnreadableRun)]
    assert bad.run_id == forged
    assert "its summary says complete (model_final)" in bad.problem
    assert "its last transition (seq" in bad.problem and "says unknown" in bad.problem
    assert [item.header.run_id for item in listed if isinstance(item, RunListing)] == [whole]
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--json"]) == 2
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["unreadable"] is None for line in lines] == [False, True]
    assert main(["runs", "--db", str(db)]) == 2
    out = capsys.readouterr().out
    assert f"{forged:<36}  (unreadable" in out and "complete" not in out.split(forged)[1][:60]


def test_show_says_the_summary_and_the_log_disagree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, forged, _ = _forged(tmp_path)
    capsys.readouterr()
    assert main(["show", forged, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "its summary says complete (model_final), but its last transition (seq" in err
    assert "says unknown" in err
    assert "terminal transition is missing" not in err


def test_the_memory_store_lists_a_disagreeing_summary_as_unreadable(tmp_path: Path) -> None:
    db, forged, whole = _forged(tmp_path)
    store = SqliteStore(db, read_only=True)
    memory = MemoryStore()
    try:
        for run_id in (forged, whole):
            header, summary = store.header(run_id), store.summary(run_id)
            assert header is not None and summary is not None
            memory.begin_run(header)
            for record in store.transitions(run_id):
                memory.append(record)
            memory.end_run(summary)
    finally:
        store.close()
    listed = memory.runs()
    assert [type(item) for item in listed] == [UnreadableRun, RunListing]
    assert "its summary says complete (model_final)" in listed[0].problem  # type: ignore[union-attr]


def test_a_summary_edited_to_claim_fewer_attempts_is_named_by_runs_and_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the terminal state and reason were checked against the last transition: a summary
    edited to say 1 attempt where the run made 3 was listed and shown as 1."""
    db = tmp_path / "s.sqlite"
    assert main(["run", str(FIXTURES / "rate_limited.yaml"), "--db", str(db)]) == 0
    conn = sqlite3.connect(db)
    with conn:
        ((run_id,),) = conn.execute("SELECT run_id FROM runs")
        conn.execute("UPDATE runs SET summary = json_set(summary, '$.attempts', 1)")
    conn.close()
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--json"]) == 2
    (line,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert "its summary says attempts 1, but its last transition" in line["unreadable"]
    assert main(["show", run_id, "--db", str(db)]) == 2
    assert "says attempts 3: the summary was edited" in capsys.readouterr().err
