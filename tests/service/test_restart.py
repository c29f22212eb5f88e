"""A SQLite service that stops or crashes keeps its promises: every run it answered `202` for is
listed while it waits, and is started, resumed or continued by the next process on the file.

Over real HTTP (`runner serve` in a child process), killed with SIGKILL mid-run.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from runner.base.errors import ConfigError
from runner.service import ServiceConfig
from runner.store import SqliteStore
from tests.support.service_harness import (
    LONG,
    A,
    Service,
    decide_in_store,
    loopback,
    read_events,
    serving,
)

__all__ = ["loopback"]

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("loopback")]


def _kill(service: Service) -> None:
    service.process.kill()
    service.process.wait(10)


def test_runs_accepted_before_a_crash_are_started_or_resumed_by_the_next_process(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, workers=1, pace_s=0.1) as first:
        in_flight = first.submit(LONG)
        queued = [first.submit("read_only_success") for _ in range(3)]
        with first.client() as client:
            read_events(client, in_flight, stop_after=3)  # it is going; the others wait
            listed = client.get("/v1/runs").json()
            waiting = client.get(f"/v1/runs/{queued[0]}").json()
            going = client.get(f"/v1/runs/{in_flight}").json()
        # a queued run has every key a started run has, with nothing in it yet
        assert set(waiting) == set(going)
        assert (waiting["status"], waiting["fixture"]) == ("queued", "read_only_success")
        assert (waiting["transitions"], waiting["states"], waiting["attempts"]) == ([], [], 0)
        assert (waiting["started_as"], going["started_as"]["tenant"]) == (None, going["tenant"])
        assert set(waiting["context"]) == set(going["context"])
        statuses = {item["run_id"]: item["status"] for item in listed["runs"]}
        assert listed["total"] == 4
        assert statuses[in_flight] == "running"
        assert [statuses[run] for run in queued] == ["queued"] * 3
        _kill(first)
    stored = SqliteStore(tmp_path / "runs.sqlite", read_only=True)
    try:
        assert stored.summary(in_flight) is None  # the crash cut it short
        cut_at = len(stored.transitions(in_flight))
    finally:
        stored.close()
    assert cut_at >= 3

    with serving(tmp_path, workers=1) as second:
        ended = [second.wait_ended(run) for run in [in_flight, *queued]]
        assert [run["state"] for run in ended] == ["complete"] * 4, ended
        resumed = ended[0]
        seqs = [t["seq"] for t in resumed["transitions"]]
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > cut_at
        assert [t["to"] for t in resumed["transitions"]].count("complete") == 1
        with second.client() as client:
            again = client.get("/v1/runs").json()
        assert again["total"] == 4
        assert {item["status"] for item in again["runs"]} == {"ended"}


def test_a_run_resumed_after_a_crash_can_be_cancelled(tmp_path: Path) -> None:
    """A run the next process takes up from its records is cancelled like any other: it ends
    `abstain` (`cancelled`) with one terminal record and no gap."""
    with serving(tmp_path, workers=1, pace_s=0.1) as first:
        run_id = first.submit(LONG)
        with first.client() as client:
            read_events(client, run_id, stop_after=3)
        _kill(first)

    with serving(tmp_path, workers=1, pace_s=0.2) as second:
        with second.client() as client:
            read_events(client, run_id, stop_after=4)  # the resumed run is going on
            response = client.post(f"/v1/runs/{run_id}/cancel")
        assert response.status_code == 202, response.text
        run = second.wait_ended(run_id)
    assert (run["state"], run["reason"]) == ("abstain", "cancelled"), run
    seqs = [t["seq"] for t in run["transitions"]]
    assert seqs == list(range(1, len(seqs) + 1))
    assert [t["to"] for t in run["transitions"]].count("abstain") == 1


def test_an_approval_whose_continuation_was_cut_short_is_continued_once_after_a_restart(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, pace_s=0.0) as first:
        waiting = first.submit("hold_approved")
        assert first.wait_ended(waiting)["reason"] == "approval_required"
    with serving(tmp_path, pace_s=0.3) as slow:  # the continuation re-drives slowly
        with slow.client() as client:
            (pending,) = client.get("/v1/approvals").json()["approvals"]
            decided = client.post(f"/v1/approvals/{pending['approval_id']}/approve")
            assert decided.status_code == 200, decided.text
        time.sleep(0.8)
        _kill(slow)
    with serving(tmp_path) as third:
        deadline = time.monotonic() + 60
        with third.client() as client:
            while (continued := client.get(f"/v1/runs/{waiting}").json()["continued_as"]) is None:
                assert time.monotonic() < deadline, "the decided approval was never continued"
                time.sleep(0.05)
        final = third.wait_ended(continued)
    assert (final["state"], final["holds"]) == ("complete", 1)
    sent = [
        t for t in final["transitions"] if t["tool"] == "hold_room" and t["trigger"] == "classify"
    ]
    assert len(sent) == 1


def test_an_approval_decided_by_a_process_that_stopped_before_keeping_its_job_is_continued(
    tmp_path: Path,
) -> None:
    """A decision and its continuation's job are two writes: a process that stops between them
    leaves a decided run no job continues (and a second decision is refused: it is decided).
    The next process finds it and continues it, once."""
    with serving(tmp_path, pace_s=0.0) as first:
        waiting = first.submit("hold_approved")
        assert first.wait_ended(waiting)["reason"] == "approval_required"
    decide_in_store(SqliteStore(tmp_path / "runs.sqlite"), waiting)  # nothing continues it
    with serving(tmp_path) as second:
        deadline = time.monotonic() + 60
        with second.client() as client:
            while (continued := client.get(f"/v1/runs/{waiting}").json()["continued_as"]) is None:
                assert time.monotonic() < deadline, "the decided approval was never continued"
                time.sleep(0.05)
        final = second.wait_ended(continued)
    assert (final["state"], final["holds"]) == ("complete", 1)
    # nothing is left to take up: no second continuation
    with serving(tmp_path) as third, third.client() as client:
        runs = client.get("/v1/runs").json()["runs"]
    assert len(runs) == 2 and {item["status"] for item in runs} == {"ended"}


def test_a_decision_whose_token_expired_while_no_process_ran_is_not_carried_out(
    tmp_path: Path,
) -> None:
    """Taken up after a restart, a continuation's tokens are checked at the time it begins, as
    `runner continue` checks them (it was at the decision's time: an expired approval went on)."""
    with serving(tmp_path, pace_s=0.0) as first:
        waiting = first.submit("hold_approved")
        assert first.wait_ended(waiting)["reason"] == "approval_required"
    decide_in_store(SqliteStore(tmp_path / "runs.sqlite"), waiting, ttl=timedelta(seconds=1))
    time.sleep(1.5)  # it expires while no service runs
    with serving(tmp_path) as second:
        deadline = time.monotonic() + 60
        with second.client() as client:
            while (run := client.get(f"/v1/runs/{waiting}").json())["continuation_error"] is None:
                assert time.monotonic() < deadline, run
                time.sleep(0.05)
    assert "expired" in run["continuation_error"], run
    assert run["continued_as"] is None and run["holds"] == 0


def test_the_newest_runs_come_first_when_asked(tmp_path: Path) -> None:
    with serving(tmp_path, workers=1, pace_s=0.05) as service:
        runs = [service.submit("read_only_success") for _ in range(3)]
        with service.client() as client:
            oldest = client.get("/v1/runs").json()["runs"]
            newest = client.get("/v1/runs", params={"order": "newest", "limit": 2}).json()
        assert [item["run_id"] for item in oldest] == runs
        assert [item["run_id"] for item in newest["runs"]] == runs[::-1][:2]
        assert newest["next_offset"] == 2


def test_health_answers_head_and_a_wrong_method_says_what_is_allowed(tmp_path: Path) -> None:
    with serving(tmp_path) as service:
        assert httpx.head(f"{service.url}/healthz").status_code == 200
        assert httpx.head(f"{service.url}/").status_code == 200
        with service.client(A) as client:
            refused = client.delete("/v1/runs")
        assert refused.status_code == 405
        assert set(refused.headers["allow"].replace(" ", "").split(",")) == {"GET", "POST"}
        assert refused.json()["error"]["code"] == "method_not_allowed"


def test_a_key_listed_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "service.yaml"
    path.write_text(
        "api_keys:\n"
        "  - {key: kkkkkkkkkkkkkkkk, tenant: t, principal: {id: a}, roles: [submit]}\n"
        "  - {key: kkkkkkkkkkkkkkkk, tenant: u, principal: {id: b}, roles: [read]}\n"
    )
    with pytest.raises(ConfigError, match=r"api_keys\[1\] repeats an earlier key"):
        ServiceConfig.load(path)


def test_a_run_that_cannot_resume_says_why_ends_its_stream_and_goes_on_after_a_fix(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, pace_s=0.3) as first:
        run_id = first.submit("hold_not_committed")
        with first.client() as client:
            read_events(client, run_id, stop_after=2)
        _kill(first)
    stored = SqliteStore(tmp_path / "runs.sqlite", read_only=True)
    try:
        header = stored.header(run_id)
    finally:
        stored.close()
    assert header is not None
    supplier = Path(header.annotations["world"]["supplier_db"])
    supplier = supplier if supplier.is_absolute() else tmp_path / supplier
    aside = supplier.rename(supplier.with_name("aside.sqlite"))
    with serving(tmp_path) as second:  # its supplier database is gone: it cannot go on
        deadline = time.monotonic() + 60
        with second.client() as client:
            while (run := client.get(f"/v1/runs/{run_id}").json())["status"] != "failed":
                assert time.monotonic() < deadline, run
                time.sleep(0.05)
            assert "supplier database" in run["error"]
            events = read_events(client, run_id)  # ends, rather than waiting forever
            refused = client.post(f"/v1/runs/{run_id}/cancel")
            listed = client.get("/v1/runs").json()["runs"]
        assert events[-1][0] == "end" and events[-1][2]["terminal"] is None
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "stopped"
        assert [(item["status"], item["reason"]) for item in listed] == [("failed", run["error"])]
    aside.rename(supplier)
    with serving(tmp_path) as third:  # put back: the next start takes it up again
        final = third.wait_ended(run_id)
    assert (final["state"], final["holds"]) == ("complete", 1)


def test_a_continuation_made_before_a_restart_is_still_found(tmp_path: Path) -> None:
    with serving(tmp_path) as first:
        waiting = first.submit("hold_approved")
        assert first.wait_ended(waiting)["reason"] == "approval_required"
        (pending,) = first.pending(waiting)
        with first.client() as client:
            assert client.post(f"/v1/approvals/{pending['approval_id']}/approve").is_success
        deadline = time.monotonic() + 60
        with first.client() as client:
            while (continued := client.get(f"/v1/runs/{waiting}").json()["continued_as"]) is None:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        first.wait_ended(continued)
    with serving(tmp_path) as second, second.client() as client:
        assert client.get(f"/v1/runs/{waiting}").json()["continued_as"] == continued
        newest = client.get("/v1/runs", params={"order": "newest"}).json()["runs"]
    assert [item["run_id"] for item in newest] == [continued, waiting]
