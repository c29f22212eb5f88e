"""The store never holds a row it cannot read back, and one unreadable row spoils only itself
(issue 9, item 6)."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from runner.base.errors import StoreCorrupt, StoreError
from runner.cli import main
from runner.core.machine import Trigger
from runner.core.states import State
from runner.record.operations import Operation, OperationStatus
from runner.record.trace import RunSummary, TransitionRecord, read_log
from runner.store import JsonlLog, SqliteStore, UnreadableRun
from runner.store.base import RunListing
from runner.store.sqlite import TRANSITION
from tests.support.bare_rows import WHEN, header
from tests.support.paths import FIXTURES


def test_lone_surrogates_are_replaced_before_they_are_written(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    store.begin_run(header("r1", task="book \ud800 now", context={"k\udfff": "v\ud800"}))
    store.append(
        TransitionRecord(
            run_id="r1",
            seq=1,
            time=WHEN,
            from_state=State.PLAN,
            to_state=State.COMPLETE,
            trigger=Trigger.ANSWER,
            attempt=0,
            reason="model_final",
        )
    )
    store.end_run(
        RunSummary(
            run_id="r1",
            terminal="complete",
            reason="model_final",
            attempts=0,
            model_steps=1,
            tokens_in=0,
            tokens_out=0,
            elapsed_s=0.0,
            answer="done \udcff",
        )
    )
    stored = store.header("r1")
    summary = store.summary("r1")
    assert stored is not None and stored.task == "book \ufffd now"
    [(key, value)] = stored.context.items()  # pydantic's dump may widen a key's U+FFFD to three
    assert key.startswith("k\ufffd") and key.encode() and value == "v\ufffd"
    assert summary is not None and summary.answer == "done \ufffd"
    [listing] = store.runs()
    assert isinstance(listing, RunListing)


def test_a_value_that_is_not_json_is_normalized_or_refused(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    store.begin_run(header("r1", context={"x": float("nan")}))
    stored = store.header("r1")
    assert stored is not None and stored.context == {"x": None}  # pydantic's JSON mode
    key = "k" * 16
    store.claim(
        Operation(
            key=key,
            tenant="t",
            tool="hold_room",
            run_id="r1",
            params_hash="h",
            status=OperationStatus.PENDING,
            created_at=WHEN,
            expires_at=WHEN + timedelta(days=1),
            dispatch=1,
        )
    )
    with pytest.raises(StoreError, match="not JSON"):
        store.settle(key, OperationStatus.COMMITTED, {"x": float("inf")})
    [operation] = store.operations("r1")
    assert operation.status is OperationStatus.PENDING  # nothing was written


def stored_runs(db: Path) -> list[str]:
    """Three fixture runs in `db`, by the CLI; their run ids in order."""
    fixture = str(FIXTURES / "read_only_success.yaml")
    assert main(["run", fixture, "--repeat", "3", "--db", str(db)]) == 0
    store = SqliteStore(db)
    try:
        return [item.header.run_id for item in store.runs() if isinstance(item, RunListing)]
    finally:
        store.close()


def corrupt(db: Path, sql: str, *params: object) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql, params)
    conn.close()


def test_one_bad_header_is_named_and_the_other_runs_still_listed(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    first, bad, last = stored_runs(db)
    corrupt(db, "UPDATE runs SET header = '{\"run_id\": ' WHERE run_id = ?", bad)
    store = SqliteStore(db)
    listed = store.runs()
    assert [type(item) for item in listed] == [RunListing, UnreadableRun, RunListing]
    unreadable = listed[1]
    assert isinstance(unreadable, UnreadableRun) and unreadable.run_id == bad
    assert "header" in unreadable.problem
    with pytest.raises(StoreCorrupt, match=f"run {bad} header cannot be read back"):
        store.header(bad)
    assert store.header(first) is not None and store.header(last) is not None
    store.close()


def test_cli_names_the_unreadable_row_and_carries_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.sqlite"
    first, bad, last = stored_runs(db)
    corrupt(db, "UPDATE runs SET header = 'not json' WHERE run_id = ?", bad)
    capsys.readouterr()

    assert main(["runs", "--db", str(db)]) == 2  # listed, but the store is not all readable
    out, err = capsys.readouterr()
    assert first in out and last in out and f"{bad}  (unreadable" in out
    assert err.count("\n") == 1  # one line, naming the row
    assert f"run {bad} header cannot be read back" in err

    assert main(["show", first, "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["show", bad, "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: ") and f"run {bad} header cannot be read back" in err

    assert main(["grade", "--stored", "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    assert "read_only_success" in out  # the two readable runs were graded
    assert f"run {bad} header cannot be read back" in err

    assert main(["replay", last, "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["replay", bad, "--db", str(db)]) == 2
    assert f"run {bad} header cannot be read back" in capsys.readouterr().err


def test_a_bad_transition_row_is_named_by_run_and_seq(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.sqlite"
    first, bad, last = stored_runs(db)
    corrupt(db, "UPDATE transitions SET record = '[' WHERE run_id = ? AND seq = 2", bad)
    corrupt(db, "UPDATE outputs SET output = json_object('x', 1) WHERE run_id = ?", first)
    capsys.readouterr()
    assert main(["show", bad, "--db", str(db)]) == 2
    err = capsys.readouterr().err  # what is wrong, not only pydantic's help page
    assert f"run {bad} transition 2 cannot be read back (Invalid JSON: EOF while" in err
    assert "errors.pydantic.dev" not in err
    assert main(["replay", first, "--db", str(db)]) == 2
    err = capsys.readouterr().err  # where in the row
    assert f"run {first} tool output 1 cannot be read back (" in err and "Field required" in err
    corrupt(
        db,
        "UPDATE turns SET turn = json_remove(turn, '$.tool_calls[0].id') WHERE run_id = ?",
        last,
    )
    assert main(["replay", last, "--db", str(db)]) == 2  # a turn's call without its id
    assert f"run {last} model turn 1 cannot be read back" in capsys.readouterr().err
    assert main(["runs", "--db", str(db)]) == 0  # headers and summaries are all fine
    assert json.dumps(capsys.readouterr().out)


def test_the_jsonl_log_holds_no_line_it_cannot_read_back(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "runs.jsonl")
    log.begin_run(header("r1", task="book \ud800 \U0001f600 now", context={"k": "C:\\ud"}))
    log.close()
    [run] = read_log(tmp_path / "runs.jsonl")
    assert run.header.task == "book \ufffd \U0001f600 now"
    assert run.header.context == {"k": "C:\\ud"}


def test_a_header_too_deep_to_read_back_is_refused_not_written(tmp_path: Path) -> None:
    deep: object = 1
    for _ in range(300):
        deep = [deep]
    store = SqliteStore(tmp_path / "s.db")
    with pytest.raises(StoreError, match=r"not stored: .*run r1 header"):
        store.begin_run(header("r1", context={"deep": deep}))
    assert store.runs() == []
    store.begin_run(header("r2"))  # the store goes on
    assert [item.run_id for item in store.runs() if isinstance(item, UnreadableRun)] == []


def test_a_row_that_is_not_utf8_spoils_only_its_own_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bytes that are not UTF-8 (a disk error, another writer) made SQLite's decoding raise for
    the whole query: one such header failed `runner runs` and `grade --stored` for every run."""
    db = tmp_path / "runs.sqlite"
    first, bad, last = stored_runs(db)
    not_utf8 = "CAST(X'7B2278223A22FF227D' AS TEXT)"  # {"x":"\xff"}
    corrupt(db, f"UPDATE runs SET header = {not_utf8} WHERE run_id = ?", bad)
    corrupt(db, "UPDATE transitions SET record = CAST(X'5BFF5D' AS TEXT) WHERE run_id = ?", last)
    capsys.readouterr()

    assert main(["runs", "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    assert first in out and f"{bad}  (unreadable" in out
    assert err.count("\n") == 2 and f"run {bad} header cannot be read back" in err
    # its summary cannot be checked against its log: not listed as if it could
    assert f"{last}  (unreadable" in out and f"run {last} last transition cannot be" in err

    assert main(["grade", "--stored", "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    assert "read_only_success" in out
    assert f"run {bad} header cannot be read back" in err

    assert main(["show", last, "--db", str(db)]) == 2
    assert f"run {last} transition 1 cannot be read back" in capsys.readouterr().err
    assert main(["show", first, "--db", str(db)]) == 0


@pytest.mark.parametrize(
    ("edit", "named", "replayed"),
    [  # replay needs no fixture, only the limits
        ("json_set(header, '$.annotations.fixture.budget.max_attempts', 'x')", "stored fixture", 0),
        ("json_set(header, '$.limits.max_attempts', -5)", "stored limits", 2),
    ],
)
def test_a_stored_fixture_or_limits_that_no_longer_load_spoil_only_their_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: str, named: str, replayed: int
) -> None:
    """The header reads back, but what it embeds did not validate: `grade --stored` and
    `replay` ended in a pydantic traceback (exit 1) instead of naming the run."""
    db = tmp_path / "runs.sqlite"
    first, bad, _last = stored_runs(db)
    corrupt(db, f"UPDATE runs SET header = {edit} WHERE run_id = ?", bad)
    capsys.readouterr()
    assert main(["grade", "--stored", "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    assert "read_only_success" in out and err.count("\n") == 1
    assert err.startswith(f"error: run {bad}: its {named}") and "Traceback" not in err
    assert main(["replay", bad, "--db", str(db)]) == replayed
    err = capsys.readouterr().err
    assert not replayed or (err.startswith("error: ") and err.count("\n") == 1 and bad in err)
    assert main(["replay", first, "--db", str(db)]) == 0


def test_a_run_whose_world_cannot_be_read_spoils_only_its_own_grade(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A supplier database that is not one (or is empty) stopped `grade --stored` for all."""
    db = tmp_path / "runs.sqlite"
    stored = [*stored_runs(db)]
    capsys.readouterr()
    hold = str(FIXTURES / "hold_not_committed.yaml")
    assert main(["run", hold, "--repeat", "2", "--db", str(db), "--json"]) == 0
    out = capsys.readouterr().out
    first, bad = (json.loads(line)["run_id"] for line in out.splitlines())
    not_a_database = tmp_path / "not-a-database.sqlite"
    not_a_database.write_text("garbage, not SQLite\n" * 100)
    corrupt(
        db,
        "UPDATE runs SET header = json_set(header, '$.annotations.world.supplier_db', ?) "
        "WHERE run_id = ?",
        str(not_a_database),
        bad,
    )
    assert main(["grade", "--stored", "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    assert "hold_not_committed  1/1" in out and "read_only_success   3/3" in out, out
    assert err.startswith(f"error: run {bad}: ") and err.count("\n") == 1
    assert str(not_a_database) in err and first not in err and stored


def test_a_log_with_a_transition_missing_or_moved_is_read_as_corrupt_by_every_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row deleted (or a seq edited) outside the runner leaves a log that neither replays nor
    proves anything: `show` printed it as if it were whole (exit 0) while `replay` refused."""
    db = tmp_path / "runs.sqlite"
    gapped, edited, whole = stored_runs(db)
    corrupt(
        db,
        "DELETE FROM run_log WHERE kind = ? AND number = 3 "
        "AND entry >> 32 = (SELECT run_no FROM runs WHERE run_id = ?)",
        TRANSITION,
        gapped,
    )
    corrupt(
        db,
        "UPDATE transitions SET record = json_set(record, '$.seq', 9) WHERE run_id = ? AND seq = 2",
        edited,
    )
    capsys.readouterr()
    for command in ("show", "replay"):
        assert main([command, gapped, "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert f"run {gapped} transition seq 4 where 3 belongs (a gap or an edit)" in err
    assert main(["show", edited, "--db", str(db)]) == 2
    assert "transition seq 9 where 2 belongs" in capsys.readouterr().err
    store = SqliteStore(db, read_only=True)
    try:
        with pytest.raises(StoreCorrupt, match="seq 4 where 3 belongs"):
            store.transitions_after(gapped, 1, 10)  # a page past the gap's start, too
        assert [r.seq for r in store.transitions_after(gapped, -1, 2)] == [1, 2]  # before it
        assert len(store.transitions(whole)) > 3
    finally:
        store.close()
    assert main(["show", whole, "--db", str(db)]) == 0


def test_an_ended_run_whose_terminal_transition_was_removed_is_read_as_corrupt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No gap shows a missing last row: the summary says the run ended, the log does not."""
    db = tmp_path / "runs.sqlite"
    cut, *_ = stored_runs(db)
    corrupt(
        db,
        "DELETE FROM run_log WHERE entry = (SELECT MAX(entry) FROM run_log WHERE kind = ? "
        "AND entry >> 32 = (SELECT run_no FROM runs WHERE run_id = ?))",
        TRANSITION,
        cut,
    )
    capsys.readouterr()
    assert main(["show", cut, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"run {cut} ended complete, but its log's last transition is plan" in err
    assert "its terminal transition is missing" in err
