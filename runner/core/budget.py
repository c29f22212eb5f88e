"""Hard bounds on a run: limits apart from usage, and pure checks.

The engine calls `spent()` at the top of every iteration and again before every sleep and every
dispatch. Attempts are counted when a call is admitted, before its arguments are validated.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

MAX_DEADLINE_S: Final = 1e9
"""About 31 years: a deadline must be finite, and every wait within it must stay a date the
clock can show (datetime ends in the year 9999)."""

INPUT_PROJECTION: Final = 2
"""How a run projects the input tokens of its next model request (kept in its header, so a
stored run is re-driven under its own; see `_planning._projected_input`):
1. the transcript's estimate, or the last request's billed input where that is more (runs
   stored before 2: a provider bills the tools' manifest too, and results appended since the
   last request were missed while its bill was the larger, so a money cap was passed by up to
   a fifth);
2. the last request's bill less the manifest of the tools it sent, plus the estimate of what
   the transcript grew by since (never less than the transcript's estimate), plus the manifest
   of the tools this request sends (tool retrieval may offer others each request); the first
   request, the transcript's estimate plus that manifest."""


class Bound(StrEnum):
    """The independent bounds (cost only when the run sets `max_cost_usd`)."""

    ATTEMPTS = "attempts"
    MODEL_STEPS = "model_steps"
    TOKENS = "tokens"
    DEADLINE = "deadline"
    COST = "cost"


class Limits(BaseModel):
    """A run's budget. Every field is a hard cap the model cannot talk its way past."""

    # Validators are built on first use, not at `import runner` (issue 11: import cost).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    # The defaults: measured on a real third-party customer-service domain (an order database
    # behind an MCP server, its tasks' reference trajectories driven by a scripted model), whose
    # longest task took 13 tool actions (one a request, then the answer) and about 48,000 tokens
    # summed over its requests. Headroom for retries, corrections and a model that wanders:
    # about 4x the actions and requests, about 10x the tokens (a transcript resent each request
    # grows them faster than the steps), and 10 s a request for 30 requests for the deadline.
    max_attempts: int = Field(default=50, ge=1, strict=True)
    """Admitted tool attempts, counted on admission (retries and refused calls included)."""
    max_model_steps: int = Field(default=50, ge=1, strict=True)
    """Model requests that may propose tools; the final tool-free request is outside this cap."""
    max_tokens: int = Field(default=500_000, ge=1, strict=True)
    """Cumulative input plus output tokens reported (or estimated) for model requests. Each
    request's output is limited to what is left (after its projected input, where that leaves
    any), so only input passes it; the final tool-free request after it is spent is outside it."""
    max_seconds: float = Field(
        default=300.0, gt=0, le=MAX_DEADLINE_S, allow_inf_nan=False, strict=True
    )
    """Wall-clock deadline from the run's start, covering model calls, waits and tools."""
    max_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)
    """Money spent on model requests, in US dollars at the run's price (None: unbounded). A
    request is made only when its projected cost fits (see `cost_room`), and its output is
    limited to what the money left pays for after its projected input."""
    final_within_caps: bool = Field(default=False, strict=True)
    """Hold every request to the token and model-step caps, the final tool-free one included:
    a request is made only when a step, its projected input and an output token fit in what is
    left (its output limited to the rest); else the run abstains without a final answer. A
    child run's limits set it: its caps are what its parent has left, so nothing may stand
    outside them. Left out of a run's header while false (headers stored before it read false)."""


LIMIT_OF_BOUND: Final[dict[str, str]] = {
    Bound.ATTEMPTS: "max_attempts",
    Bound.MODEL_STEPS: "max_model_steps",
    Bound.TOKENS: "max_tokens",
    Bound.DEADLINE: "max_seconds",
    Bound.COST: "max_cost_usd",
}
"""The limit whose bound a run's reason names, when a bound ended it."""


def limit_spent(reason: str, limits: Limits) -> str | None:
    """Which limit ended a run and how to raise it (None: no bound ended it): what a person
    reads under a run that stopped on its budget."""
    name = LIMIT_OF_BOUND.get(reason)
    if name is None:
        return None
    value = getattr(limits, name)
    default = Limits.model_fields[name].default
    which = f"{name} {value:g}" + (" (the default)" if value == default else "")
    return (
        f"{which} was spent; raise it with RunSpec(limits=Limits({name}=...)), "
        f"or a fixture's budget: {{{name}: ...}}"
    )


def changed_limits(before: Limits, after: Limits) -> list[str]:
    """The names of the limits `after` sets otherwise than `before`, in declaration order."""
    return [name for name in Limits.model_fields if getattr(before, name) != getattr(after, name)]


@dataclass(slots=True)
class Usage:
    """What a run has spent so far. Changed only by `engine/_spending.py`."""

    started_at: float
    """The clock's monotonic reading when the run started."""
    attempts: int = 0
    model_steps: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: Decimal = Decimal(0)
    """What the model requests so far cost, at the run's price (0 for an unpriced run)."""

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


def deadline(limits: Limits, usage: Usage) -> float:
    """The monotonic reading at which the run's time is up."""
    return usage.started_at + limits.max_seconds


def time_left(limits: Limits, usage: Usage, now: float) -> float:
    return max(0.0, deadline(limits, usage) - now)


def spent(limits: Limits, usage: Usage, now: float) -> Bound | None:
    """The first bound that leaves no room for another model step, or None."""
    if usage.attempts >= limits.max_attempts:
        return Bound.ATTEMPTS
    if usage.model_steps >= limits.max_model_steps:
        return Bound.MODEL_STEPS
    if usage.tokens >= limits.max_tokens:
        return Bound.TOKENS
    if now >= deadline(limits, usage):
        return Bound.DEADLINE
    return None


def cost_spent(limits: Limits, usage: Usage, projected: Decimal) -> bool:
    """Whether the money left cannot pay for one more tool-proposing request.

    `projected` is what the next request is expected to cost. A tool-proposing request is made
    only when what is spent, plus it, plus as much again held back for the final tool-free
    answer, fits in `max_cost_usd`: so the run can still answer when the money runs out.
    """
    if limits.max_cost_usd is None:
        return False
    return usage.cost_usd + 2 * projected > Decimal(str(limits.max_cost_usd))


def cost_room(limits: Limits, usage: Usage, projected: Decimal) -> bool:
    """Whether the money left pays for a request projected to cost `projected`."""
    if limits.max_cost_usd is None:
        return True
    return usage.cost_usd + projected <= Decimal(str(limits.max_cost_usd))


def blocks_dispatch(limits: Limits, usage: Usage, now: float) -> Bound | None:
    """The bound that forbids admitting one more tool attempt now, or None.

    Model steps do not block a call the model already proposed; the other three do. Nor does
    cost: a tool call costs no model money, and the request that proposed it was made only with
    the final answer's share held back.
    """
    if usage.attempts >= limits.max_attempts:
        return Bound.ATTEMPTS
    if usage.tokens >= limits.max_tokens:
        return Bound.TOKENS
    if now >= deadline(limits, usage):
        return Bound.DEADLINE
    return None
