"""What a third-party server's tool error means for a write, on a server written by someone else:
`mcp-server-git` (a dev extra), started over stdio in a temporary repository.

The server raises when `git add` cannot stage a path, which the SDK answers as `isError: true` with
the error's text. By default the runner cannot tell a write that failed before acting from one that
failed after it, so it looks the write up by key and, with no lookup configured, ends `unknown`.
An operator who knows the server refuses without acting says `errors: not_applied`: the error is
then an ordinary failure the policy decides, and the run goes on.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.core.states import State
from runner.record.spec import RunResult
from tests.support.mcp_harness import Outcome, classes, replayed, run_through

pytestmark = pytest.mark.slow

SCOPES = frozenset({"git.write"})


def _repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "present.txt").write_text("here\n")
    return repo


def _git_server(repo: Path, **settings: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "mcp_server_git", "--repository", str(repo)],
        "scope": "git.write",
        **settings,
    }


def _add(repo: Path, *files: str) -> list[dict[str, Any]]:
    return [
        {
            "tool_calls": [
                {"name": "git__git_add", "args": {"repo_path": str(repo), "files": [*files]}}
            ]
        },
        {"final": "Done."},
    ]


def _staged(repo: Path) -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(repo), "diff", "--cached", "--name-only"],
        check=True,
        capture_output=True,
        text=True,
    )
    return listed.stdout.split()


def _run(tmp_path: Path, server: dict[str, Any], turns: list[dict[str, Any]]) -> Outcome:
    return run_through({"servers": {"git": server}}, turns, tmp_path / "run", scopes=SCOPES)


def _failure_detail(result: RunResult) -> str:
    observed = [t.observation for t in result.transitions if t.result_class == "permanent"]
    assert len(observed) == 1, observed
    return repr(observed[0])


def test_by_default_a_refused_git_add_ends_unknown_with_its_key(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    outcome = _run(tmp_path, _git_server(repo, tools={"git_add": {}}), _add(repo, "missing.txt"))
    result = outcome.result
    assert result.terminal is State.UNKNOWN, result.reason
    assert classes(result)[0] == "unknown_outcome"
    assert [op.status for op in result.operations] == ["unknown"]
    assert result.transitions[-1].operation_key == result.operations[0].key
    assert replayed(outcome).identical


@pytest.mark.parametrize("where", ["server", "tool"])
def test_not_applied_makes_a_refused_git_add_an_ordinary_failure(
    tmp_path: Path, where: str
) -> None:
    repo = _repository(tmp_path)
    server = (
        _git_server(repo, errors="not_applied", tools={"git_add": {}})
        if where == "server"
        else _git_server(repo, tools={"git_add": {"errors": "not_applied"}})
    )
    outcome = _run(tmp_path, server, _add(repo, "missing.txt"))
    result = outcome.result
    assert result.terminal is State.COMPLETE, result.reason
    assert classes(result) == ["permanent"]
    assert [op.status for op in result.operations] == ["failed"]
    assert "missing.txt" in _failure_detail(result)  # the server's own words reach the model
    assert _staged(repo) == []
    pinned = {tool.tool: tool for tool in outcome.tools.pin.tools}
    assert pinned["git_add"].errors == "not_applied"  # recorded: a resume reads it the same
    assert replayed(outcome).identical


def test_a_tool_overlay_overrides_its_server(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    server = _git_server(repo, errors="not_applied", tools={"git_add": {"errors": "unknown"}})
    result = _run(tmp_path, server, _add(repo, "missing.txt")).result
    assert result.terminal is State.UNKNOWN, result.reason


def test_not_applied_leaves_a_successful_git_add_a_success(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    server = _git_server(repo, errors="not_applied", tools={"git_add": {}})
    result = _run(tmp_path, server, _add(repo, "present.txt")).result
    assert result.terminal is State.COMPLETE, result.reason
    assert classes(result) == ["ok"]
    assert [op.status for op in result.operations] == ["committed"]
    assert _staged(repo) == ["present.txt"]


def test_not_applied_does_not_cover_a_lost_transport(tmp_path: Path) -> None:
    """A server that dies before answering gave no complete answer: unknown, whatever the
    overlay says (the server's process is killed by a `git` on its PATH that, asked to add,
    kills its parent, the server)."""
    repo = _repository(tmp_path)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    killer = fake_bin / "git"
    killer.write_text(
        f'#!/bin/sh\ncase " $* " in *" add "*) kill -9 $PPID;; esac\nexec {_real_git()} "$@"\n'
    )
    killer.chmod(0o755)
    server = _git_server(
        repo, errors="not_applied", env={"PATH": f"{fake_bin}:/usr/bin:/bin"}, tools={"git_add": {}}
    )
    result = _run(tmp_path, server, _add(repo, "present.txt")).result
    assert result.terminal is State.UNKNOWN, result.reason
    assert classes(result)[0] == "unknown_outcome"
    lost = [t.observation for t in result.transitions if t.result_class == "unknown_outcome"]
    assert "ConnectionError" in repr(lost[0])  # the transport, not the tool, failed
    assert [op.status for op in result.operations] == ["unknown"]


def _real_git() -> str:
    found = subprocess.run(["which", "git"], check=True, capture_output=True, text=True)
    return found.stdout.strip()
