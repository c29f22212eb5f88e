"""An adapter for the Anthropic Messages API, on the official `anthropic` SDK
(`pip install runner[anthropic]`) with its retries turned off. The key comes from
`ANTHROPIC_API_KEY`.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from ..transcript import (
    AssistantMessage,
    SystemMessage,
    ToolResultMessage,
    Transcript,
    UserMessage,
)
from ._wire import parse_arguments, provider_call
from .base import ModelReply, TokenUsage, ToolCall, ToolChoice, ToolSpec
from .identity import ModelIdentity, redact_url

_STOPS = {"end_turn": "end_turn", "stop_sequence": "end_turn", "tool_use": "tool_use",
          "max_tokens": "max_tokens", "refusal": "refusal"}  # fmt: skip


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


def anthropic_reply(message: Any) -> ModelReply:
    texts, calls = [], []
    for block in message.content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            arguments, error = parse_arguments(block.input)
            calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments,
                                  arguments_error=error))  # fmt: skip
    usage = getattr(message, "usage", None)
    return ModelReply(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=TokenUsage(
            input_tokens=getattr(usage, "input_tokens", 0) or 0,
            output_tokens=getattr(usage, "output_tokens", 0) or 0,
        ),
        stop_reason=_STOPS.get(message.stop_reason or "", "end_turn"),
    )


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
                "the anthropic adapter needs `pip install runner[anthropic]`"
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
        self.max_tokens = max_tokens
        self.client = client or anthropic.AsyncAnthropic(
            api_key=key or "unused-by-local-servers",
            base_url=base_url,
            max_retries=0,  # the runner's policy is the only retry layer
            timeout=request_timeout,
        )
        self.fallback = (
            AnthropicModel(fallback_model, base_url=base_url, api_key=key, client=self.client,
                           max_tokens=max_tokens)
            if fallback_model
            else None
        )  # fmt: skip

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        system, messages = anthropic_messages(transcript)
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": messages,
        }
        if tools:
            request["tools"] = anthropic_tools(tools)
            request["tool_choice"] = {"type": tool_choice}
        message = await provider_call(self._anthropic, self.client.messages.create(**request))
        return anthropic_reply(message)
