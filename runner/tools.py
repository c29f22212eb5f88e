"""What a tool implementation receives and returns, and the registry the engine dispatches to.

Tenant, principal, credentials and the operation key reach a tool through `ToolInvocation`, set by
the runtime; none of them is ever a model argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who the run acts for, and what it may do. From the runtime only."""

    id: str
    scopes: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInvocation:
    """One dispatch of one tool."""

    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    """Validated arguments as the model sent them."""
    tenant: str
    principal: Principal
    credentials: Mapping[str, str] = field(repr=False)
    operation_key: str | None
    timeout_s: float
    """min(the contract's timeout, time left); the engine enforces it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResponse:
    """A tool's raw answer: the payload as returned, plus transport metadata."""

    payload: object
    retry_after: str | None = None
    """A Retry-After value as the transport gave it (delay-seconds or HTTP-date)."""


class ToolImplementation(Protocol):
    async def __call__(self, invocation: ToolInvocation) -> ToolResponse: ...


class ToolBox(Protocol):
    """Finds the implementation for a tool name (None when there is none)."""

    def implementation(self, tool: str) -> ToolImplementation | None: ...


@dataclass(slots=True)
class ToolRegistry:
    """A plain name -> implementation registry, for embedding the runner in a service."""

    implementations: dict[str, ToolImplementation] = field(default_factory=dict)

    def register(self, tool: str, implementation: ToolImplementation) -> None:
        self.implementations[tool] = implementation

    def implementation(self, tool: str) -> ToolImplementation | None:
        return self.implementations.get(tool)
