"""Tools: what a tool receives and returns (`ToolInvocation`, `ToolResponse`), contracts and the
formats and patterns they assert, tools declared in Python, retrieval over large catalogues,
child-run tools (`runner.tools.children`), and tools from MCP servers (`runner.tools.mcp`).

May import: `base`, `core`, `models`.
"""

from .invocation import (
    BudgetLeft,
    CancelSignal,
    Principal,
    ToolBox,
    ToolImplementation,
    ToolInvocation,
    ToolRegistry,
    ToolResponse,
)

__all__ = [
    "BudgetLeft",
    "CancelSignal",
    "Principal",
    "ToolBox",
    "ToolImplementation",
    "ToolInvocation",
    "ToolRegistry",
    "ToolResponse",
]
