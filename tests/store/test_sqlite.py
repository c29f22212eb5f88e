"""What only a file can do: persist, refuse newer schemas, report locks and corruption."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from runner.base.errors import StoreCorrupt, StoreError, StoreLocked
from runner.record.recording import (
    OUTPUT_ADAPTER,
    TURN_ADAPTER,
    RecordedOutput,
    RecordedTurn,
    Responded,
)
from runner.record.trace import HEADER_ADAPTER, RECORD_ADAPTER
from runner.store import SqliteStore
from runner.store import sqlite as sqlite_store
from runner.store._rows import _fast_json
from runner.store._sqlite_base import statements
from runner.store.sqlite import MIGRATIONS
from tests.support.store_contract import header, record


def test_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    store.begin_run(header())
    store.append(record(1))
    store.close()
    reopened = SqliteStore(path)
    assert reopened.transitions("r1") == [record(1)]
    reopened.close()


def test_wal_and_versioned_schema(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    conn.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(StoreCorrupt, match="newer than this runner knows"):
        SqliteStore(path)


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.write_bytes(b"this is not sqlite at all, just some text " * 200)
    with pytest.raises(StoreCorrupt, match="not a readable runner database"):
        SqliteStore(path)


def test_a_locked_store_is_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    store.begin_run(header())
    blocker = sqlite3.connect(path, isolation_level=None, timeout=0)
    blocker.execute("BEGIN IMMEDIATE")
    store._conn.execute("PRAGMA busy_timeout=50")
    with pytest.raises(StoreLocked, match="locked"):
        store.append(record(1))
    blocker.execute("ROLLBACK")
    blocker.close()
    assert store.transitions("r1") == []
    store.append(record(1))  # nothing half-written: seq 1 is still next
    store.close()


def test_synchronous_full_is_available(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite", synchronous="FULL")
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.close()


def test_an_input_is_never_stored_without_its_transition(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    store.begin_run(header())
    stray = dataclasses.replace(record(1), run_id="nobody")  # no such run: the insert fails
    with pytest.raises(StoreError):
        store.append(stray, [_turn("nobody", 1)])
    assert store.turns("nobody") == []
    store.close()


def _turn(run_id: str, ordinal: int) -> RecordedTurn:
    return RecordedTurn(
        run_id=run_id,
        ordinal=ordinal,
        tool_choice="auto",
        text=f"turn {ordinal}",
        tool_calls=[],
        input_tokens=1,
        output_tokens=1,
        stop_reason="end_turn",
        started_at=0.0,
        ended_at=0.1,
        transcript_digest="d",
    )


def _output(run_id: str, ordinal: int) -> RecordedOutput:
    return RecordedOutput(
        run_id=run_id,
        ordinal=ordinal,
        call_id=f"c{ordinal}",
        tool="search_flights",
        operation_key=None,
        outcome=Responded(payload={"status": "ok", "n": ordinal}),
        started_at=0.5,
        ended_at=1.0,
    )


def _schema(path: Path, version: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:version]:
        for statement in statements(migration):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version={version}")
    return conn


@pytest.mark.parametrize("version", [3, 4])
def test_a_log_written_by_an_older_schema_reads_back_whole_and_goes_on(
    tmp_path: Path, version: int
) -> None:
    """Migrations 4 (rowid tables) and 5 (one integer-keyed log table): a store written under
    schema 3 or 4, two runs with transitions, turns and outputs, reads back exactly, goes on
    appending where each run stopped, and the old tables' names still show the rows (views)."""
    path = tmp_path / "runs.sqlite"
    conn = _schema(path, version)
    turns = {run: [_turn(run, 1), _turn(run, 2)] for run in ("r1", "r2")}
    outputs = {run: [_output(run, 1)] for run in ("r1", "r2")}
    for number, run in enumerate(("r1", "r2"), start=1):
        conn.execute(
            "INSERT INTO runs (run_id, started_at, header) VALUES (?, ?, ?)",
            (run, f"2027-03-01T09:00:0{number}", _fast_json(header(run), HEADER_ADAPTER)),
        )
        for seq in (1, 2):
            conn.execute(
                "INSERT INTO transitions VALUES (?, ?, ?)",
                (run, seq, _fast_json(record(seq, run), RECORD_ADAPTER)),
            )
        for turn in turns[run]:
            conn.execute(
                "INSERT INTO turns VALUES (?, ?, ?)",
                (run, turn.ordinal, _fast_json(turn, TURN_ADAPTER)),
            )
        for output in outputs[run]:
            conn.execute(
                "INSERT INTO outputs VALUES (?, ?, ?)",
                (run, output.ordinal, _fast_json(output, OUTPUT_ADAPTER)),
            )
    conn.close()

    store = SqliteStore(path)  # migrates to the current schema
    for run in ("r1", "r2"):
        assert store.transitions(run) == [record(1, run), record(2, run)]
        assert store.turns(run) == turns[run]
        assert store.outputs(run) == outputs[run]
    with pytest.raises(StoreError, match="seq 2 after 2"):
        store.append(record(2, "r1"))
    store.append(record(3, "r1"), [_turn("r1", 3), _output("r1", 2)])
    store.append(record(3, "r2"))
    assert store.transitions("r1") == [record(1), record(2), record(3)]
    assert store.turns("r1") == [*turns["r1"], _turn("r1", 3)]
    assert store.outputs("r1") == [*outputs["r1"], _output("r1", 2)]
    store.begin_run(header("r3"))  # a new run is numbered after the migrated ones
    store.append(record(1, "r3"))
    assert store.transitions("r3") == [record(1, "r3")]
    assert store.transitions("r2") == [record(1, "r2"), record(2, "r2"), record(3, "r2")]
    store.close()
    reader = sqlite3.connect(path)
    assert reader.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert reader.execute(
        "SELECT run_id, seq FROM transitions ORDER BY run_id, seq"
    ).fetchall() == [("r1", 1), ("r1", 2), ("r1", 3), ("r2", 1), ("r2", 2), ("r2", 3), ("r3", 1)]
    assert reader.execute("SELECT COUNT(*) FROM turns WHERE run_id = 'r1'").fetchone() == (3,)
    assert reader.execute("SELECT COUNT(*) FROM outputs WHERE run_id = 'r2'").fetchone() == (1,)
    reader.close()


