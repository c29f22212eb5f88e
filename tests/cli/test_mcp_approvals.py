"""`runner run --mcp`, then `runner approve ... --mcp`: an MCP write under approval from the
command line (a real stdio server), sent once after the approval, under its proposed key."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from runner.cli import main
from tests.support.mcp_harness import BOOKING_UNDER_APPROVAL, SERVERS, read_state

pytestmark = pytest.mark.slow

SECRET = "the-runtime-secret-for-the-tests-0001"
FIXTURE = {
    "name": "book_approved",
    "description": "A booking that needs approval, approved, booked once.",
    "task": "Book room plain for two nights.",
    "tenant": "acme",
    "principal": {"id": "agent-1", "scopes": ["booking.write"]},
    "budget": {"max_attempts": 4, "max_seconds": 30},
    "tools": ["booking__book_room"],
    "model": [
        {"tool_calls": [{"name": "booking__book_room", "args": {"room": "plain", "nights": 2}}]},
        {"final": "Booked."},
    ],
    "approval": {"expect": {"terminal": "complete", "reason": "model_final"}},
    "expect": {"terminal": "escalate", "reason": "approval_required"},
}


def _servers(state: Path) -> dict[str, object]:
    server = {
        "command": sys.executable,
        "args": [str(SERVERS), "booking"],
        "env": {"MCP_STATE": str(state)},
        "scope": "booking.write",
        "tools": BOOKING_UNDER_APPROVAL,
    }
    return {"servers": {"booking": server}}


def test_approve_an_mcp_write_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNER_APPROVAL_SECRET", SECRET)
    fixture, servers = tmp_path / "book.yaml", tmp_path / "servers.yaml"
    fixture.write_text(yaml.safe_dump(FIXTURE))
    servers.write_text(yaml.safe_dump(_servers(tmp_path)))
    db = str(tmp_path / "runs.sqlite")
    assert main(["run", str(fixture), "--mcp", str(servers), "--db", db, "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert read_state(tmp_path, "bookings.json", {}) == {}
    assert main(["approvals", "--db", db, "--json"]) == 0
    (pending,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert pending["summary"] == "Book room plain for 2 nights"
    assert main(["approve", run_id, "--approver", "alice", "--db", db]) == 2  # no --mcp
    assert "--mcp" in capsys.readouterr().err
    assert main(["approvals", "--db", db]) == 0  # nothing was decided
    assert "1 pending" in capsys.readouterr().out
    code = main(["approve", run_id, "--approver", "alice", "--mcp", str(servers), "--db", db])
    out = capsys.readouterr().out
    assert code == 0, out
    assert list(read_state(tmp_path, "bookings.json", {})) == [pending["operation_key"]]
    again = ["continue", run_id, "--mcp", str(servers), "--db", db]
    assert main(again) == 0 and "which ended complete" in capsys.readouterr().out
    assert len(read_state(tmp_path, "bookings.json", {})) == 1
