"""What only a file can do: persist, refuse newer schemas, report locks and corruption."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from runner.errors import StoreCorrupt, StoreError, StoreLocked
from runner.recording import RecordedTurn
from runner.store import SqliteStore
from runner.store.sqlite import MIGRATIONS

from .contract import header, record


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
    turn = RecordedTurn(
        run_id="nobody",
        ordinal=1,
        tool_choice="auto",
        text="",
        tool_calls=[],
        input_tokens=1,
        output_tokens=1,
        stop_reason="end_turn",
        started_at=0.0,
        ended_at=0.1,
        transcript_digest="d",
    )
    with pytest.raises(StoreError):
        store.append(stray, [turn])
    assert store.turns("nobody") == []
    store.close()


def _without_rowid_tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    conn.close()
    return {name for name, sql in rows if "WITHOUT ROWID" in sql.upper()}


def test_a_log_written_by_schema_3_is_moved_to_rowid_tables_whole(tmp_path: Path) -> None:
    """Migration 4 rebuilds the log's tables as rowid tables (cheaper commits for rows of
    0.5-1.5 KB); a store written under schema 3 reads back exactly and goes on appending."""
    path = tmp_path / "runs.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in ";".join(MIGRATIONS[:3]).split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("PRAGMA user_version=3")
    conn.close()
    assert {"transitions", "turns", "outputs"} <= _without_rowid_tables(path)
    scratch = SqliteStore(tmp_path / "scratch.sqlite")  # the rows' text, as a store writes it
    scratch.begin_run(header())
    scratch.append(record(1))
    scratch.append(record(2))
    runs = scratch._conn.execute("SELECT * FROM runs").fetchall()
    transitions = scratch._conn.execute("SELECT * FROM transitions").fetchall()
    scratch.close()
    writer = sqlite3.connect(path, isolation_level=None)  # the schema-3 file gets them
    writer.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?)", runs)
    writer.executemany("INSERT INTO transitions VALUES (?, ?, ?)", transitions)
    writer.close()

    store = SqliteStore(path)  # migrates to 4
    assert _without_rowid_tables(path) & {"transitions", "turns", "outputs"} == set()
    assert store.transitions("r1") == [record(1), record(2)]
    store.append(record(3))
    assert store.transitions("r1") == [record(1), record(2), record(3)]
    dup = sqlite3.connect(path, isolation_level=None)
    with pytest.raises(sqlite3.IntegrityError):  # the key still holds: (run_id, seq) is unique
        dup.execute("INSERT INTO transitions VALUES ('r1', 3, '{}')")
    dup.close()
    store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    conn.close()
