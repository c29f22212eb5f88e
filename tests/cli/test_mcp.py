"""`runner run FIXTURE --mcp servers.yaml`: the README's example, end to end, then replayed and
graded from the store with no server running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runner.cli import main
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "mcp"


@pytest.fixture
def venv_python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's config runs `python`: this interpreter (it has the SDK)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin")


def test_the_readme_example_runs_replays_and_grades(
    venv_python_on_path: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "runs.sqlite")
    fixture, servers = str(EXAMPLE / "search_docs.yaml"), str(EXAMPLE / "servers.yaml")
    log = str(tmp_path / "runs.jsonl")
    args = ["--db", db, "--log", log, "--repeat", "3", "--json"]
    code = main(["run", fixture, "--mcp", servers, *args])
    out = capsys.readouterr().out
    runs = [json.loads(line) for line in out.splitlines()]
    assert code == 0, out
    assert [(r["terminal"], r["expect"]["passed"]) for r in runs] == [("complete", True)] * 3
    assert all(r["transitions"][1]["tool"] == "docs__search" for r in runs)
    for run in runs:  # the servers are gone: the pinned contracts come from each header
        assert main(["replay", run["run_id"], "--db", db]) == 0
        assert "identical: 4 transitions" in capsys.readouterr().out
    assert main(["grade", "--stored", "--db", db]) == 0
    assert main(["replay", log]) == 0  # the JSONL log's headers carry the pin too
    assert capsys.readouterr().out.count("identical: 4 transitions") == 3


def test_a_bad_mcp_config_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = tmp_path / "servers.yaml"
    servers.write_text("servers:\n  docs: {command: python}\n")
    code = main(["run", str(EXAMPLE / "search_docs.yaml"), "--mcp", str(servers)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: mcp config") and "scope" in err and err.count("\n") == 1


def test_a_server_that_cannot_start_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = tmp_path / "servers.yaml"
    servers.write_text("servers:\n  docs: {command: /nonexistent/server, scope: docs.read}\n")
    code = main(["run", str(EXAMPLE / "search_docs.yaml"), "--mcp", str(servers)])
    err = capsys.readouterr().err
    assert code == 2 and "MCP server docs: cannot list its tools" in err


@pytest.mark.parametrize("kill_after", [3, 4, 5])  # after setup and lease: from the header on
def test_a_killed_mcp_run_resumes_with_its_pinned_tools(
    venv_python_on_path: None,
    tmp_path: Path,
    kill_after: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = str(tmp_path / "runs.sqlite")
    fixture, servers = str(EXAMPLE / "search_docs.yaml"), str(EXAMPLE / "servers.yaml")
    killed = subprocess.run(
        [sys.executable, "-m", "runner", "run", fixture, "--mcp", servers, "--db", db],
        env={**os.environ, "RUNNER_KILL_AFTER_COMMITS": str(kill_after)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL
    assert main(["runs", "--db", db, "--json"]) == 0
    (listed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    run_id = listed["run_id"]
    assert main(["resume", run_id, "--db", db]) == 2
    assert "resume it with --mcp" in capsys.readouterr().err
    assert main(["resume", run_id, "--db", db, "--mcp", servers, "--json"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert (resumed["terminal"], resumed["expect"]["passed"]) == ("complete", True)
    assert main(["replay", run_id, "--db", db]) == 0
    assert "identical" in capsys.readouterr().out


def test_a_hanging_server_on_a_fixture_clock_is_cut_at_its_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fixture runs on a fake clock; an MCP call is real I/O, so its timeout is real time and
    the run still ends inside its deadline."""
    servers = tmp_path / "servers.yaml"
    servers.write_text(
        json.dumps(
            {
                "servers": {
                    "hostile": {
                        "command": sys.executable,
                        "args": [str(ROOT / "tests" / "support" / "mcp_servers.py"), "hostile"],
                        "env": {"MCP_STATE": str(tmp_path)},
                        "scope": "web.read",
                        "tools": {"slow_search": {"read_only": True, "timeout_s": 1}},
                    }
                }
            }
        )
    )
    fixture = tmp_path / "hang.yaml"
    fixture.write_text(
        "name: hang\ndescription: A search that never answers.\ntask: Search.\ntenant: acme\n"
        "principal: {id: a, scopes: [web.read]}\nbudget: {max_seconds: 6}\n"
        "tools: [hostile__slow_search]\n"
        "model:\n  - tool_calls: [{name: hostile__slow_search, args: {query: hang}}]\n"
        "  - final: nothing\n"
    )
    db = str(tmp_path / "runs.sqlite")
    assert main(["run", str(fixture), "--mcp", str(servers), "--db", db, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["terminal"] in {"complete", "abstain"}
    classes = [t["result_class"] for t in run["transitions"] if t["trigger"] == "classify"]
    assert classes[0] == "transient" and set(classes[:-1]) <= {"transient", "budget_exhausted"}
    assert run["elapsed_s"] <= 6, run
    assert main(["replay", run["run_id"], "--db", db]) == 0