@pytest.mark.parametrize("returning", [True, False], ids=["returning", "older-sqlite"])
def test_a_log_is_one_table_keyed_by_run_and_position(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, returning: bool
) -> None:
    """Schema 5: a transition with its inputs is one commit into `run_log`, whose integer key is
    the run's number (high 32 bits) and the row's position in the run (low 32). The number is
    read back from the INSERT (`RETURNING`), or after it where SQLite is older than 3.35."""
    monkeypatch.setattr(sqlite_store, "_RETURNING", returning)
    store = SqliteStore(tmp_path / "runs.sqlite")
    store.begin_run(header("r1"))
    assert not store._conn.in_transaction  # the run's row is committed
    store.begin_run(header("r2"))
    with pytest.raises(StoreError, match="could not be begun"):
        store.begin_run(header("r2"))
    assert not store._conn.in_transaction
    store.append(record(1, "r2"), [_turn("r2", 1)])
    store.append(record(1, "r1"))
    store.append(record(2, "r2"), [_output("r2", 1)])
    rows = store._conn.execute("SELECT entry >> 32, entry & 4294967295, kind, number FROM run_log")
    assert sorted(rows.fetchall()) == [
        (1, 1, 0, 1),
        (2, 1, 1, 1),
        (2, 2, 0, 1),
        (2, 3, 2, 1),
        (2, 4, 0, 2),
    ]
    store.close()
    reopened = SqliteStore(tmp_path / "runs.sqlite")  # another connection finds where each ends
    reopened.append(record(3, "r2"))
    reopened.append(record(2, "r1"))
    assert [r.seq for r in reopened.transitions("r2")] == [1, 2, 3]
    assert [r.seq for r in reopened.transitions("r1")] == [1, 2]
    with pytest.raises(StoreError, match="never begun"):
        reopened.append(record(1, "nobody"))
    reopened.close()


def test_a_run_number_is_never_given_again(tmp_path: Path) -> None:
    """A run whose `runs` row was deleted by hand leaves its log rows: the next run is numbered
    past them, so it never reads them as its own."""
    store = SqliteStore(tmp_path / "runs.sqlite")
    store.begin_run(header("r1"))
    store.append(record(1, "r1"))
    store.append(record(2, "r1"))
    store._conn.execute("DELETE FROM runs WHERE run_id = 'r1'")
    store.begin_run(header("r2"))
    assert store.transitions("r2") == []
    store.append(record(1, "r2"))
    assert store.transitions("r2") == [record(1, "r2")]
    store.close()


def test_a_row_leaves_out_only_what_reads_back_as_its_default(tmp_path: Path) -> None:
    """Fields that are None by default are left out of a row's text and read back as None; a
    field that is None without a default (an output's operation key) stays, as do defaults
    that are not None (a transition's attempt 0)."""
    store = SqliteStore(tmp_path / "runs.sqlite")
    store.begin_run(header())
    bare = dataclasses.replace(record(1), tool=None, args=None, attempt=0, latency_ms=None)
    store.append(bare, [_output("r1", 1)])
    rows = dict(store._conn.execute("SELECT kind, body FROM run_log").fetchall())
    transition, output = json.loads(rows[0]), json.loads(rows[2])
    assert "tool" not in transition and "args" not in transition and "reason" not in transition
    assert transition["attempt"] == 0
    assert "operation_key" in output and output["operation_key"] is None
    assert store.transitions("r1") == [bare]
    assert store.outputs("r1") == [_output("r1", 1)]
    store.close()
