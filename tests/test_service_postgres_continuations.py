"""Continuations of decided approvals through `runner serve` on PostgreSQL, driven by workers:
their tokens are checked when a worker starts them, and the waiting run's view says where its
continuation stands (tests/test_service_continuations.py has the same on SQLite)."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner.approvals import DEFAULT_TTL
from runner.cli import main
from runner.cli._distributed import fixture_player
from runner.clock import FakeClock
from runner.confirm import ApprovalSecret
from runner.distributed.worker import RunDriver, WorkerSettings
from runner.store.adapters import BlockingStore
from runner.store.base import RunListing
from runner.store.postgres import PostgresStore
from runner.travel import load_travel_contracts
from tests.conftest import FIXTURES
from tests.service_harness import SECRET, loopback, serving

__all__ = ["loopback"]

pytestmark = pytest.mark.usefixtures("loopback")


class _Job:
    id = 1


class _Context:
    job = _Job()


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
