"""`runner serve` started for real (uvicorn in a child process on a free loopback port), and an
HTTP client for it: what the service tests share."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml

from runner.base.clock import Clock
from runner.core.confirm import ApprovalSecret
from runner.engine.approvals import approve, pending_approvals
from runner.travel import load_travel_contracts
from tests.support.network import allow_loopback_only

SECRET = "a-test-approval-secret-of-enough-bytes-0123456789"
KEYS: dict[str, dict[str, Any]] = {
    "key-a-all-roles": {
        "tenant": "optiverse",
        "principal": {"id": "agent-7", "scopes": ["travel.read", "travel.book"]},
        "roles": ["submit", "read", "approve"],
    },
    "key-a-read-only": {
        "tenant": "optiverse",
        "principal": {"id": "auditor", "scopes": ["travel.read"]},
        "roles": ["read"],
    },
    "key-b-all-roles": {
        "tenant": "othercorp",
        "principal": {"id": "agent-9", "scopes": ["travel.read", "travel.book"]},
        "roles": ["submit", "read", "approve"],
    },
}
A, A_READ, B = "key-a-all-roles", "key-a-read-only", "key-b-all-roles"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


LONG = "long_search"
"""A configured fixture of many model steps (one search each): a run long enough to watch."""


def write_long_fixture(folder: Path, steps: int = 12) -> Path:
    option = {"hotel_id": "H-SHIBA", "name": "Shiba Park Hotel",
              "accessible_room_status": "reported_available"}  # fmt: skip
    search = {"city": "Tokyo", "check_in": "2027-04-02", "check_out": "2027-04-06",
              "accessibility": "wheelchair", "guests": 2}  # fmt: skip
    fixture = {
        "name": LONG,
        "description": "Searches again and again before answering.",
        "task": "Find an accessible Tokyo hotel.",
        "tenant": "optiverse",
        "principal": {"id": "agent-7", "scopes": ["travel.read"]},
        "budget": {"max_attempts": 50, "max_seconds": 600, "max_model_steps": 50},
        "clock": {"start": "2027-03-01T09:00:00Z"},
        "tools": ["search_hotels"],
        "environment": {
            "search_hotels": [
                {
                    "latency_s": 0.2,
                    "respond": {
                        "status": "ok",
                        "options": [option],
                        "source_timestamp": "2027-03-01T09:00:00Z",
                    },
                }
            ]
            * steps
        },
        "model": [{"tool_calls": [{"name": "search_hotels", "args": search}]}] * steps
        + [{"final": "Shiba Park Hotel (accessible room reported available)."}],
    }
    path = folder / "long_search.yaml"
    path.write_text(yaml.safe_dump(fixture), encoding="utf-8")
    return path


TWO_HOLDS = "two_holds_approved"
"""A fixture whose model holds two rooms in one reply, each write needing approval."""


def two_holds_fixtures(folder: Path) -> list[str]:
    """The service's configured fixtures: the long search and `TWO_HOLDS`."""
    hold = {"hotel_id": "H-SHIBA", "check_in": "2027-04-02", "check_out": "2027-04-06",
            "guests": 2, "room_type": "accessible"}  # fmt: skip
    search = {"city": "Tokyo", "check_in": "2027-04-02", "check_out": "2027-04-06",
              "accessibility": "wheelchair", "guests": 4}  # fmt: skip
    option = {"hotel_id": "H-SHIBA", "name": "Shiba Park Hotel",
              "accessible_room_status": "reported_available"}  # fmt: skip
    fixture = {
        "name": TWO_HOLDS,
        "description": "Two holds in one reply, each approved on its own.",
        "task": "Hold two accessible rooms at Shiba Park Hotel, 2027-04-02..06, two guests each.",
        "tenant": "optiverse",
        "principal": {"id": "agent-7", "scopes": ["travel.read", "travel.book"]},
        "tools": ["search_hotels", "hold_room", "lookup_hold"],
        "environment": {
            "search_hotels": [
                {
                    "respond": {
                        "status": "ok",
                        "options": [option],
                        "source_timestamp": "2027-03-01T09:00:00Z",
                    }
                }
            ],
            "hold_room": [{"write": "commit"}, {"write": "commit"}],
        },
        "model": [
            {"tool_calls": [{"name": "search_hotels", "args": search}]},
            {
                "tool_calls": [
                    {"name": "hold_room", "args": hold},
                    {"name": "hold_room", "args": {**hold, "room_type": "standard"}},
                ]
            },
            {"final": "Held two rooms at Shiba Park Hotel."},
        ],
        "approval": {"rules": {"tools": ["hold_room"]}},
        "expect": {"terminal": "escalate", "reason": "approval_required", "holds": 0},
    }
    path = folder / "two_holds.yaml"
    path.write_text(yaml.safe_dump(fixture), encoding="utf-8")
    return [str(write_long_fixture(folder)), str(path)]


def write_config(folder: Path, **settings: Any) -> Path:
    config = {
        "fixtures": [str(write_long_fixture(folder))],
        "api_keys": [{"key": key, **value} for key, value in KEYS.items()],
        "approval_secret": SECRET,
        **settings,
    }
    path = folder / "service.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


