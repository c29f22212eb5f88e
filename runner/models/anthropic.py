"""An adapter for the Anthropic Messages API, on the official `anthropic` SDK
(`pip install 'runner-fsm[anthropic]'`) with its retries turned off. The key comes from
`ANTHROPIC_API_KEY`.
"""

from __future__ import annotations

import os
from typing import Any

from ..base.errors import ConfigError
from ._usage import checked_usage, counted
from ._wire import http_client, member, output_limit, parse_arguments, provider_call
from .base import ModelReply, ToolCall, ToolChoice, ToolSpec
from .identity import ModelIdentity, redact_url
from .transcript import (
    AssistantMessage,
    SystemMessage,
    ToolResultMessage,
    Transcript,
    UserMessage,
)

# Any other stop reason (`pause_turn`, none at all, one added later) is `incomplete`.
_STOPS = {"end_turn": "end_turn", "stop_sequence": "end_turn", "tool_use": "tool_use",
          "max_tokens": "max_tokens", "model_context_window_exceeded": "max_tokens",
          "refusal": "refusal"}  # fmt: skip
_SILENT = frozenset({"thinking", "redacted_thinking"})
"""Blocks that carry no part of the answer."""


def anthropic_messages(transcript: Transcript) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt, messages): tool results become `tool_result` blocks of the next user turn,
    errors marked `is_error`, and consecutive user content is merged (roles must alternate)."""
    system: list[str] = []
    messages: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})

    for message in transcript.messages:
        if isinstance(message, SystemMessage):
            system.append(message.text)
        elif isinstance(message, UserMessage):
            add("user", {"type": "text", "text": message.text})
        elif isinstance(message, ToolResultMessage):
            add("user", {"type": "tool_result", "tool_use_id": message.call_id,
                         "content": message.content, "is_error": message.is_error})  # fmt: skip
        elif isinstance(message, AssistantMessage):
            if message.text:
                add("assistant", {"type": "text", "text": message.text})
            for call in message.tool_calls:
                add("assistant", {"type": "tool_use", "id": call.id, "name": call.name,
                                  "input": call.arguments})  # fmt: skip
            if not message.text and not message.tool_calls:
                add("assistant", {"type": "text", "text": "(no reply)"})
    return "\n\n".join(system), messages


def anthropic_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools]  # fmt: skip


def anthropic_reply(message: Any, transcript: Transcript) -> ModelReply:
    """A Messages response as a `ModelReply`; nothing in it is trusted.

    A block of a type this adapter does not know (thinking aside), text that is not a string, or
    a tool use without a string id and name make the reply `malformed`; a stop reason it does not
    know (`pause_turn`, one added later) makes it `incomplete`. Usage that cannot be believed is
    replaced by the runner's estimate.
    """
    content, stop = member(message, "content"), member(message, "stop_reason")
    read = _blocks(content) if isinstance(content, list) else None
    text, calls = read if read is not None else ("", ())
    if read is None:
        stop = "malformed"
    else:
        stop = _STOPS.get(stop, "incomplete") if isinstance(stop, str) else "incomplete"
    usage = member(message, "usage")
    counts = checked_usage(
        _input_tokens(usage), member(usage, "output_tokens"),
        transcript=transcript, text=text, calls=calls,
    )  # fmt: skip
    return ModelReply(text=text, tool_calls=calls, usage=counts, stop_reason=stop)


def _input_tokens(usage: Any) -> object:
    """Every input token of the request: Anthropic reports prompt-cache writes and reads apart
    from `input_tokens`. None when a part is there but cannot be believed."""
    total = member(usage, "input_tokens")
    for name in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        part = member(usage, name)
        if part is None:
            continue
        first, more = counted(total), counted(part)
        if first is None or more is None:
            return None
        total = first + more
    return total


def _blocks(content: list[Any]) -> tuple[str, tuple[ToolCall, ...]] | None:
    """(text, calls) from the content blocks, or None when one cannot be read."""
    texts, calls = [], []
    for block in content:
        kind = member(block, "type")
        if isinstance(kind, str) and kind in _SILENT:
            continue
        if kind == "text" and isinstance(text := member(block, "text"), str):
            texts.append(text)
            continue
        call_id, name = member(block, "id"), member(block, "name")
        if kind != "tool_use" or not isinstance(call_id, str) or not isinstance(name, str):
            return None
        arguments, error = parse_arguments(member(block, "input"))
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments, arguments_error=error))
    return "".join(texts), tuple(calls)


class AnthropicModel:
    """One Claude model, with an optional same-family fallback."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        fallback_model: str | None = None,
        max_tokens: int = 1024,
        request_timeout: float = 120.0,
        client: Any = None,
    ) -> None:
        try:
            import anthropic  # noqa: PLC0415  # an optional extra, loaded only when used
        except ImportError as exc:
            raise ConfigError(
                "the anthropic adapter needs `pip install 'runner-fsm[anthropic]'`"
            ) from exc
        self._anthropic = anthropic
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if key is None and base_url is None:
            raise ConfigError("ANTHROPIC_API_KEY is not set")
        self.model = model
        self.name = f"anthropic:{model}"
        self.identity = ModelIdentity(
            provider="anthropic", name=model, base_url=redact_url(base_url), fallback=fallback_model
        )
        self.secrets: tuple[str, ...] = (key,) if key else ()
        """What the run redacts by value, like its own credentials: an endpoint may echo it."""
        self.max_tokens = max_tokens
        self.client = client or anthropic.AsyncAnthropic(
            api_key=key or "unused-by-local-servers",
            base_url=base_url,
            max_retries=0,  # the runner's policy is the only retry layer
            timeout=request_timeout,
            http_client=http_client(anthropic),
        )
        self.fallback = (
            AnthropicModel(fallback_model, base_url=base_url, api_key=key, client=self.client,
                           max_tokens=max_tokens)
            if fallback_model
            else None
        )  # fmt: skip

    async def generate(
        self,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        tool_choice: ToolChoice,
        *,
        max_output_tokens: int | None = None,
    ) -> ModelReply:
        """One Messages request; `max_tokens` is the least of the adapter's own and the run's
        `max_output_tokens`."""
        system, messages = anthropic_messages(transcript)
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": output_limit(self.max_tokens, max_output_tokens),
            "system": system,
            "messages": messages,
        }
        if tools:
            request["tools"] = anthropic_tools(tools)
            request["tool_choice"] = {"type": tool_choice}
        message = await provider_call(self._anthropic, self.client.messages.create(**request))
        return anthropic_reply(message, transcript)
