"""What a stranger hit using `--mcp` from a clean install: servers that fail before they answer,
and tool names that collide with what the runner itself provides."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.base.clock import SystemClock
from runner.base.errors import ConfigError
from runner.cli import main
from runner.core.budget import Limits
from runner.engine.engine import Engine
from runner.record.spec import RunResult, RunSpec
from runner.store import SqliteStore
from runner.testing import scripted
from runner.tools.invocation import Principal, ToolInvocation, ToolResponse
from runner.tools.mcp import McpConfig, McpTools, Pin
from runner.tools.mcp.pinning import pin_server
from runner.tools.toolbox import FunctionTools
from tests.support.mcp_harness import SERVERS, Outcome, classes, read_state, replayed
from tests.support.paths import ROOT

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


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_a_server_that_exits_at_once_shows_its_last_stderr_line(tmp_path: Path) -> None:
    """E.g. the README's `command: python` being an interpreter without the SDK."""
    dying = {"command": sys.executable, "args": ["-c", "import no_such_mcp_sdk"]}
    done = _cli_with_server(tmp_path, dying)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "its stderr: ModuleNotFoundError: No module named 'no_such_mcp_sdk'" in done.stderr


def test_a_write_to_a_server_that_cannot_be_reached_is_not_unknown(tmp_path: Path) -> None:
    """The server lists fine, then cannot start for the run (the CLI pins, closes, and each run
    opens its own connection; a resume opens one too): the write was never sent, so it is a
    transient failure, not `unknown` with a key for a person to chase."""
    state = tmp_path / "state"
    state.mkdir()
    gate = (  # starts the booking server unless the test has taken it down
        "import os, runpy, sys; state = os.environ['MCP_STATE']\n"
        "if os.path.exists(os.path.join(state, 'down')): sys.exit('booking server is down')\n"
        f"sys.argv = [{str(SERVERS)!r}, 'booking']\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    server = {"command": sys.executable, "args": ["-c", gate], "env": {"MCP_STATE": str(state)}}
    overlays = {
        "book_room": {"reconcile_with": "find_booking", "key_argument": "request_id"},
        "find_booking": {"read_only": True, "runtime_only": True, "key_argument": "request_id"},
    }
    config = McpConfig.of(
        {"servers": {"booking": {**server, "scope": "b.write", "tools": overlays}}},
        base_dir=tmp_path,
    )
    book = {"name": "booking__book_room", "args": {"room": "r1", "nights": 1}}

    async def drive() -> RunResult:
        tools = await McpTools.connect(config, clock=SystemClock())
        await tools.aclose()
        (state / "down").write_text("1")
        store = SqliteStore(tmp_path / "runs.sqlite")
        try:
            engine = Engine(
                contracts=tools.contract_set(), toolbox=tools, store=store, clock=SystemClock()
            )
            spec = RunSpec(
                task="Book.",
                tenant="acme",
                principal=Principal(id="ops", scopes=frozenset({"b.write"})),
                tools=tools.tool_names,
                limits=Limits(max_seconds=20, max_attempts=2),
                seed=1,
            )
            turns = [{"tool_calls": [book]}, {"final": "Could not book."}]
            return await engine.run(tools.pinned_spec(spec), scripted(*turns))
        finally:
            await tools.aclose()
            store.close()

    result = asyncio.run(drive())
    assert result.terminal != "unknown", result
    assert "unknown_outcome" not in classes(result) and "transient" in classes(result)
    assert read_state(state, "bookings.json", {}) == {}
    outcome = Outcome(result=result, tools=None, store_path=tmp_path / "runs.sqlite")  # type: ignore[arg-type]
    assert replayed(outcome).identical


def test_a_mistyped_url_is_refused_without_echoing_its_credentials() -> None:
    url = "htps://deploy:s3cret-token@mcp.example/mcp?key=s3cret-key"
    with pytest.raises(ConfigError) as caught:
        McpConfig.of({"servers": {"x": {"url": url, "scope": "s"}}}, base_dir=Path("."))
    message = str(caught.value)
    assert "http(s)" in message and "htps" in message, message
    assert "s3cret" not in message, message


def test_a_local_tool_is_not_shadowed_by_a_stand_in_lookup_the_pin_does_not_use() -> None:
    config = McpConfig.of(
        {"servers": {"srv": {"command": "x", "scope": "s", "tools": {"get": {"read_only": True}}}}},
        base_dir=Path("."),
    )
    listed = {"name": "get", "description": "Gets a thing.", "inputSchema": {"type": "object"}}
    tools = McpTools(config, Pin.of(config, {"srv": [listed]}))

    def local(invocation: ToolInvocation) -> ToolResponse:
        return ToolResponse(payload={"status": "ok"})

    toolbox = tools.before(FunctionTools({"srv__no_lookup": local}))
    assert toolbox.implementation("srv__no_lookup") is local
    assert tools.implementation("srv__no_lookup") is None


def test_an_overlay_that_offers_nothing_is_named_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in an overlay must not surface only as `tools without a contract`."""
    servers = tmp_path / "servers.yaml"
    docs = {"command": sys.executable, "args": [str(EXAMPLE / "docs_server.py")]}
    overlays = {
        "search": {"read_only": True, "key_argument": "qeury"},
        "serch": {"read_only": True},
    }
    servers.write_text(json.dumps({"servers": {"docs": {**docs, "scope": "d", "tools": overlays}}}))
    fixture = str(EXAMPLE / "search_docs.yaml")
    assert main(["run", fixture, "--mcp", str(servers), "--db", str(tmp_path / "r.sqlite")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert "warning: MCP docs__search not offered: key_argument 'qeury' is not one" in err[0]
    assert err[1] == "warning: MCP server docs lists no tool 'serch' (its overlay is unused)"
    assert err[2].startswith("error: fixture") and len(err) == 3, err


def test_a_config_that_lacks_a_pinned_server_is_refused_before_anything_runs() -> None:
    """`resume --mcp` with a config that does not configure every server the run pinned: its
    calls would all fail as `tool_error` (a write marked failed without being sent)."""
    listed = {"name": "get", "description": "Gets a thing.", "inputSchema": {"type": "object"}}
    server = {"command": "x", "scope": "s", "tools": {"get": {"read_only": True}}}
    pinned = McpConfig.of({"servers": {"a": server, "b": server}}, base_dir=Path("."))
    pin = Pin.of(pinned, {"a": [listed], "b": [listed]})
    resumed_with = McpConfig.of({"servers": {"a": server}}, base_dir=Path("."))
    with pytest.raises(ConfigError, match="pinned MCP server b, which the config does not name"):
        McpTools(resumed_with, pin)


def test_the_docs_config_to_copy_is_the_example_that_runs() -> None:
    """The first config on the MCP how-to page is the one a reader copies with the command below
    it: it is `examples/mcp/servers.yaml` itself, included when the site builds, so it cannot name
    a server nobody started."""
    page = (ROOT / "docs" / "how-to" / "mcp-tools.md").read_text()
    first_config = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert first_config.strip() == '--8<-- "examples/mcp/servers.yaml"'
    assert (EXAMPLE / "servers.yaml").is_file()
