"""Continuations of decided approvals through `runner serve` on PostgreSQL, driven by workers:
their tokens are checked when a worker starts them, and the waiting run's view says where its
continuation stands (tests/service/test_continuations.py has the same on SQLite)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner.base.clock import FakeClock
from runner.cli import main
from runner.cli._distributed import fixture_player
from runner.core.confirm import ApprovalSecret
from runner.distributed.worker import RunDriver, WorkerSettings
from runner.engine.approvals import DEFAULT_TTL
from runner.service.queued import REFUSED_ON_A_WORKER
from runner.store.adapters import BlockingStore
from runner.store.base import RunListing
from runner.store.postgres import PostgresStore
from runner.travel import load_travel_contracts
from tests.support.paths import FIXTURES
from tests.support.service_harness import (
    SECRET,
    TWO_HOLDS,
    Service,
    decide_in_store,
    loopback,
    serving,
    two_holds_fixtures,
    workers,
)

__all__ = ["loopback"]

pytestmark = pytest.mark.usefixtures("loopback")


class _Job:
    id = 1


class _Context:
    job = _Job()


def _continuation_jobs(url: str, run_id: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE args->>'run_id' = %s "
            "AND args->'document' ? 'continue_after_approval'",
            (run_id,),
        ).fetchone()
    return int(row[0]) if row else 0


def _view(service: Service, run_id: str) -> dict[str, Any]:
    with service.client() as client:
        found: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
    return found


def _queued_continuation(url: str, run_id: str) -> dict[str, Any]:
    """The arguments of the continuation job the service queued for `run_id`."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT args FROM procrastinate_jobs WHERE args->>'run_id' = %s "
            "AND args->'document' ? 'continue_after_approval'",
            (run_id,),
        ).fetchall()
    (args,) = [row[0] for row in rows]
    found: dict[str, Any] = args
    return found