class Service:
    def __init__(self, url: str, db: Path, process: subprocess.Popen[bytes] | None) -> None:
        """`process`: the `runner serve` child (None: served in this process, `serving_here`)."""
        self.url = url
        self.db = db
        self.process = process

    def client(self, key: str | None = A, timeout: float = 30.0) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def submit(self, fixture: str, key: str = A) -> str:
        """POST a fixture run; its id (the answer must be 202)."""
        with self.client(key) as client:
            response = client.post("/v1/runs", json={"fixture": fixture})
        assert response.status_code == 202, response.text
        run_id: str = response.json()["run_id"]
        return run_id

    def pending(self, run_id: str, key: str = A) -> list[dict[str, Any]]:
        """The approvals pending for `run_id`, as `key` lists them."""
        with self.client(key) as client:
            listed: list[dict[str, Any]] = client.get("/v1/approvals").json()["approvals"]
        return [p for p in listed if p["run_id"] == run_id]

    def wait_ended(self, run_id: str, key: str = A, timeout_s: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        with self.client(key) as client:
            while True:
                run: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
                if run.get("status") == "ended" or time.monotonic() > deadline:
                    return run
                time.sleep(0.05)


@contextmanager
def serving(
    folder: Path, *, url: str | None = None, env: dict[str, str] | None = None, **settings: Any
) -> Iterator[Service]:
    """`runner serve` on a SQLite file in `folder` (or the PostgreSQL store `url`), until the
    block ends."""
    folder.mkdir(parents=True, exist_ok=True)
    config = write_config(folder, **settings)
    db = folder / "runs.sqlite"
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    env.pop("RUNNER_APPROVAL_SECRET", None)
    log = (folder / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "runner", "serve", "--config", str(config), "--db", url or str(db),
         "--port", str(port)],
        cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    "runner serve did not start: " + (folder / "serve.log").read_text()
                )
            time.sleep(0.1)
        yield Service(url, db, process)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@contextmanager
def serving_here(folder: Path, *, clock: Clock, **settings: Any) -> Iterator[Service]:
    """The SQLite service's app in this process (uvicorn on a loopback port, in a thread), its
    wall clock `clock`: for a test that moves the service's time (a child's clock is its own).
    Real HTTP all the same; the app is `runner serve`'s (`build_app`)."""
    from runner.service import ServiceConfig, build_app  # noqa: PLC0415  # the service extra

    folder.mkdir(parents=True, exist_ok=True)
    config = ServiceConfig.load(write_config(folder, **settings))
    db = folder / "runs.sqlite"
    app = build_app(config, db, load_travel_contracts(), clock=clock)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="serving-here", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the app did not start"
            time.sleep(0.02)
        yield Service(f"http://127.0.0.1:{port}", db, None)
    finally:
        server.should_exit = True
        thread.join(30)
        app.state.service.close()


PACE_S = 0.1
"""Real seconds a worker's run pauses per transition: the long fixture then lasts seconds."""


@contextmanager
def workers(url: str, cwd: Path, env: dict[str, str], count: int = 2) -> Iterator[None]:
    command = [sys.executable, "-m", "runner", "worker", "--db", url, "--concurrency", "2",
               "--heartbeat", "0.5", "--stalled-after", "3", "--lease", "2",
               "--pace", str(PACE_S)]  # fmt: skip
    logs = [(cwd / f"worker-{n}.log").open("wb") for n in range(count)]  # for a failure
    started = [
        subprocess.Popen(
            [*command, "--name", f"w{n}"],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        for n, log in enumerate(logs)
    ]
    try:
        yield
    finally:
        for worker in started:
            worker.send_signal(signal.SIGTERM)
        for worker in started:
            worker.wait(timeout=60)
        for log in logs:
            log.close()


def read_events(
    client: httpx.Client,
    run_id: str,
    last_event_id: str | None = None,
    stop_after: int | None = None,
) -> list[tuple[str, str | None, dict[str, Any]]]:
    """The events stream's events (event, id, data), until `end` or `stop_after` events."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
    events: list[tuple[str, str | None, dict[str, Any]]] = []
    with client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        event, ident, data = "message", None, ""
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("id:"):
                ident = line[3:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif line == "" and data:
                events.append((event, ident, json.loads(data)))
                if event == "end" or (stop_after is not None and len(events) >= stop_after):
                    return events
                event, ident, data = "message", None, ""
    return events


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The no-network guard, lifted for 127.0.0.1 alone."""
    allow_loopback_only(monkeypatch)


def decide_in_store(store: Any, run_id: str, ttl: timedelta = timedelta(minutes=30)) -> None:
    """Approve `run_id`'s one pending proposal in `store` itself, then close it: what a service
    process that stopped after storing a decision, before its continuation's job, left."""
    try:
        (proposal,) = pending_approvals(store, run_id)
        approve(
            store,
            run_id,
            proposal.operation_key,
            approver="ops",
            secret=ApprovalSecret(SECRET),
            now=datetime.now(UTC),
            ttl=ttl,
        )
    finally:
        store.close()
