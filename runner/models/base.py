"""The model adapter protocol and the values that cross it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from ..transcript import Transcript

ToolChoice = Literal["auto", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One call the model proposed."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenUsage:
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelReply:
    """What a model request came back with."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: TokenUsage
    stop_reason: str
    """`tool_use`, `end_turn`, or an adapter-specific reason such as `script_exhausted`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as offered to the model, generated from its contract."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelAdapter(Protocol):
    """Anything that can take one planning step."""

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        """Answer the transcript; with `tool_choice="none"` the reply must carry no tool calls."""
        ...


class ResumableModel(ModelAdapter, Protocol):
    """An adapter with state of its own (a script's position) that a resumed run must restore.

    `snapshot()` is recorded with every turn; `restore()` gets the last one when a resumed run
    goes live again. Stateless adapters (a live API) need neither.
    """

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, state: dict[str, Any]) -> None: ...
