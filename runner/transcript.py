"""The conversation a model sees, kept as an append-only list whose size is tracked as it grows.

Tool results are rendered deterministically (sorted keys, compact separators), so the transcript is
an exact growing prefix from step to step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from .models.base import ToolCall


def render_json(value: object) -> str:
    """Canonical JSON: the same value always renders to the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemMessage:
    text: str
    role: Literal["system"] = "system"


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    text: str
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultMessage:
    """Exactly one per tool call, in call order, tagged with the call's id."""

    call_id: str
    tool: str
    result_class: str
    content: str
    """Rendered JSON the model reads."""
    is_error: bool
    role: Literal["tool"] = "tool"


Message = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage


def _size(message: Message) -> int:
    if isinstance(message, ToolResultMessage):
        return len(message.content)
    if isinstance(message, AssistantMessage):
        return len(message.text) + sum(
            len(call.name) + len(render_json(call.arguments)) for call in message.tool_calls
        )
    return len(message.text)


@dataclass(slots=True)
class Transcript:
    """Messages in order, with their total size in characters kept current on append."""

    messages: list[Message] = field(default_factory=list)
    chars: int = 0

    def append(self, message: Message) -> None:
        self.messages.append(message)
        self.chars += _size(message)

    def tool_result(
        self, *, call_id: str, tool: str, result_class: str, body: dict[str, Any], is_error: bool
    ) -> ToolResultMessage:
        message = ToolResultMessage(
            call_id=call_id,
            tool=tool,
            result_class=result_class,
            content=render_json(body),
            is_error=is_error,
        )
        self.append(message)
        return message

    def last_result_classes(self) -> frozenset[str]:
        """Classes of the tool results after the last assistant message (the previous step)."""
        classes: set[str] = set()
        for message in reversed(self.messages):
            if not isinstance(message, ToolResultMessage):
                break
            classes.add(message.result_class)
        return frozenset(classes)
