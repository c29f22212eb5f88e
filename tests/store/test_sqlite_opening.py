"""Opening a store on a bad day: many processes at once on a new file, or no right to write."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
import sqlite3
import threading
import time
import traceback
from pathlib import Path

import pytest

from runner.base.errors import StoreLocked
from runner.store import SqliteStore
from runner.store.sqlite import MIGRATIONS

pytestmark = pytest.mark.slow

PROCESSES = 48


def _open_once(path: str, barrier: multiprocessing.synchronize.Barrier, report: str) -> None:
    barrier.wait()
    try:
        SqliteStore(path).close()
    except BaseException:  # every failure, whatever it is, is what the test reports
        Path(report).write_text(traceback.format_exc(limit=1))
        os._exit(1)
    os._exit(0)


def test_many_processes_open_a_brand_new_store_at_once(tmp_path: Path) -> None:
    """Each of PROCESSES real processes, released together, opens (and so migrates) one new file."""
    path = str(tmp_path / "runs.sqlite")
    context = multiprocessing.get_context("fork")  # the runner is imported once, not 48 times
    barrier = context.Barrier(PROCESSES)
    reports = [tmp_path / f"failure-{number}.txt" for number in range(PROCESSES)]
    workers = [
        context.Process(target=_open_once, args=(path, barrier, str(report))) for report in reports
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    codes = [worker.exitcode for worker in workers]
    reported = [report.read_text() for report in reports if report.exists()]
    assert reported == []
    assert codes == [0] * PROCESSES
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_new_file_waits_past_the_busy_timeout_for_another_opener(tmp_path: Path) -> None:
    """A new file held by another process setting it up (here for 3 s, past the usual 2 s
    busy timeout) is waited for; an existing store held by a writer is reported as before."""
    path = tmp_path / "runs.sqlite"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")  # the file exists, still empty: as another opener's
    assert path.stat().st_size == 0
    release = threading.Timer(3.0, lambda: holder.execute("ROLLBACK"))
    release.start()
    started = time.monotonic()
    try:
        SqliteStore(path).close()
    finally:
        release.join()
        holder.close()
    assert time.monotonic() - started >= 2.5

    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    try:
        with pytest.raises(StoreLocked):
            SqliteStore(path)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert time.monotonic() - started < 10
