"""A service on a store with rows changed outside the runner answers in its one error shape:
a run whose record cannot be read back is a JSON 500 `unreadable_record` (its tenant's; another
tenant gets the 404 of a run that does not exist), is listed as `unreadable` rather than left
out, and its events stream is refused the same way instead of answering an empty 200.

Over real HTTP (`runner serve` in a child process), the rows edited with sqlite3."""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from tests.support.service_harness import B, Service, loopback, serving

__all__ = ["loopback"]

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("loopback")]

UNREADABLE = "unreadable_record"


def _ended(service: Service, runs: list[str]) -> None:
    """Wait on the list (it reads no transitions, so none is cached before the edit)."""
    deadline = time.monotonic() + 60
    with service.client() as client:
        while True:
            listed = {r["run_id"]: r["status"] for r in client.get("/v1/runs").json()["runs"]}
            if all(listed.get(run) == "ended" for run in runs):
                return
            assert time.monotonic() < deadline, listed
            time.sleep(0.05)


def _edit(db: Path, sql: str, run_id: str) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(sql, (run_id,))


def test_runs_whose_record_cannot_be_read_back_are_refused_and_listed_as_such(
    tmp_path: Path,
) -> None:
    with serving(tmp_path) as service:
        bad_row, bad_header = service.submit("rate_limited"), service.submit("read_only_success")
        _ended(service, [bad_row, bad_header])
        db = tmp_path / "runs.sqlite"
        _edit(
            db,
            "UPDATE run_log SET body = '[1,2' WHERE entry = "
            "((SELECT run_no FROM runs WHERE run_id = ?) << 32) + 2",
            bad_row,
        )
        _edit(db, "UPDATE runs SET header = '{bad' WHERE run_id = ?", bad_header)
        with service.client() as client:
            answers = [client.get(f"/v1/runs/{run}") for run in (bad_row, bad_header)]
            events = client.get(f"/v1/runs/{bad_row}/events")
            listed = client.get("/v1/runs").json()
        with service.client(B) as other_tenant:
            hidden = other_tenant.get(f"/v1/runs/{bad_header}")
            theirs = other_tenant.get("/v1/runs").json()
    for answer in (*answers, events):
        assert answer.status_code == 500, answer.text
        assert answer.json()["error"]["code"] == UNREADABLE
        assert "runs.sqlite" not in answer.text  # the store's file is the service log's
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "no_run"
    by_id = {item["run_id"]: item for item in listed["runs"]}
    assert listed["total"] == 2 and set(by_id) == {bad_row, bad_header}
    assert by_id[bad_header]["status"] == "unreadable" and by_id[bad_header]["state"] is None
    assert by_id[bad_header]["name"] == "read_only_success"  # from the job that started it
    assert by_id[bad_row]["status"] == "ended"  # listing reads no transition
    assert theirs["total"] == 0
    log = (tmp_path / "serve.log").read_text()
    assert "cannot be read back" in log and bad_header in log  # the whole story is logged


def test_a_decision_while_another_process_holds_the_store_is_503_and_goes_through_after(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, pace_s=0.0) as service:
        waiting = service.submit("hold_approved")
        assert service.wait_ended(waiting)["reason"] == "approval_required"
        (pending,) = service.pending(waiting)
        approve = f"/v1/approvals/{pending['approval_id']}/approve"
        with closing(sqlite3.connect(tmp_path / "runs.sqlite", isolation_level=None)) as holder:
            holder.execute("BEGIN IMMEDIATE")  # another process's write lock, held
            with service.client() as client:
                busy = client.post(approve)
            holder.execute("ROLLBACK")
        with service.client() as client:
            decided = client.post(approve)  # nothing was kept: the same request goes through
    assert busy.status_code == 503, busy.text
    assert busy.json()["error"]["code"] == "store_busy"
    assert decided.status_code == 200, decided.text


def test_a_run_submitted_while_another_process_holds_the_store_is_503_and_stalls_nothing(
    tmp_path: Path,
) -> None:
    """Its job is written to the store file in a thread: the loop goes on answering meanwhile
    (the POST used to hold it for the lock's 30 s), and the run is not accepted (nor listed)."""
    with serving(tmp_path) as service:
        with closing(sqlite3.connect(tmp_path / "runs.sqlite", isolation_level=None)) as holder:
            holder.execute("BEGIN IMMEDIATE")
            with ThreadPoolExecutor(1) as posting, service.client() as client:
                refused = posting.submit(client.post, "/v1/runs", json={"fixture": "rate_limited"})
                time.sleep(0.3)  # the POST waits on the lock now
                started = time.monotonic()
                health = httpx.get(f"{service.url}/healthz", timeout=10)
                waited = time.monotonic() - started
                busy = refused.result(timeout=30)
            holder.execute("ROLLBACK")
        with service.client() as client:
            listed = client.get("/v1/runs").json()
    assert health.status_code == 200 and waited < 1.0, waited
    assert busy.status_code == 503, busy.text
    assert busy.json()["error"]["code"] == "store_busy"
    assert listed["total"] == 0
