"""`runner serve` on PostgreSQL: two service processes and two `runner worker`s on one store (a
throwaway cluster, tests/support/pg.py). Runs submitted to either service are driven by the
workers and read, listed and streamed from the other; tenant isolation holds across processes; a
cancel of a run that ended is refused (409). Cancel and approvals:
tests/service/test_postgres_control.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.support.service_harness import B, Service, loopback, read_events, serving, write_config

__all__ = ["loopback"]

RUNS = 12


def _worker(url: str, cwd: Path, env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "runner", "worker", "--db", url, "--concurrency", "2",
         "--heartbeat", "0.5", "--stalled-after", "3", "--lease", "2", "--name", name],
        cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


@pytest.mark.usefixtures("loopback")
def test_two_services_and_two_workers_share_one_postgres_store(pg_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "RUNNER_WORLD": str(tmp_path / "world")}
    with (
        serving(tmp_path / "s1", url=pg_url, env=env) as first,
        serving(tmp_path / "s2", url=pg_url, env=env) as second,
    ):
        services: list[Service] = [first, second]
        submitted: list[tuple[int, str]] = []
        for n in range(RUNS):
            with services[n % 2].client() as client:
                response = client.post("/v1/runs", json={"fixture": "read_only_success"})
            assert response.status_code == 202, response.text
            submitted.append((n % 2, response.json()["run_id"]))
        with second.client() as client:  # queued, not started: still found, by its job
            queued = client.get(f"/v1/runs/{submitted[0][1]}").json()
            waiting = client.get("/v1/runs", params={"limit": 100}).json()
        assert queued["status"] == "queued" and queued["accepted_at"] is not None
        assert (queued["fixture"], queued["transitions"]) == ("read_only_success", [])
        assert waiting["total"] == RUNS  # listed while no worker has begun them
        assert {item["status"] for item in waiting["runs"]} == {"queued"}
        assert [item["run_id"] for item in waiting["runs"]] == [run for _, run in submitted]
        with second.client(B) as other_tenant:
            assert other_tenant.get("/v1/runs").json()["total"] == 0
        workers = [_worker(pg_url, tmp_path, env, f"w{n}") for n in range(2)]
        try:
            for where, run_id in submitted:
                other = services[1 - where]  # read from the process that did not accept it
                run = other.wait_ended(run_id)
                assert (run["state"], run["reason"], run["tenant"]) == (
                    "complete",
                    "model_final",
                    "optiverse",
                )
            with first.client() as client:
                events = read_events(client, submitted[1][1])  # accepted by the second
                listed = client.get("/v1/runs", params={"limit": 100}).json()
                refused = client.post(f"/v1/runs/{submitted[2][1]}/cancel")
            assert events[-1][0] == "end" and events[-1][2]["terminal"] == "complete"
            assert listed["total"] == RUNS
            assert refused.status_code == 409 and refused.json()["error"]["code"] == "ended"
            for service in services:
                with service.client(B) as other_tenant:
                    for _, run_id in submitted[:3]:
                        assert other_tenant.get(f"/v1/runs/{run_id}").status_code == 404
                    assert other_tenant.get("/v1/runs").json()["total"] == 0
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                worker.wait(timeout=60)


def test_the_service_reads_on_one_kept_connection_and_opens_it_again_once_broken(
    pg_url: str, tmp_path: Path
) -> None:
    """Each read of the queue once opened a connection of its own (~2.8 ms against ~0.09 ms
    for the read itself); one is kept now, and a broken one is replaced, the read answered."""
    from runner.service.config import ServiceConfig  # noqa: PLC0415
    from runner.service.queued import QueuedRunService  # noqa: PLC0415  # needs psycopg
    from runner.travel import TRAVEL, load_travel_contracts  # noqa: PLC0415

    config = ServiceConfig.load(write_config(tmp_path))
    service = QueuedRunService(
        config, pg_url, load_travel_contracts(), None, tmp_path / "world", world=TRAVEL
    )
    with psycopg.connect(pg_url, autocommit=True) as admin, closing(service.shared):
        admin.execute("CREATE TABLE IF NOT EXISTS procrastinate_jobs (args jsonb)")
        admin.execute(
            "INSERT INTO procrastinate_jobs VALUES (%s)",
            (Jsonb({"run_id": "r-1", "document": {"tenant": "acme"}}),),
        )
        assert service.queued_tenant("r-1") == "acme"
        kept = service._connection
        assert kept is not None
        assert service.queued_tenant("r-2") is None and service._connection is kept
        admin.execute("SELECT pg_terminate_backend(%s)", (kept.info.backend_pid,))
        assert service.queued_tenant("r-1") == "acme"  # read again on a new connection
        assert service._connection is not kept and kept.closed
        admin.execute("DROP TABLE procrastinate_jobs")


@pytest.mark.usefixtures("loopback")
def test_a_full_queue_is_429_on_postgresql_too(pg_url: str, tmp_path: Path) -> None:
    """`max_queued` was counted on SQLite only: with no worker, six submits to a service with
    `max_queued: 3` were all accepted. The queue is counted, whoever queued the runs."""
    env = {**os.environ, "RUNNER_WORLD": str(tmp_path / "world")}
    with (
        serving(tmp_path / "s", url=pg_url, env=env, max_queued=3) as service,
        service.client() as client,
    ):
        codes = [client.post("/v1/runs", json={"fixture": "read_only_success"}) for _ in range(5)]
    assert [r.status_code for r in codes] == [202, 202, 202, 429, 429]
    refused = codes[3].json()["error"]
    assert refused["code"] == "queue_full" and refused["message"].startswith("3 runs are waiting")


@pytest.mark.usefixtures("loopback")
@pytest.mark.parametrize("sent", ["9223372036854775808", "99999999999999999999", "1000000001"])
def test_a_last_event_id_past_the_bound_is_400_on_postgresql_too(
    pg_url: str, tmp_path: Path, sent: str
) -> None:
    """Past 2^63 it reached PostgreSQL as a bigint it cannot hold: a 500. Refused as on SQLite;
    one within the bound still opens the stream (a queued run: nothing to send yet)."""
    env = {**os.environ, "RUNNER_WORLD": str(tmp_path / "world")}
    with serving(tmp_path / "s", url=pg_url, env=env) as service, service.client() as client:
        run_id = service.submit("read_only_success")  # no worker: it stays queued
        path = f"/v1/runs/{run_id}/events"
        statuses, bodies = [], []
        for last in (sent, "1000000000"):  # a stream that opens never ends: read no body
            with client.stream("GET", path, headers={"Last-Event-ID": last}) as response:
                statuses.append(response.status_code)
                if response.status_code != 200:
                    bodies.append(json.loads(response.read()))
    assert statuses == [400, 200], bodies
    assert bodies[0]["error"]["code"] == "bad_last_event_id"
