"""How an engine is handed its tools: one protocol, `ToolBox`, and implementations that compose.

The engine needs one thing of its tools: the implementation of a tool by name, or None when
there is none (the call is then answered `unknown_tool`). Every way of providing tools is a
`ToolBox`:

- `FunctionTools`: your own async functions, by tool name (contracts from files);
- `DeclaredTools` (`runner.tools.declare`): functions declared with their contracts;
- `McpTools` (`runner.tools.mcp`): the pinned tools of MCP servers;
- `FirstOf`: toolboxes asked in order, the first that has the tool answering.

Each of the first three composes with any other by `a.before(b)`, which is `FirstOf(a, b)`:

    engine = Engine(contracts=..., toolbox=mcp.before(declared).before(FunctionTools({...})), ...)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from .invocation import ToolImplementation


class ToolBox(Protocol):
    """Finds the implementation of a tool by name (None when there is none)."""

    def implementation(self, tool: str) -> ToolImplementation | None: ...


class ComposesInOrder:
    """Gives a toolbox `before`: asked first, then another."""

    __slots__ = ()

    def before(self: ToolBox, other: ToolBox) -> FirstOf:
        """A toolbox that finds these tools first, then `other`'s."""
        return FirstOf(self, other)


class FirstOf(ComposesInOrder):
    """Toolboxes asked in order; the first that has the tool calls it (so an earlier one's tool
    shadows a later one's of the same name: a contract set refuses a name declared twice)."""

    __slots__ = ("boxes",)

    def __init__(self, *boxes: ToolBox) -> None:
        self.boxes: tuple[ToolBox, ...] = boxes

    def implementation(self, tool: str) -> ToolImplementation | None:
        for box in self.boxes:
            found = box.implementation(tool)
            if found is not None:
                return found
        return None

    def __repr__(self) -> str:
        return f"FirstOf({', '.join(map(repr, self.boxes))})"


class FunctionTools(ComposesInOrder):
    """Your own async functions by tool name (`ToolInvocation -> ToolResponse`), for tools whose
    contracts come from files (`load_contracts`)."""

    __slots__ = ("implementations",)

    def __init__(self, implementations: Mapping[str, ToolImplementation] | None = None) -> None:
        # A dict given is kept, not copied: a registration made on it later is seen (as before).
        given = {} if implementations is None else implementations
        self.implementations: dict[str, ToolImplementation] = (
            given if isinstance(given, dict) else dict(given)
        )

    def register(self, tool: str, implementation: ToolImplementation) -> None:
        self.implementations[tool] = implementation

    def implementation(self, tool: str) -> ToolImplementation | None:
        return self.implementations.get(tool)

    def __repr__(self) -> str:
        return f"FunctionTools({sorted(self.implementations)})"
