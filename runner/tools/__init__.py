"""Tools: what a tool receives and returns (`ToolInvocation`, `ToolResponse`, and how a call ended
otherwise: `outcomes.py`), contracts and the formats and patterns they assert, the classifier
that reads a raw outcome by its contract into core's observations, tools declared in Python,
retrieval over large catalogues, what a child-run tool is (`children.py`; the tool that runs
one drives an engine: `runner.engine.children`), and tools from MCP servers (`mcp/`).

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
