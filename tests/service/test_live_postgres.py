"""Live-model runs through the service on PostgreSQL: the service queues the run's document (its
fixture and the model's name, never a key) and a `runner worker --config` builds the model from
its own config and environment. A throwaway cluster (tests/support/pg.py), the loopback provider
server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live_service import ENV, KEYS, live, live_settings, submit
from tests.support.llm_server import RecordedLLMServer, load_recordings
from tests.support.service_harness import loopback, serving

__all__ = ["loopback"]


@pytest.fixture
def llm() -> Iterator[RecordedLLMServer]:
    with RecordedLLMServer(load_recordings(), by_turn=True) as server:
        yield server


def _worker(url: str, folder: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "runner", "worker", "--db", url, "--heartbeat", "0.5",
         "--config", str(folder / "service.yaml")],
        cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


@pytest.mark.usefixtures("loopback")
def test_a_live_run_is_queued_and_a_worker_builds_its_model_from_its_own_config(
    pg_url: str, tmp_path: Path, llm: RecordedLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from runner.cli import main  # noqa: PLC0415  # beside the other CLI imports it would shadow

    folder = tmp_path / "service"
    folder.mkdir()
    world = {**os.environ, "RUNNER_WORLD": str(tmp_path / "world")}
    # The service process has no keys: only the worker, which builds the models, has them.
    with serving(folder, url=pg_url, env=world, **live_settings(folder, llm.url)) as service:
        with service.client() as client:
            response = client.post("/v1/runs", json=live("anthropic:fixture-read_only_success"))
            assert response.status_code == 202, response.text
            run_id = response.json()["run_id"]
            refused = client.post("/v1/runs", json=live(tools=["book_flight"]))
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "unknown_tool"
        queued = _queued_documents(pg_url)
        assert len(queued) == 1 and queued[0]["live_model"] == "anthropic:fixture-read_only_success"
        worker = _worker(pg_url, folder, {**world, **ENV})
        try:
            run = service.wait_ended(run_id)
        finally:
            worker.send_signal(signal.SIGTERM)
            _, errors = worker.communicate(timeout=60)
        assert (run["state"], run["reason"], run["fixture"]) == ("complete", "model_final", "live")
        assert "NH7" in run["answer"], errors
        with service.client() as client:
            seen = client.get(f"/v1/runs/{run_id}").text + client.get("/v1/runs").text
    for key in KEYS.values():
        assert key not in seen and key not in json.dumps(queued)
        assert key.encode() not in errors
    capsys.readouterr()
    assert main(["replay", run_id, "--db", pg_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["identical"] is True


def _queued_documents(url: str) -> list[dict[str, object]]:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute("SELECT args->'document' FROM procrastinate_jobs").fetchall()
    return [row[0] for row in rows]


@pytest.mark.usefixtures("loopback")
def test_a_worker_without_the_config_says_so_and_hands_the_live_run_back_until_one_with_it_comes(
    pg_url: str, tmp_path: Path, llm: RecordedLLMServer
) -> None:
    folder = tmp_path / "service"
    folder.mkdir()
    world = {**os.environ, "RUNNER_WORLD": str(tmp_path / "world")}
    with serving(folder, url=pg_url, env=world, **live_settings(folder, llm.url)) as service:
        run_id = submit(service, live("openai:fixture-read_only_success"))
        bare = subprocess.Popen(
            [sys.executable, "-m", "runner", "worker", "--db", pg_url, "--heartbeat", "0.5",
             "--handback", "0.5"],
            cwd=folder, env={**world, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        lines: list[str] = []
        try:
            assert bare.stdout is not None
            while len([line for line in lines if run_id in line]) < 3:  # said each time
                line = bare.stdout.readline().decode()
                assert line, "".join(lines)
                lines.append(line)
        finally:
            bare.send_signal(signal.SIGTERM)
            rest, _ = bare.communicate(timeout=60)
        said = [line for line in lines if run_id in line]
        assert all("start the worker with --config SERVICE_YAML" in line for line in said), said
        assert "handed back to the queue" in said[0]
        assert service.wait_ended(run_id, timeout_s=1)["status"] == "queued"  # not lost, not run
        assert _job_status(pg_url, run_id) == "todo"  # handed back, not failed after retries
        worker = _worker(pg_url, folder, {**world, **ENV})
        try:
            run = service.wait_ended(run_id)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.communicate(timeout=60)
    assert (run["state"], run["reason"]) == ("complete", "model_final"), rest.decode()


def _job_status(url: str, run_id: str) -> str:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(url, autocommit=True) as connection:
        sql = "SELECT status FROM procrastinate_jobs WHERE args->>'run_id' = %s"
        row = connection.execute(sql, (run_id,)).fetchone()
    assert row is not None
    return str(row[0])
