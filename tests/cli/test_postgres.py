"""Every command on a PostgreSQL store: `--db postgresql://...` or `RUNNER_DB`; the password in the
URL never reaches the output, the logs or the records."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner.cli import main
from runner.travel.supplier import SupplierDatabase
from tests.support.paths import FIXTURES
from tests.support.pg import Cluster, release_lease, take_lease

SECRET = "hunter2-in-the-url"


@pytest.fixture
def secret_url(pg_cluster: Cluster, pg_url: str) -> str:
    """The test's database, named with a password (the cluster trusts loopback, so it is only
    carried, which is what this checks)."""
    return pg_url.replace("runner@", f"runner:{SECRET}@")


def test_run_show_runs_replay_grade_on_postgres(
    secret_url: str,
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RUNNER_WORLD", str(tmp_path / "world"))
    fixture = str(FIXTURES / "hold_timeout_after_commit.yaml")
    assert main(["--verbose", "run", fixture, "--db", secret_url, "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    run_id = ran["run_id"]
    monkeypatch.setenv("RUNNER_DB", secret_url)  # the other commands find the store here
    assert main(["runs", "--json"]) == 0
    [listed] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert listed["run_id"] == run_id and listed["terminal"] == ran["terminal"]
    assert main(["show", run_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["terminal"] == ran["terminal"] and ran["holds"] == 1
    assert main(["replay", run_id]) == 0
    assert main(["grade", "--stored", run_id, "--json"]) == 0
    assert main(["show", "no-such-run"]) != 0
    out, err = capsys.readouterr()
    assert "runner:***@127.0.0.1" in err
    assert SECRET not in out + err
    with psycopg.connect(pg_url) as conn:
        stored = conn.execute(
            "SELECT header || coalesce(summary, '') FROM runner_runs UNION ALL "
            "SELECT record FROM runner_transitions UNION ALL SELECT turn FROM runner_turns "
            "UNION ALL SELECT output FROM runner_outputs"
        ).fetchall()
    assert stored and not [row for (row,) in stored if SECRET in row]


def test_an_unreachable_database_is_one_line_without_its_password(
    pg_cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"postgresql://runner:{SECRET}@127.0.0.1:{pg_cluster.port}/missing_database"
    assert main(["runs", "--db", url]) != 0
    out, err = capsys.readouterr()
    assert "missing_database" in err and len(err.strip().splitlines()) == 1
    assert SECRET not in out + err


@pytest.mark.parametrize("command", ["runs", "submit", "worker"])
@pytest.mark.parametrize("where", ["missing_database", "closed_port"])
def test_a_database_that_cannot_be_reached_is_one_line_at_once_saying_why(
    pg_cluster: Cluster, tmp_path: Path, command: str, where: str
) -> None:
    """Under the real command (real stderr, no log capture): exit 2, one line naming the cause,
    no traceback, no pool retrying until its timeout; `submit` and `worker` too."""
    port = pg_cluster.port if where == "missing_database" else _closed_port()
    url = f"postgresql://runner:{SECRET}@127.0.0.1:{port}/missing_database"
    args = {"runs": ["runs"], "submit": ["submit", str(FIXTURES)], "worker": ["worker"]}[command]
    started = time.monotonic()  # baseline: the same command starting up on a SQLite file
    _runner(["runs", "--db", str(tmp_path / "baseline.sqlite")], tmp_path, {})
    baseline = time.monotonic() - started
    started = time.monotonic()
    done = _runner([*args, "--db", url], tmp_path, {"RUNNER_WORLD": str(tmp_path / "w")})
    elapsed = time.monotonic() - started
    # A pool retrying until its timeout takes 10-30 s more than starting up; a loaded machine
    # slows both alike, so the bound is relative to the baseline.
    assert done.returncode == 2 and elapsed < baseline + 6, (elapsed, baseline, done.stderr)
    [line] = done.stderr.strip().splitlines()
    cause = 'database "missing_database" does not exist' if port == pg_cluster.port else "refused"
    assert line.startswith("error: postgresql://runner:***@127.0.0.1") and cause in line, line
    assert SECRET not in done.stdout + done.stderr


def test_submit_refuses_a_database_from_a_newer_runner_and_queues_nothing(
    pg_cluster: Cluster, tmp_path: Path
) -> None:
    url = pg_cluster.new_database()
    assert _runner(["runs", "--db", url], tmp_path, {}).returncode == 0  # the schema, migrated
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE runner_schema SET version = 99")
    done = _runner(["submit", str(FIXTURES), "--db", url], tmp_path, {})
    assert done.returncode == 2 and not done.stdout, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "schema version 99 is newer than this runner knows" in line
    with psycopg.connect(url) as conn:
        queued = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
    assert queued == (None,)


def test_resume_never_drives_a_run_whose_lease_a_worker_holds(
    pg_cluster: Cluster, tmp_path: Path
) -> None:
    """`runner resume` takes the run's lease as a worker does: while a worker holds it, resume
    refuses (one line, exit 2, nothing written); once it is free, resume drives the run under
    its own lease (its rows name it)."""
    url, env = pg_cluster.new_database(), {"RUNNER_WORLD": str(tmp_path / "world")}
    fixture = str(FIXTURES / "budget_exhausted.yaml")
    killed = _runner(["run", fixture, "--db", url], tmp_path, env, kill_after=4)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with psycopg.connect(url) as conn:
        [(run_id,)] = conn.execute("SELECT run_id FROM runner_runs").fetchall()
        before = conn.execute("SELECT count(*) FROM runner_transitions").fetchone()
        # the killed `runner run` held the run's lease: a worker takes it once it expires
        conn.execute("UPDATE runner_leases SET expires_at = now() - interval '1 second'")
    lease = asyncio.run(take_lease(url, run_id, "w9/job-1"))
    refused = _runner(["resume", run_id, "--db", url], tmp_path, env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert run_id in line and "lease" in line, line
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM runner_transitions").fetchone() == before
    asyncio.run(release_lease(url, lease))
    resumed = _runner(["resume", run_id, "--db", url], tmp_path, env)
    assert resumed.returncode == 0, resumed.stderr
    with psycopg.connect(url) as conn:
        owners = conn.execute(
            "SELECT DISTINCT owner FROM runner_transitions WHERE seq > %s", before
        ).fetchall()
    [(owner,)] = owners  # this process's drive: host, pid, process start, namespace, drive
    assert str(owner).split()[1:9:2] == ["pid", "start", "ns", "drive"], owner


def test_run_holds_the_runs_lease_and_a_resume_meanwhile_is_refused(
    pg_cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`runner run --db postgresql://` drives each run under its lease, as `resume` does: a
    `runner resume` of that run while it is being driven is refused before it sends anything,
    and once the run ended its lease is left (it is never driven again)."""
    url = pg_cluster.new_database()
    monkeypatch.setenv("RUNNER_WORLD", str(tmp_path / "world"))
    seen: list[tuple[str, int]] = []
    from runner import cli  # noqa: PLC0415

    original = cli.run_fixture

    def watched(*args: Any, **kwargs: Any) -> Any:
        run_id = kwargs["run_id"]
        with psycopg.connect(url) as conn:
            [(owner, live)] = conn.execute(
                "SELECT owner, expires_at > now() FROM runner_leases WHERE run_id = %s",
                (run_id,),
            ).fetchall()
        assert live and f"pid {os.getpid()} " in owner, owner
        refused = _runner(["resume", run_id, "--db", url], tmp_path, {})
        seen.append((refused.stderr, refused.returncode))
        return original(*args, **kwargs)

    monkeypatch.setattr(cli, "run_fixture", watched)
    fixture = str(FIXTURES / "hold_timeout_after_commit.yaml")
    assert main(["run", fixture, "--db", url]) == 0
    [(stderr, code)] = seen
    assert code == 2 and "driven by pid" in stderr, stderr
    with psycopg.connect(url) as conn:
        [(holds,)] = conn.execute("SELECT count(*) FROM runner_runs").fetchall()
    assert holds == 1  # the refused resume stored nothing of its own
    assert _active_holds(tmp_path / "world") == 1


