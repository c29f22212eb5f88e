"""Tools from an MCP server of your own: `examples/mcp/docs_server.py` (written with the official
SDK) is started over stdio, its `search` tool pinned under the runner's contracts as
`docs__search`, called by a model, and the run replayed later with no server running.

    python examples/mcp_tools.py      # needs the MCP SDK: pip install 'runner-fsm[mcp]'

The test suite runs it and type-checks it with `mypy --strict`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from runner import (
    ContractSet,
    Engine,
    MemoryStore,
    Principal,
    RunSpec,
    SystemClock,
    ToolSpec,
    Transcript,
    replay_run,
)
from runner.testing import FunctionModel, Reply, call, latest_results
from runner.tools.mcp import McpConfig, McpTools, with_recorded

SERVER = Path(__file__).resolve().parent / "mcp" / "docs_server.py"

CONFIG = McpConfig.of(
    {
        "servers": {
            "docs": {
                "command": sys.executable,  # this interpreter, which has the SDK
                "args": [str(SERVER)],
                "scope": "docs.read",  # a principal needs it to be offered the server's tools
                "timeout_s": 10,
                "tools": {"search": {"read_only": True}},  # only tools named here are offered
            }
        }
    },
    base_dir=SERVER.parent,
)


def agent(transcript: Transcript, tools: tuple[ToolSpec, ...]) -> Reply:
    """Search once, then answer from what the server found."""
    found = latest_results(transcript)
    if not found:
        return call("docs__search", query="retry")
    pages = json.loads(found[0].content)["result"]["structured"]["pages"]
    return f"From the docs: {pages[0]['text']}"


async def main() -> None:
    clock = SystemClock()
    tools = await McpTools.connect(CONFIG, clock=clock)  # starts the server, pins its tool list
    print(f"pinned from the server: {', '.join(tools.tool_names)}")
    store = MemoryStore()
    engine = Engine(contracts=tools.contract_set(), toolbox=tools, store=store, clock=clock)
    spec = RunSpec(
        task="How should a transient failure be retried?",
        tenant="acme",
        principal=Principal(id="agent-1", scopes=frozenset({"docs.read"})),
        tools=tools.tool_names,
    )
    try:
        result = await engine.run(tools.pinned_spec(spec), FunctionModel(agent))
    finally:
        await tools.aclose()  # stops the stdio server
    print(f"run: {result.terminal.value} ({result.reason}), {result.attempts} attempt")
    print(f"answer: {result.answer}")
    header = store.header(result.run_id)
    assert header is not None
    recorded = with_recorded(ContractSet([]), header.annotations)  # the header's pin alone
    replayed = await replay_run(store, result.run_id, recorded)
    print(f"replayed with the server stopped: {'identical' if replayed.identical else 'diverged'}")


if __name__ == "__main__":
    asyncio.run(main())