def test_a_token_that_expires_while_its_continuation_is_queued_is_refused_by_the_worker(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The worker checked the tokens at the time the queued job carried (the decision's): one
    taken from the queue past the token's TTL, every worker busy meanwhile, still went ahead.
    It checks them against its own clock when it starts the continuation."""
    world = tmp_path / "world"
    monkeypatch.setenv("RUNNER_WORLD", str(world))
    monkeypatch.setenv("RUNNER_APPROVAL_SECRET", SECRET)
    fixture = FIXTURES / "approval" / "hold_approved.yaml"
    assert main(["run", str(fixture), "--db", pg_url, "--json"]) == 0
    waiting = json.loads(capsys.readouterr().out)["run_id"]
    env = {**os.environ, "RUNNER_WORLD": str(world), "RUNNER_APPROVAL_SECRET": SECRET}
    with serving(tmp_path / "s", url=pg_url, env=env) as service:  # no worker takes the job
        (pending,) = service.pending(waiting)
        with service.client() as client:
            decided = client.post(f"/v1/approvals/{pending['approval_id']}/approve")
        assert decided.status_code == 200, decided.text
        job = _queued_continuation(pg_url, waiting)
        clock = FakeClock(datetime.now(UTC))
        clock.advance(DEFAULT_TTL.total_seconds() + 1)  # the worker takes it past the TTL
        store = BlockingStore(lambda: PostgresStore.open(pg_url))
        lines: list[str] = []
        try:
            play = fixture_player(
                load_travel_contracts(), world, secret=ApprovalSecret(SECRET), clock=clock
            )
            driver = RunDriver(
                store, play=play, settings=WorkerSettings(name="w"), report=lines.append
            )
            asyncio.run(driver.drive(_Context(), job["run_id"], job["document"], job["seed"]))  # type: ignore[arg-type]
            continuing = [
                item.header.run_id
                for item in store.runs()
                if isinstance(item, RunListing)
                and (item.header.continues or {}).get("run_id") == waiting
            ]
        finally:
            store.close()
        with service.client() as client:
            run = client.get(f"/v1/runs/{waiting}").json()
    (line,) = lines
    assert line.startswith(f"{waiting} not continued: ") and "expired" in line, line
    assert continuing == [] and run["continued_as"] is None and run["holds"] == 0, run


def test_a_waiting_run_on_postgresql_says_where_its_continuation_stands(
    pg_url: str, tmp_path: Path
) -> None:
    """Waiting for two decisions, then one; nothing queued for a worker to refuse until both
    are decided; then queued, running on a worker, ended, with the continuation's run id."""
    env = {**os.environ, "RUNNER_WORLD": str(tmp_path / "world"), "RUNNER_APPROVAL_SECRET": SECRET}
    settings = {"fixtures": two_holds_fixtures(tmp_path)}
    with (
        serving(tmp_path / "s", url=pg_url, env=env, **settings) as service,
        workers(pg_url, tmp_path, env, count=1),
    ):
        waiting = service.submit(TWO_HOLDS)
        run = service.wait_ended(waiting)
        assert run["reason"] == "approval_required", run
        assert run["continuation"] == {"state": "waiting", "waiting_for": 2, "run_id": None}
        first, second = service.pending(waiting)
        with service.client() as client:
            assert client.post(f"/v1/approvals/{first['approval_id']}/approve").status_code == 200
            half = client.get(f"/v1/runs/{waiting}").json()
            jobs_after_one = _continuation_jobs(pg_url, waiting)
            assert client.post(f"/v1/approvals/{second['approval_id']}/approve").status_code == 200
        seen = []
        deadline = time.monotonic() + 90
        while (view := _view(service, waiting))["continuation"]["state"] != "ended":
            assert time.monotonic() < deadline and view["continuation_error"] is None, view
            seen.append((view["continuation"]["state"], view["continuation"]["run_id"]))
            time.sleep(0.05)
        final = service.wait_ended(view["continued_as"])
    assert half["continuation"] == {"state": "waiting", "waiting_for": 1, "run_id": None}
    assert (half["continuation_error"], jobs_after_one) == (None, 0)
    continued = final["run_id"]
    assert view["continuation"] == {"state": "ended", "waiting_for": 0, "run_id": continued}
    assert ("running", continued) in seen  # the worker paces its transitions: seen going
    assert {state for state, _ in seen} <= {"queued", "running"}
    assert (final["state"], final["holds"]) == ("complete", 2)
    assert _continuation_jobs(pg_url, waiting) == 1


def test_a_continuation_a_worker_refused_shows_as_failed_on_postgresql(
    pg_url: str, tmp_path: Path
) -> None:
    """A decision whose token expired before any worker began its continuation: the worker
    refuses it, and the waiting run says so (it said nothing at all)."""
    env = {**os.environ, "RUNNER_WORLD": str(tmp_path / "world"), "RUNNER_APPROVAL_SECRET": SECRET}
    with serving(tmp_path / "s1", url=pg_url, env=env) as first, workers(pg_url, tmp_path, env):
        waiting = first.submit("hold_approved")
        assert first.wait_ended(waiting)["reason"] == "approval_required"
    store = BlockingStore(lambda: PostgresStore.open(pg_url))
    decide_in_store(store, waiting, ttl=timedelta(seconds=1))  # no continuation queued
    time.sleep(1.5)  # it expires before any worker takes it
    with serving(tmp_path / "s2", url=pg_url, env=env) as second, workers(pg_url, tmp_path, env):
        deadline = time.monotonic() + 90
        while (view := _view(second, waiting))["continuation"]["state"] != "failed":
            assert time.monotonic() < deadline, view
            assert view["continuation"]["state"] == "queued", view
            time.sleep(0.05)
    assert view["continuation"] == {"state": "failed", "waiting_for": 0, "run_id": None}
    assert view["continuation_error"] == REFUSED_ON_A_WORKER
    assert view["continued_as"] is None and view["holds"] == 0
