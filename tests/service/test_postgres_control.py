"""Cancel and approvals through `runner serve` on PostgreSQL: two service processes and two real
`runner worker`s on one store (a throwaway cluster, tests/support/pg.py). Every cancel and decision
goes through the service process that did NOT accept the run; the run is driven by a worker, a
third process, and ends exactly as it does on the SQLite service."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner.cli._distributed import fixture_player
from runner.core.states import TERMINAL
from runner.distributed.worker import RunDriver, WorkerSettings
from runner.store.adapters import BlockingStore
from runner.store.base import RunListing
from runner.store.postgres import PostgresStore
from runner.travel import load_travel_contracts
from tests.support.service_harness import (
    A_READ,
    LONG,
    SECRET,
    A,
    B,
    Service,
    decide_in_store,
    loopback,
    read_events,
    serving,
    workers,
    write_long_fixture,
)

__all__ = ["loopback"]

pytestmark = pytest.mark.usefixtures("loopback")


@contextmanager
def two_services(url: str, folder: Path) -> Iterator[tuple[Service, Service, dict[str, str]]]:
    # The workers continue approved runs: they need the service's approval secret.
    env = {
        **os.environ,
        "RUNNER_WORLD": str(folder / "world"),
        "RUNNER_APPROVAL_SECRET": SECRET,
    }
    with (
        serving(folder / "s1", url=url, env=env) as first,
        serving(folder / "s2", url=url, env=env) as second,
    ):
        yield first, second, env


def _ends(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's terminal transitions (exactly one for a run that ended)."""
    return [t for t in run["transitions"] if t["to"] in {s.value for s in TERMINAL}]


def test_cancel_through_the_other_service_ends_a_workers_run_and_a_queued_one(
    pg_url: str, tmp_path: Path
) -> None:
    with two_services(pg_url, tmp_path) as (first, second, env):
        queued = first.submit(LONG)  # no worker yet: it waits in the queue
        with second.client() as client:
            response = client.post(f"/v1/runs/{queued}/cancel")
            assert response.status_code == 202, response.text
            assert response.json() == {"run_id": queued, "cancel_requested": True}
            assert client.get(f"/v1/runs/{queued}").json()["status"] == "queued"
        with second.client(B) as other_tenant:
            assert other_tenant.post(f"/v1/runs/{queued}/cancel").status_code == 404
        with workers(pg_url, tmp_path, env):
            going = first.submit(LONG)
            with second.client() as client:
                read_events(client, going, stop_after=2)  # a worker drives it
                with second.client(B) as other_tenant:
                    refused = other_tenant.post(f"/v1/runs/{going}/cancel")
                assert refused.status_code == 404
                assert refused.json()["error"]["code"] == "no_run"
                response = client.post(f"/v1/runs/{going}/cancel")
                assert response.status_code == 202, response.text
            cancelled = first.wait_ended(going)
            ended_queued = first.wait_ended(queued)
            with first.client() as client:
                again = client.post(f"/v1/runs/{going}/cancel")
                events = read_events(client, going)
    assert again.status_code == 409 and again.json()["error"]["code"] == "ended"
    assert (cancelled["state"], cancelled["reason"]) == ("abstain", "cancelled")
    assert 0 < cancelled["model_steps"] < 13  # stopped midway through its 13 model steps
    assert len(_ends(cancelled)) == 1 and _ends(cancelled)[0] == cancelled["transitions"][-1]
    assert events[-1][0] == "end" and events[-1][2]["reason"] == "cancelled"
    # Cancelled before any worker took it: it ends at once, never driven, one record.
    assert (ended_queued["state"], ended_queued["reason"]) == ("abstain", "cancelled")
    assert ended_queued["model_steps"] == 0 and len(ended_queued["transitions"]) == 1
    with psycopg.connect(pg_url) as conn:
        asked = conn.execute("SELECT run_id, requested_by FROM runner_cancels").fetchall()
    assert sorted(asked) == sorted([(queued, "agent-7"), (going, "agent-7")])


def _pending(service: Service, run_id: str, key: str = A) -> list[dict[str, Any]]:
    with service.client(key) as client:
        listed = client.get("/v1/approvals")
    assert listed.status_code == 200, listed.text
    return [p for p in listed.json()["approvals"] if p["run_id"] == run_id]


def _continued(service: Service, run_id: str, timeout_s: float = 60.0) -> str:
    deadline = time.monotonic() + timeout_s
    with service.client() as client:
        while (found := client.get(f"/v1/runs/{run_id}").json()["continued_as"]) is None:
            assert time.monotonic() < deadline, "the decided run was never continued"
            time.sleep(0.1)
    return str(found)


