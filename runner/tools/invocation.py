"""What a tool implementation receives and returns (the toolboxes that hold them: `toolbox.py`).

Tenant, principal, credentials and the operation key reach a tool through `ToolInvocation`, set by
the runtime; none of them is ever a model argument.
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol


class CancelSignal:
    """Read-only view of a run's cancel request, handed to the tools it dispatches
    (`ToolInvocation.cancel_requested`): a tool that can stop early at a safe point may watch
    it (a child run is asked to cancel in turn); a cancel never interrupts a tool."""

    __slots__ = ("_event",)

    def __init__(self, event: asyncio.Event) -> None:
        self._event = event

    def is_set(self) -> bool:
        """Whether the run was asked to cancel."""
        return self._event.is_set()

    async def wait(self) -> None:
        """Return once the run is asked to cancel."""
        await self._event.wait()


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who the run acts for, and what it may do. From the runtime only."""

    id: str
    scopes: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetLeft:
    """What a run has left of each bound (a child run is carved from it, never more)."""

    attempts: int
    model_steps: int
    tokens: int
    seconds: float
    cost_usd: float | None = None
    """None: the run has no money budget."""

    @classmethod
    def of(cls, limits: Any) -> BudgetLeft:
        """All of `limits` (a `Limits`): what a run that has spent nothing has left."""
        return cls(
            attempts=limits.max_attempts,
            model_steps=limits.max_model_steps,
            tokens=limits.max_tokens,
            seconds=limits.max_seconds,
            cost_usd=limits.max_cost_usd,
        )

    def minus(self, other: BudgetLeft) -> BudgetLeft:
        cost = self.cost_usd
        if cost is not None and other.cost_usd is not None:
            cost = max(0.0, cost - other.cost_usd)
        return BudgetLeft(
            attempts=max(0, self.attempts - other.attempts),
            model_steps=max(0, self.model_steps - other.model_steps),
            tokens=max(0, self.tokens - other.tokens),
            seconds=self.seconds,  # time runs for every call at once: it is not held back
            cost_usd=cost,
        )

    def plus(self, other: BudgetLeft) -> BudgetLeft:
        cost = None if self.cost_usd is None else self.cost_usd + (other.cost_usd or 0.0)
        return BudgetLeft(
            attempts=self.attempts + other.attempts,
            model_steps=self.model_steps + other.model_steps,
            tokens=self.tokens + other.tokens,
            seconds=max(self.seconds, other.seconds),
            cost_usd=cost,
        )


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
    run_id: str | None = None
    """The run that dispatched the call."""
    budget_left: BudgetLeft | None = None
    """For a child-run tool (`runner.tools.children`): what the run has left to carve the child from
    (less what other child calls of the batch hold). None for other tools."""
    cancel_requested: CancelSignal | None = None
    """Set once the run that dispatched the call is asked to cancel (`RunHandle.cancel`). A
    cancel never interrupts a tool; one that can stop early at a safe point may watch this (a
    child-run tool asks its child to cancel). Never set for a run that has no handle."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResponse:
    """A tool's raw answer: the payload as returned, plus transport metadata."""

    payload: object
    retry_after: str | None = None
    """A Retry-After value as the transport gave it (delay-seconds or HTTP-date)."""


class ToolImplementation(Protocol):
    async def __call__(self, invocation: ToolInvocation) -> ToolResponse: ...


_MOVED: Final[dict[str, str]] = {"ToolBox": "ToolBox", "ToolRegistry": "FunctionTools"}
"""Names that moved to `runner.tools.toolbox` (the second a rename), kept here for a release."""


def __getattr__(name: str) -> Any:
    new = _MOVED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Not imported here (it imports this module): the package's `__init__` has loaded it, as
    # a package is imported before any of its modules can be reached.
    toolbox = sys.modules[f"{__package__}.toolbox"]
    where = "runner.tools.toolbox" if new == name else f"runner.tools.toolbox.{new}"
    warnings.warn(
        f"runner.tools.invocation.{name} moved to {where}", DeprecationWarning, stacklevel=2
    )
    return getattr(toolbox, new)
