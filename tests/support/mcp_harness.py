"""Drive runs through real MCP servers (tests/support/mcp_servers.py): stdio subprocesses the runner
starts, or a streamable-HTTP server on loopback (uvicorn, in a subprocess the test starts)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.base.clock import SystemClock
from runner.core.budget import Limits
from runner.engine.engine import Engine
from runner.proof.api import replay_run_sync
from runner.proof.replay import Replay
from runner.record.spec import RunResult, RunSpec
from runner.store import SqliteStore
from runner.testing import scripted
from runner.tools.contracts import ContractSet
from runner.tools.invocation import Principal
from runner.tools.mcp import McpConfig, McpTools, with_recorded

SERVERS = Path(__file__).with_name("mcp_servers.py")
BOOKING_UNDER_APPROVAL: dict[str, dict[str, object]] = {
    "book_room": {
        "reconcile_with": "find_booking",
        "key_argument": "request_id",
        "suppresses_duplicates": True,
        "requires_approval": True,
        "approval_summary": "Book room {room} for {nights} nights",
    },
    "find_booking": {"read_only": True, "runtime_only": True, "key_argument": "request_id"},
}
"""The booking server's pin when its write needs approval: the booking and its lookup by key."""


def stdio_server(kind: str, state: Path, **settings: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(SERVERS), kind],
        "env": {"MCP_STATE": str(state)},
        **settings,
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def http_server(kind: str, state: Path) -> Iterator[str]:
    """A streamable-HTTP MCP server on loopback; yields its URL; stopped on exit."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVERS), kind, "--http", str(port)],
        env={"MCP_STATE": str(state), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    http_server.last = process  # type: ignore[attr-defined]  # a test may kill it mid-call
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the {kind} HTTP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()


@dataclass
class Outcome:
    result: RunResult
    tools: McpTools
    store_path: Path


def run_through(
    config: dict[str, Any],
    turns: list[dict[str, Any]],
    tmp: Path,
    *,
    scopes: frozenset[str],
    limits: Limits | None = None,
    before_run: Any = None,
) -> Outcome:
    """Connect (pin), run one scripted task on the system clock, close every connection."""
    tmp.mkdir(parents=True, exist_ok=True)
    mcp_config = McpConfig.of(config, base_dir=tmp)
    store_path = tmp / "runs.sqlite"

    async def drive() -> tuple[RunResult, McpTools]:
        tools = await McpTools.connect(mcp_config, clock=SystemClock())
        if before_run is not None:
            before_run()
        store = SqliteStore(store_path)
        try:
            engine = Engine(
                contracts=tools.contract_set(),
                toolbox=tools,
                store=store,
                clock=SystemClock(),
            )
            spec = RunSpec(
                task="Use the tools.",
                tenant="acme",
                principal=Principal(id="ops", scopes=scopes),
                tools=tools.tool_names,
                limits=limits or Limits(max_seconds=20),
                seed=7,
            )
            return await engine.run(tools.pinned_spec(spec), scripted(*turns)), tools
        finally:
            await tools.aclose()
            store.close()

    result, tools = asyncio.run(drive())
    return Outcome(result=result, tools=tools, store_path=store_path)


def replayed(outcome: Outcome) -> Replay:
    """Replay the stored run from the store alone: the pinned contracts come from its header."""
    store = SqliteStore(outcome.store_path)
    try:
        header = store.header(outcome.result.run_id)
        assert header is not None
        contracts = with_recorded(ContractSet([]), header.annotations)
        return replay_run_sync(store, outcome.result.run_id, contracts)
    finally:
        store.close()


def read_state(state: Path, name: str, default: Any) -> Any:
    path = state / name
    return json.loads(path.read_text()) if path.exists() else default


def classes(result: RunResult) -> list[str]:
    return [
        t.result_class
        for t in result.transitions
        if t.result_class is not None and t.result_class != "model_final"
    ]