def test_approvals_through_the_other_service_continue_on_a_worker_and_commit_once(
    pg_url: str, tmp_path: Path
) -> None:
    with two_services(pg_url, tmp_path) as (first, second, env), workers(pg_url, tmp_path, env):
        approved, denied = first.submit("hold_approved"), first.submit("hold_denied")
        for run_id in (approved, denied):
            run = second.wait_ended(run_id)
            assert (run["state"], run["reason"], run["holds"]) == (
                "escalate",
                "approval_required",
                0,
            )
        (pending,) = _pending(second, approved)
        assert pending["tool"] == "hold_room" and pending["summary"].startswith("Hold 1")
        assert _pending(second, approved, B) == []  # another tenant sees none of them
        approval_id = pending["approval_id"]
        with second.client(B) as other_tenant:
            refused = other_tenant.post(f"/v1/approvals/{approval_id}/approve")
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "no_approval"
        with second.client(A_READ) as reader:
            assert reader.post(f"/v1/approvals/{approval_id}/approve").status_code == 403
        with second.client() as client:
            decided = client.post(f"/v1/approvals/{approval_id}/approve", json={"note": "ok"})
            assert decided.status_code == 200, decided.text
            assert decided.json() == {
                "approval_id": approval_id,
                "run_id": approved,
                "verdict": "approved",
                "approver": "agent-7",  # the key's principal
            }
        with first.client() as client:  # a second decision, through the other process
            again = client.post(f"/v1/approvals/{approval_id}/deny")
        assert again.status_code == 409 and again.json()["error"]["code"] == "decided"
        (to_deny,) = _pending(first, denied)
        with first.client() as client:
            refusal = client.post(f"/v1/approvals/{to_deny['approval_id']}/deny")
        assert refusal.status_code == 200 and refusal.json()["verdict"] == "denied"
        continuation = _continued(first, approved)
        final = first.wait_ended(continuation)
        refused_run = second.wait_ended(_continued(second, denied))
        assert _pending(first, approved) == [] and _pending(second, denied) == []
        with second.client() as client:  # in the order they were accepted, on the wall clock
            newest = client.get("/v1/runs", params={"order": "newest"}).json()["runs"]
        assert {item["run_id"] for item in newest[:2]} == {continuation, refused_run["run_id"]}
        assert [item["run_id"] for item in newest[2:4]] == [denied, approved]
    assert (final["state"], final["reason"], final["holds"]) == ("complete", "model_final", 1)
    assert final["continues"] == approved and len(_ends(final)) == 1
    commits = [
        t for t in final["transitions"] if t["tool"] == "hold_room" and t["trigger"] == "classify"
    ]
    assert len(commits) == 1  # the hold was sent once, under the proposed key
    assert (refused_run["state"], refused_run["holds"]) == ("abstain", 0)
    with psycopg.connect(pg_url) as conn:
        decisions = conn.execute(
            "SELECT run_id, status, proposal::jsonb->'decision'->>'approver' "
            "FROM runner_approvals ORDER BY run_id"
        ).fetchall()
        uses = conn.execute("SELECT run_id FROM runner_token_uses").fetchall()
    assert sorted(decisions) == sorted(
        [(approved, "approved", "agent-7"), (denied, "denied", "agent-7")]
    )
    assert uses == [(continuation,)]  # the confirm token used once, by the continuation


def test_a_decision_whose_continuation_was_never_queued_is_queued_once_by_the_next_service(
    pg_url: str, tmp_path: Path
) -> None:
    """A decision and its queued continuation are two writes: a service process that stopped
    between them left the run waiting, and a second decision is refused (decided). The next
    service process to start queues it; the one after finds it queued."""
    env = {**os.environ, "RUNNER_WORLD": str(tmp_path / "world"), "RUNNER_APPROVAL_SECRET": SECRET}
    with serving(tmp_path / "s1", url=pg_url, env=env) as first, workers(pg_url, tmp_path, env):
        waiting = first.submit("hold_approved")
        assert first.wait_ended(waiting)["reason"] == "approval_required"
    decide_in_store(
        BlockingStore(lambda: PostgresStore.open(pg_url)), waiting
    )  # nothing continues it
    with (
        serving(tmp_path / "s2", url=pg_url, env=env) as second,
        serving(tmp_path / "s3", url=pg_url, env=env),
        workers(pg_url, tmp_path, env),
    ):
        final = second.wait_ended(_continued(second, waiting))
    assert (final["state"], final["holds"]) == ("complete", 1)
    with psycopg.connect(pg_url) as conn:
        (queued,) = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE args->>'run_id' = %s "
            "AND args->'document' ? 'continue_after_approval'",
            (waiting,),
        ).fetchone() or (None,)
    assert queued == 1


class _Job:
    id = 1


class _Context:
    job = _Job()


def test_a_run_resumed_after_its_worker_died_ends_cancelled_past_what_it_recorded(
    pg_url: str, tmp_path: Path
) -> None:
    """A cancel asked for while nobody drove the run: the worker that resumes it re-drives what
    the dead one recorded (never cut short: that would diverge from the record), then ends it
    `cancelled` at its first new transition, with one terminal record."""
    world = tmp_path / "world"
    env = {k: v for k, v in os.environ.items() if k != "RUNNER_KILL_AFTER_COMMITS"}
    env.update(RUNNER_WORLD=str(world), RUNNER_KILL_AFTER_COMMITS="8")
    fixture = write_long_fixture(tmp_path)
    died = subprocess.run(
        [sys.executable, "-m", "runner", "run", str(fixture), "--db", pg_url],
        cwd=tmp_path, env=env, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert died.returncode == -signal.SIGKILL, died.stderr
    store = BlockingStore(lambda: PostgresStore.open(pg_url))
    try:
        [listing] = store.runs()
        assert isinstance(listing, RunListing) and listing.summary is None
        run_id = listing.header.run_id
        recorded = store.transitions(run_id)
        assert len(recorded) == 8
        assert store.request_cancel(run_id, datetime.now(UTC), "agent-7")
        assert not store.request_cancel(run_id, datetime.now(UTC), "agent-7")  # asked once
        lines: list[str] = []
        play = fixture_player(load_travel_contracts(), world)
        driver = RunDriver(store, play=play, settings=WorkerSettings(name="w"), report=lines.append)
        asyncio.run(driver.drive(_Context(), run_id, {}, 0))  # type: ignore[arg-type]
        records, summary = store.transitions(run_id), store.summary(run_id)
    finally:
        store.close()
    assert lines == [f"{run_id} resumed abstain (cancelled)"]
    assert summary is not None and (summary.terminal, summary.reason) == ("abstain", "cancelled")
    assert records[:8] == recorded  # what it recorded stands
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    ends = [r for r in records if r.to_state in TERMINAL]
    assert ends == [records[-1]] and len(records) <= 8 + 3  # within one step of the resume
