"""Tools from MCP servers under the runner's contracts and policy (`pip install 'runner-fsm[mcp]'`).

Importing this package does not import the MCP SDK; connecting to servers does. `import runner`
never imports either. May import what `runner.tools` may: `base`, `core`, `models`.

- `McpConfig`: the servers and the operator's per-tool overlays (`config.py`).
- `McpTools`: connect, pin each server's tool list, and call the tools (`tools.py`).
- `Pin`, `PinnedTool`: the tool list as a run's header records it (`pinning.py`).
- `recorded_contracts`, `with_recorded`: a recorded run's MCP contracts, for replay and grading.
"""

from __future__ import annotations

from .config import McpConfig, ServerConfig, ToolOverlay
from .pinning import SEPARATOR, TEXT_RESULT, Pin, PinnedTool
from .tools import McpTools, payload_of, recorded_contracts, with_recorded

__all__ = [
    "SEPARATOR",
    "TEXT_RESULT",
    "McpConfig",
    "McpTools",
    "Pin",
    "PinnedTool",
    "ServerConfig",
    "ToolOverlay",
    "payload_of",
    "recorded_contracts",
    "with_recorded",
]