def _closed_port() -> int:
    with socket.socket() as probe:  # bound, never listening: a connection is refused
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_every_crash_point_of_a_hold_run_on_postgres_resumes_with_one_hold(
    pg_cluster: Cluster, tmp_path: Path
) -> None:
    """`runner run` on PostgreSQL killed (SIGKILL) after every other durable commit in turn, then
    `runner resume --db URL`: the run ends in a declared state, its log has no gap, and the hold
    is made once (as tests/engine/test_crash_sweep.py checks on SQLite)."""
    fixture = str(FIXTURES / "hold_timeout_after_commit.yaml")
    point, swept = 1, 0
    while True:
        url, world = pg_cluster.new_database(), tmp_path / f"world-{point}"
        env = {"RUNNER_WORLD": str(world)}
        killed = _runner(["run", fixture, "--db", url, "--json"], tmp_path, env, kill_after=point)
        if killed.returncode == 0:  # the run finished before this point: every point swept
            break
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT run_id FROM runner_runs").fetchall()
        if not rows:  # killed before the run began: nothing may have happened anywhere
            assert _active_holds(world) == 0, point
        else:  # resume it; a crash mid-write costs a lookup, so the counts may differ (exit 1)
            [(run_id,)] = rows
            resumed = _runner(["resume", run_id, "--db", url, "--json"], tmp_path, env)
            assert resumed.returncode in (0, 1), (point, resumed.stderr)
            ended = json.loads(resumed.stdout)
            with psycopg.connect(url) as conn:
                [(terminal,)] = conn.execute("SELECT terminal FROM runner_runs").fetchall()
                seqs = [
                    s for (s,) in conn.execute("SELECT seq FROM runner_transitions ORDER BY seq")
                ]
            assert terminal == ended["terminal"] and terminal in {"complete", "unknown"}, point
            assert seqs == list(range(1, len(seqs) + 1)), point
            holds = _active_holds(world)
            assert holds == 1 or (terminal == "unknown" and holds == 0), (point, holds)
            assert ended["holds"] == holds
            swept += 1
        point += 2  # every other point: the SQLite sweep takes each; this one is about the store
    assert swept >= 5


def _runner(
    args: list[str], cwd: Path, env: dict[str, str], kill_after: int | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "RUNNER_KILL_AFTER_COMMITS"}
    environment.update(env)
    if kill_after is not None:
        environment["RUNNER_KILL_AFTER_COMMITS"] = str(kill_after)
    command = [sys.executable, "-m", "runner", *args]
    return subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=120, check=False
    )


def _active_holds(world: Path) -> int:
    total = 0
    for path in world.glob("supplier-*.sqlite"):
        supplier = SupplierDatabase.open_existing(path, read_only=True)
        total += supplier.active_holds()
        supplier.close()
    return total
