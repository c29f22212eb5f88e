"""A run has one driver at a time, whoever starts it, and a resume goes on as the run began.

A second driver (another process's `Engine.resume`, `runner resume` beside `runner serve`, a
second task of the same process) is refused with `ResumeRefused` naming the holder, before
anything is stored or sent; a driver that died (SIGKILL) does not hold the run back. A resume
whose spec would mint other operation keys or act under other authority than the header's
(tenant, principal, scopes, task, tools, context, policy) is refused the same way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runner import (
    Engine,
    FunctionTools,
    MemoryStore,
    Principal,
    SqliteStore,
    SystemClock,
    ToolResponse,
)
from runner.base.clock import FakeClock
from runner.base.errors import ResumeRefused
from runner.core.budget import Limits
from runner.core.confirm import ApprovalSecret
from runner.core.policy import ApprovalRules, Policy
from runner.core.states import State
from runner.engine._ownership import this_process
from runner.engine.approvals import approve
from runner.store.base import Store
from runner.testing import FunctionModel
from runner.tools.contracts import ContractSet
from runner.tools.invocation import ToolInvocation
from tests.support import one_driver_play as play
from tests.support.hostile_runs import START, spec
from tests.support.paths import ROOT
from tests.support.service_harness import LONG, loopback, serving
from tests.support.timed_supplier import SearchThenHold, Supplier

pytestmark = pytest.mark.slow

__all__ = ["loopback"]


def _play(*args: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RUNNER_KILL_AFTER_COMMITS"}
    return subprocess.run(
        [sys.executable, "-m", "tests.support.one_driver_play", *map(str, args)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _sent(sent: Path) -> list[str]:
    return sent.read_text().splitlines() if sent.exists() else []


def _stored(db: Path, run_id: str) -> tuple[int, str | None]:
    """How many transitions the run has stored, and how it ended (None: not yet)."""
    store = SqliteStore(db, read_only=True)
    try:
        records = store.transitions(run_id)
        assert [r.seq for r in records] == list(range(1, len(records) + 1))
        summary = store.summary(run_id)
        return len(records), summary.terminal if summary is not None else None
    finally:
        store.close()


def _crashed(tmp_path: Path) -> tuple[Path, Path, str]:
    """A run killed (SIGKILL) right after its refund was sent: its db, sent log and id."""
    db, sent = tmp_path / "runs.sqlite", tmp_path / "sent"
    crash = _play("crash", db, sent)
    assert crash.returncode == -9, crash.stderr
    run_id = crash.stdout.split()[1]
    assert len(_sent(sent)) == 1
    return db, sent, run_id


def test_a_run_being_driven_refuses_a_second_process_before_anything_is_sent(
    tmp_path: Path,
) -> None:
    db, sent = tmp_path / "runs.sqlite", tmp_path / "sent"
    driver = subprocess.Popen(
        [sys.executable, "-m", "tests.support.one_driver_play", "drive", str(db), str(sent)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert driver.stdout is not None
        run_id = driver.stdout.readline().split()[1]
        deadline = time.monotonic() + 60
        while not _sent(sent) and time.monotonic() < deadline:  # the refund is out, unanswered
            time.sleep(0.02)
        before = _stored(db, run_id)
        second = _play("resume", db, sent, run_id)
        assert second.stdout.startswith("refused RunDriven"), second.stdout + second.stderr
        assert f"pid {driver.pid} on {socket.gethostname()}" in second.stdout
        assert _stored(db, run_id) == before  # nothing stored, nothing sent by the second
        assert len(_sent(sent)) == 1
    finally:
        Path(f"{db}.go").touch()
        out, err = driver.communicate(timeout=60)
    assert "ended complete" in out, err
    assert _stored(db, run_id)[1] == "complete"
    assert len(_sent(sent)) == 1


def test_a_driver_killed_mid_write_does_not_hold_the_run_back(tmp_path: Path) -> None:
    db, sent, run_id = _crashed(tmp_path)
    resumed = _play("resume", db, sent, run_id)  # at once: the killed driver's pid is gone
    assert resumed.stdout.strip() == "ended complete", resumed.stdout + resumed.stderr
    assert len(_sent(sent)) == 1  # looked up by its key, not sent again
    assert _stored(db, run_id)[1] == "complete"


@pytest.mark.parametrize("change", [*play.CHANGES, "policy"])
def test_a_resume_under_another_spec_is_refused_before_anything_is_sent(
    tmp_path: Path, change: str
) -> None:
    db, sent, run_id = _crashed(tmp_path)
    before = _stored(db, run_id)
    refused = _play("resume", db, sent, run_id, change)
    assert refused.stdout.startswith("refused ResumeRefused"), refused.stdout + refused.stderr
    assert change in refused.stdout
    assert _stored(db, run_id) == before
    assert len(_sent(sent)) == 1
    resumed = _play("resume", db, sent, run_id)  # as it began: it goes on
    assert resumed.stdout.strip() == "ended complete", resumed.stdout + resumed.stderr
    assert len(_sent(sent)) == 1


def _forge_lease(db: Path, run_id: str, owner: str, expires_at: datetime) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO leases (run_id, owner, generation, expires_at) "
            "VALUES (?, ?, 7, ?)",
            (run_id, owner, expires_at.isoformat()),
        )
    conn.close()


def _resume_here(db: Path, sent: Path, run_id: str, store: Store | None = None) -> str:
    engine = play.engine(str(db), sent, store=store)
    return asyncio.run(engine.resume(run_id, play.SPEC, FunctionModel(play.agent))).terminal.value


def test_a_lease_of_another_host_refuses_until_it_expires(tmp_path: Path) -> None:
    db, sent, run_id = _crashed(tmp_path)
    later = datetime.now(UTC) + timedelta(minutes=5)
    elsewhere = "elsewhere.example pid 4242 start 1 ns 1 drive 0a1b"
    _forge_lease(db, run_id, elsewhere, later)
    with pytest.raises(ResumeRefused, match=r"pid 4242 on elsewhere\.example") as refused:
        _resume_here(db, sent, run_id)
    assert "expires" in str(refused.value)
    _forge_lease(db, run_id, elsewhere, datetime.now(UTC))
    assert _resume_here(db, sent, run_id) == "complete"
    assert len(_sent(sent)) == 1


@pytest.mark.parametrize("who", ["an earlier process with this pid", "a drive of this process"])
def test_a_lease_whose_driver_is_gone_on_this_host_is_taken_over_at_once(
    tmp_path: Path, who: str
) -> None:
    db, sent, run_id = _crashed(tmp_path)
    me = this_process()
    start = "1" if who.startswith("an earlier") else me.start
    owner = f"{me.host} pid {me.pid} start {start} ns {me.namespace} drive 0a1b"  # none here
    _forge_lease(db, run_id, owner, datetime.now(UTC) + timedelta(minutes=5))
    assert _resume_here(db, sent, run_id) == "complete"
    assert len(_sent(sent)) == 1


def test_a_lease_this_store_handle_holds_already_is_not_taken_twice(tmp_path: Path) -> None:
    """As a worker drives a run: it holds the lease, the engine it plays runs under it."""
    db, sent, run_id = _crashed(tmp_path)
    now = datetime.now(UTC)
    _forge_lease(db, run_id, "the killed driver", now - timedelta(seconds=1))  # waited out
    store = SqliteStore(db)
    lease = store.acquire_lease(run_id, "worker-1", now, timedelta(seconds=30))
    assert lease is not None
    assert _resume_here(db, sent, run_id, store=store) == "complete"
    assert store.acquire_lease(run_id, "worker-1", now, timedelta(seconds=30)) == lease
    store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_two_tasks_of_one_process_cannot_drive_one_run(tmp_path: Path, kind: str) -> None:
    store: Store = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "runs.sqlite")
    sent: list[str | None] = []

    async def scenario() -> None:
        out, answer = asyncio.Event(), asyncio.Event()

        async def refund(invocation: ToolInvocation) -> ToolResponse:
            sent.append(invocation.operation_key)
            out.set()
            await answer.wait()
            return ToolResponse(payload={"status": "ok", "refund_id": "R1"})

        async def lookup(invocation: ToolInvocation) -> ToolResponse:
            order = {"order_id": "A-100", "state": "lost", "amount_cents": 500}
            return ToolResponse(payload={"status": "ok", **order})

        async def find(invocation: ToolInvocation) -> ToolResponse:
            return ToolResponse(payload={"status": "ok", "found": False})

        tools = {"lookup_order": lookup, "refund_order": refund, "find_refund": find}
        engine = Engine(
            contracts=play.CONTRACTS, toolbox=FunctionTools(tools), store=store, clock=SystemClock()
        )
        model = FunctionModel(play.agent)
        handle = engine.start(play.SPEC, model)
        await out.wait()
        before = len(store.transitions(handle.run_id))
        with pytest.raises(ResumeRefused, match="this process"):
            await engine.resume(handle.run_id, play.SPEC, model)
        with pytest.raises(ResumeRefused, match="this process"):
            await engine.run(play.SPEC, model, run_id=handle.run_id)
        other = dataclasses.replace(play.SPEC, tenant="other-tenant")
        with pytest.raises(ResumeRefused, match="tenant"):
            await engine.resume(handle.run_id, other, model)
        assert len(store.transitions(handle.run_id)) == before
        answer.set()
        assert (await handle.result()).terminal.value == "complete"

    asyncio.run(scenario())
    assert len(sent) == 1
    store.close()


@pytest.mark.usefixtures("loopback")
def test_runner_resume_of_a_run_the_service_drives_is_refused(tmp_path: Path) -> None:
    with serving(tmp_path, workers=1, pace_s=0.3) as service:
        run_id = service.submit(LONG)
        deadline = time.monotonic() + 60
        while _stored_count(service.db, run_id) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        resumed = subprocess.run(
            [sys.executable, "-m", "runner", "resume", run_id, "--db", str(service.db)],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert resumed.returncode == 2, resumed.stdout + resumed.stderr
        assert f"cannot drive run {run_id}: it is being driven" in resumed.stderr
        assert f"pid {service.process.pid}" in resumed.stderr
        ended = service.wait_ended(run_id)
    assert (ended["status"], ended["terminal"]) == ("ended", "complete"), ended
    assert "run failed" not in (tmp_path / "serve.log").read_text()


def _stored_count(db: Path, run_id: str) -> int:
    if not db.exists():
        return 0
    store = SqliteStore(db, read_only=True)
    try:
        return len(store.transitions(run_id))
    finally:
        store.close()


@pytest.mark.parametrize("change", ["principal", "scopes", "task"])
def test_a_continuation_as_another_run_is_refused_before_its_tokens_are_used(
    contracts: ContractSet, change: str
) -> None:
    """`continue_approved` checks the tokens (tenant, policy), then the rest as a resume does:
    another principal, scopes or task is refused, no token used, nothing stored; the run's own
    spec then continues it."""
    store, clock = MemoryStore(), FakeClock(START)
    policy = Policy(approval=ApprovalRules(tools=("hold_room",)))
    limits = Limits(max_seconds=120)
    first = Supplier(clock, latency=8, limited="20")
    engine = Engine(
        contracts=contracts, toolbox=first.tools(), store=store, clock=clock, policy=policy
    )
    waiting = engine.run_sync(spec(limits=limits), SearchThenHold())
    secret, now = ApprovalSecret("a test secret of at least 16 bytes"), datetime.now(UTC)
    approve(store, waiting.run_id, approver="alice", secret=secret, now=now)
    going_on = Supplier(SystemClock(), latency=8, limited="20")
    engine = Engine(
        contracts=contracts,
        toolbox=going_on.tools(),
        store=store,
        clock=SystemClock(),
        policy=policy,
    )
    own = spec(limits=limits)
    other = {
        "principal": {"principal": Principal(id="someone-else", scopes=own.principal.scopes)},
        "scopes": {"principal": Principal(id=own.principal.id, scopes=frozenset({"travel.read"}))},
        "task": {"task": "Something else entirely."},
    }[change]
    with pytest.raises(ResumeRefused, match=change):
        asyncio.run(
            engine.continue_approved(
                waiting.run_id,
                dataclasses.replace(own, **other),
                SearchThenHold(),
                secret=secret,
                now=now,
            )
        )
    assert len(store.runs()) == 1
    continued = asyncio.run(
        engine.continue_approved(waiting.run_id, own, SearchThenHold(), secret=secret, now=now)
    )
    assert continued.terminal is State.COMPLETE, continued.reason
    assert going_on.holds == 1
