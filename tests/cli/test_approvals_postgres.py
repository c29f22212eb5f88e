"""`runner approvals`, `approve`, `deny`, `continue` with `--db postgresql://...`: the same flow as
on SQLite (tests/cli/test_approvals.py), on the throwaway cluster."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from runner.cli import main
from tests.support.paths import FIXTURES
from tests.support.pg import release_lease, take_lease

SECRET = "the-runtime-secret-for-the-tests-0001"


@pytest.fixture
def on_postgres(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RUNNER_APPROVAL_SECRET", SECRET)
    monkeypatch.setenv("RUNNER_WORLD", str(tmp_path / "world"))
    return pg_url


def _waiting(url: str, capsys: pytest.CaptureFixture[str], name: str) -> str:
    fixture = str(FIXTURES / "approval" / f"{name}.yaml")
    assert main(["run", fixture, "--db", url, "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert (ran["terminal"], ran["reason"]) == ("escalate", "approval_required")
    return str(ran["run_id"])


def test_approve_on_postgres_commits_one_hold_once(
    on_postgres: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = on_postgres
    run_id = _waiting(url, capsys, "hold_approved")
    assert main(["approvals", "--db", url, "--json"]) == 0
    (pending,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert pending["run_id"] == run_id and pending["tool"] == "hold_room"
    assert pending["summary"].startswith("Hold 1 accessible room at H-SHIBA")
    code = main(["approve", run_id, "hold_room", "--approver", "alice", "--db", url, "--json"])
    continued = json.loads(capsys.readouterr().out)
    assert code == 0 and continued["terminal"] == "complete" and continued["holds"] == 1
    assert main(["approvals", "--db", url]) == 0
    assert capsys.readouterr().out.strip() == "0 pending"
    assert main(["continue", run_id, "--db", url]) == 0  # already continued: reported
    assert "which ended complete" in capsys.readouterr().out
    assert main(["replay", continued["run_id"], "--db", url]) == 0
    with psycopg.connect(url) as conn:
        uses = conn.execute("SELECT run_id FROM runner_token_uses").fetchall()
        status = conn.execute("SELECT status FROM runner_approvals").fetchall()
    assert uses == [(continued["run_id"],)] and status == [("approved",)]


def test_deny_on_postgres_ends_the_continuation_abstain(
    on_postgres: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = on_postgres
    run_id = _waiting(url, capsys, "hold_denied")
    code = main(["deny", run_id, "--approver", "bob", "--note", "no", "--db", url, "--json"])
    continued = json.loads(capsys.readouterr().out)
    assert code == 0 and continued["terminal"] == "abstain" and continued["holds"] == 0
    assert continued["reason"] == "approval_denied"


def test_a_continuation_is_refused_while_a_worker_holds_the_waiting_runs_lease(
    on_postgres: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`runner run` lets go of a run's lease once it waits for approval (a worker takes it at
    once); `runner approve` (and `continue`) hold it, as a worker continuing it does: while a
    worker holds it, the decision is kept but the continuation is refused (one line, exit 2, no
    run of its own); once it is free, `continue` makes it, and lets go."""
    url = on_postgres
    run_id = _waiting(url, capsys, "hold_approved")
    # a run waiting for approval lets go of its lease: a worker continuing it need not wait
    lease = asyncio.run(take_lease(url, run_id, "w9/job-1"))
    code = main(["approve", run_id, "hold_room", "--approver", "alice", "--db", url])
    refused = capsys.readouterr()
    assert code == 2, refused.out + refused.err
    [line] = refused.err.strip().splitlines()
    assert run_id in line and "w9/job-1" in line, line
    with psycopg.connect(url) as conn:
        runs = conn.execute("SELECT count(*) FROM runner_runs").fetchone()
        status = conn.execute("SELECT status FROM runner_approvals").fetchall()
    assert runs == (1,) and status == [("approved",)]
    asyncio.run(release_lease(url, lease))
    assert main(["continue", run_id, "--db", url, "--json"]) == 0
    continued = json.loads(capsys.readouterr().out)
    assert continued["terminal"] == "complete" and continued["holds"] == 1
    with psycopg.connect(url) as conn:
        [(expires_at, owner)] = conn.execute(
            "SELECT expires_at, owner FROM runner_leases WHERE run_id = %s", (run_id,)
        ).fetchall()
    assert f"pid {os.getpid()} " in owner and expires_at <= datetime.now(UTC), owner
