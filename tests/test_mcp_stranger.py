"""What a stranger hit using `--mcp` from a clean install: servers that fail before they answer,
and tool names that collide with what the runner itself provides."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from runner.mcp import McpConfig, Pin
from runner.mcp.pinning import pin_server

from .conftest import ROOT

EXAMPLE = ROOT / "examples" / "mcp"


def _cli_with_server(tmp_path: Path, server: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`runner run` in a fresh process (no pytest logging handlers), with one server `docs`."""
    servers = tmp_path / "servers.yaml"
    servers.write_text(json.dumps({"servers": {"docs": {"scope": "docs.read", **server}}}))
    fixture = str(EXAMPLE / "search_docs.yaml")
    return subprocess.run(
        [sys.executable, "-m", "runner", "run", fixture, "--mcp", str(servers)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_a_server_that_never_answers_initialize_says_so_in_one_line(tmp_path: Path) -> None:
    silent = {
        "command": sys.executable,
        "args": ["-c", "import time; time.sleep(60)"],
        "timeout_s": 1,
    }
    done = _cli_with_server(tmp_path, silent)
    assert done.returncode == 2
    assert done.stderr.startswith("error: MCP server docs: cannot list its tools: ")
    assert "no answer in 1 s" in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_a_server_that_prints_garbage_is_one_error_line_not_a_traceback(tmp_path: Path) -> None:
    garbage = {
        "command": sys.executable,
        "args": ["-c", "import time; print('hello, not JSON-RPC', flush=True); time.sleep(60)"],
        "timeout_s": 1,
    }
    done = _cli_with_server(tmp_path, garbage)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_a_server_tool_named_like_the_stand_in_lookup_is_refused_not_shadowed() -> None:
    """`srv__no_lookup` is the runner's own stand-in: a server's tool of that name would be
    answered by the stand-in (never reaching the server) or clash with its contract."""
    config = McpConfig.of(
        {
            "servers": {
                "srv": {
                    "command": "x",
                    "scope": "s",
                    "tools": {"No-Lookup": {"read_only": True}, "save": {}},
                }
            }
        },
        base_dir=Path("."),
    )
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    listed = [
        {"name": name, "description": "A tool that does a thing.", "inputSchema": schema}
        for name in ("No-Lookup", "save")
    ]
    lookalike, save = pin_server("srv", config.servers["srv"], listed)
    assert not lookalike.offered and "reserved" in (lookalike.refused or "")
    assert save.offered and save.reconcile_with == "srv__no_lookup"
    pin = Pin.of(config, {"srv": listed})
    assert sorted(c.name for c in pin.contracts()) == ["srv__no_lookup", "srv__save"]
