"""Every command on a PostgreSQL store: `--db postgresql://...` or `RUNNER_DB`; the password in the
URL never reaches the output, the logs or the records."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from runner.cli import main
from tests.conftest import FIXTURES
from tests.pg import Cluster

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
