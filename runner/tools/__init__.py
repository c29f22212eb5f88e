"""Tools: what a tool receives and returns (`ToolInvocation`, `ToolResponse`, and how a call ended
otherwise: `_outcomes.py`), how an engine is handed them (`ToolBox` and its implementations,
`toolbox.py`), contracts and the formats and patterns they assert, the classifier that reads a raw
outcome by its contract into core's observations, tools declared in Python, retrieval over large
catalogues, what a child-run tool is (`children.py`; the tool that runs one drives an engine:
`runner.engine.children`), and tools from MCP servers (`mcp/`).

May import: `base`, `core`, `models`.
"""

import warnings as _warnings
from typing import Any as _Any

from .invocation import (
    BudgetLeft,
    CancelSignal,
    Principal,
    ToolImplementation,
    ToolInvocation,
    ToolResponse,
)
from .toolbox import FirstOf, FunctionTools, ToolBox

__all__ = [
    "BudgetLeft",
    "CancelSignal",
    "FirstOf",
    "FunctionTools",
    "Principal",
    "ToolBox",
    "ToolImplementation",
    "ToolInvocation",
    "ToolResponse",
]


def __getattr__(name: str) -> _Any:
    if name == "ToolRegistry":  # renamed for what it holds; the old name kept for a release
        _warnings.warn(
            "runner.tools.ToolRegistry is now runner.tools.FunctionTools",
            DeprecationWarning,
            stacklevel=2,
        )
        return FunctionTools
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
