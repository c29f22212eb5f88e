"""The model adapter protocol and the values that cross it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..base.errors import ModelRejected as ModelRejected  # noqa: PLC0414  # for adapters
from ..base.errors import ModelUnavailable as ModelUnavailable  # noqa: PLC0414
from .transcript import ToolCall as ToolCall  # noqa: PLC0414  # re-exported for adapters
from .transcript import Transcript

ToolChoice = Literal["auto", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenUsage:
    input_tokens: int
    output_tokens: int
    estimated: bool = False
    """True when the runner's estimate stands in for a count the provider did not give or that
    could not be believed (see `models/_usage.py`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelReply:
    """What a model request came back with."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: TokenUsage
    stop_reason: str
    """`tool_use` or `end_turn` for a reply the run may act on; `max_tokens` (cut off by the token
    limit), `incomplete` (a reply the provider did not finish, or a stop reason the adapter does
    not know), `malformed` (content the adapter could not read) and `refusal` are never acted on,
    tool calls included. Adapters may add their own, such as `script_exhausted`, for a reply of
    text only: tool calls under any stop reason but `tool_use` and `end_turn` are never acted on
    (the run abstains, `model_incomplete`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as offered to the model, generated from its contract."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelAdapter(Protocol):
    """Anything that can take one planning step.

    An adapter whose `generate` also takes the keyword `max_output_tokens` (see
    `LimitedModelAdapter`) is told, every request, how many output tokens the run's budget
    leaves it; the runner passes it only to an adapter whose `generate` names it (or takes
    `**kwargs`), so one written without it still works, unbounded by the budget's limit.
    """

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        """Answer the transcript; with `tool_choice="none"` the reply must carry no tool calls."""
        ...


class LimitedModelAdapter(Protocol):
    """An adapter that honours the run's output-token limit (the runner's own adapters do)."""

    async def generate(
        self,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        tool_choice: ToolChoice,
        *,
        max_output_tokens: int | None = None,
    ) -> ModelReply:
        """As `ModelAdapter.generate`; the reply uses at most `max_output_tokens` output tokens
        (None: no limit from the run), the least of it and the adapter's own. A reply the limit
        cuts off comes back with stop reason `max_tokens`."""
        ...


class ResumableModel(ModelAdapter, Protocol):
    """An adapter with state of its own (a script's position) that a resumed run must restore.

    `snapshot()` is recorded with every turn; `restore()` gets the last one when a resumed run
    goes live again. Stateless adapters (a live API) need neither.
    """

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, state: dict[str, Any]) -> None: ...
