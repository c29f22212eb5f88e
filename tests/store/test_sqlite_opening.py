"""Opening a store on a bad day: many processes at once on a new file, or no right to write."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
import sqlite3
import traceback
from pathlib import Path

from runner.store import SqliteStore
from runner.store.sqlite import MIGRATIONS

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
