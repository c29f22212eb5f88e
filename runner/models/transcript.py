"""The conversation a model sees, kept as an append-only list whose size is tracked as it grows.

Tool results are rendered deterministically (sorted keys, compact separators), so the transcript is
an exact growing prefix from step to step.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson


def render_json(value: object) -> str:
    """Canonical JSON: the same value always renders to the same text (sorted keys, compact).

    orjson on the hot path; the standard library for what orjson refuses (integers past 64 bits),
    with the same output.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str).decode()
    except orjson.JSONEncodeError:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One call the model proposed."""

    id: str
    name: str
    arguments: dict[str, Any]
    arguments_error: str | None = None
    """Set when the provider's arguments were not a JSON object (`arguments` is then empty)."""


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


def _text(message: Message) -> str:
    """What the model reads of a message (its size counts toward the prefill)."""
    if isinstance(message, ToolResultMessage):
        return message.content
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = [{"id": c.id, "name": c.name, "args": c.arguments} for c in message.tool_calls]
        return message.text + render_json(calls)
    return message.text


@dataclass(slots=True)
class Transcript:
    """Messages in order. Kept current on every append, at a cost that does not grow with the
    transcript: its size in characters, the size it would have without truncation, and a chained
    digest (a fingerprint of everything so far, for telling whether a replay saw the same context).
    """

    messages: list[Message] = field(default_factory=list)
    chars: int = 0
    full_chars: int = 0
    """What `chars` would be if no tool result had been truncated."""
    stable_chars: int = 0
    """`chars` without the budget annotations (what the digest takes): what a token estimate
    counts, so that a replay under another budget estimates what a real run under it would."""
    digest: str = ""

    def append(
        self, message: Message, *, full_size: int | None = None, fingerprint: str | None = None
    ) -> None:
        """Add `message`. `fingerprint` is what the digest takes of it, when not its whole text
        (budget annotations are left out, so a replay under another budget can match)."""
        text = _text(message)
        self.messages.append(message)
        self.chars += len(text)
        self.full_chars += len(text) if full_size is None else full_size
        part = text if fingerprint is None else fingerprint
        self.stable_chars += len(part)
        chained = f"{self.digest}\x1e{message.role}\x1f{part}"
        self.digest = hashlib.sha256(chained.encode()).hexdigest()

    def tool_result(
        self,
        *,
        call_id: str,
        tool: str,
        result_class: str,
        content: str,
        is_error: bool,
        full_size: int | None = None,
        fingerprint: str | None = None,
    ) -> ToolResultMessage:
        message = ToolResultMessage(
            call_id=call_id,
            tool=tool,
            result_class=result_class,
            content=content,
            is_error=is_error,
        )
        self.append(message, full_size=full_size, fingerprint=fingerprint)
        return message

    def last_result_classes(self) -> frozenset[str]:
        """Classes of the tool results after the last assistant message (the previous step)."""
        classes: set[str] = set()
        for message in reversed(self.messages):
            if not isinstance(message, ToolResultMessage):
                break
            classes.add(message.result_class)
        return frozenset(classes)
