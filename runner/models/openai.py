"""An adapter for the OpenAI Chat Completions tool-calling API (OpenAI, vLLM, llama.cpp, Ollama).

Built on the official `openai` SDK (`pip install runner[openai]`) with its retries turned off: the
runner's policy is the one retry layer. The API key comes from `OPENAI_API_KEY` (a local server
that needs none may be given any key); it never appears in fixtures or logs.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from ..transcript import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    Transcript,
    UserMessage,
    render_json,
)
from ._wire import parse_arguments, provider_call
from .base import ModelReply, TokenUsage, ToolCall, ToolChoice, ToolSpec
from .identity import ModelIdentity, redact_url

_STOPS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens",
          "content_filter": "refusal"}  # fmt: skip


def openai_messages(transcript: Transcript) -> list[dict[str, Any]]:
    """The transcript in Chat Completions form: every tool result tagged with its call id."""
    return [_message(message) for message in transcript.messages]


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.text}
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.text}
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    assert isinstance(message, AssistantMessage)
    wire: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if message.tool_calls:
        wire["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.name, "arguments": render_json(call.arguments)}}
            for call in message.tool_calls
        ]  # fmt: skip
    return wire


def openai_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [
        {"type": "function",
         "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]  # fmt: skip


def openai_reply(completion: Any) -> ModelReply:
    """A Chat Completions response as a `ModelReply`; nothing in it is trusted."""
    if not completion.choices:
        return ModelReply(text="", tool_calls=(), usage=_usage(completion), stop_reason="empty")
    choice = completion.choices[0]
    message = choice.message
    calls = []
    for call in message.tool_calls or ():
        arguments, error = parse_arguments(call.function.arguments)
        calls.append(
            ToolCall(id=call.id, name=call.function.name, arguments=arguments,
                     arguments_error=error)
        )  # fmt: skip
    refusal = getattr(message, "refusal", None)
    stop = "refusal" if refusal else _STOPS.get(choice.finish_reason or "", "end_turn")
    return ModelReply(
        text=refusal or message.content or "",
        tool_calls=tuple(calls),
        usage=_usage(completion),
        stop_reason=stop,
    )


def _usage(completion: Any) -> TokenUsage:
    usage = getattr(completion, "usage", None)
    return TokenUsage(
        input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        output_tokens=getattr(usage, "completion_tokens", 0) or 0,
    )


class OpenAIChatModel:
    """One model behind a Chat Completions endpoint, with an optional same-family fallback."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        fallback_model: str | None = None,
        request_timeout: float = 120.0,
        client: Any = None,
    ) -> None:
        try:
            import openai  # noqa: PLC0415  # an optional extra, loaded only when used
        except ImportError as exc:
            raise ConfigError("the openai adapter needs `pip install runner[openai]`") from exc
        self._openai = openai
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if key is None and base_url is None:
            raise ConfigError("OPENAI_API_KEY is not set (or give --base-url for a local server)")
        self.model = model
        self.name = f"openai:{model}"
        self.identity = ModelIdentity(
            provider="openai", name=model, base_url=redact_url(base_url), fallback=fallback_model
        )
        self.client = client or openai.AsyncOpenAI(
            api_key=key or "unused-by-local-servers",
            base_url=base_url,
            max_retries=0,  # the runner's policy is the only retry layer
            timeout=request_timeout,
        )
        self.fallback = (
            OpenAIChatModel(fallback_model, base_url=base_url, api_key=key, client=self.client)
            if fallback_model
            else None
        )

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        request: dict[str, Any] = {"model": self.model, "messages": openai_messages(transcript)}
        if tools:
            request["tools"] = openai_tools(tools)
            request["tool_choice"] = tool_choice
        completion = await provider_call(
            self._openai, self.client.chat.completions.create(**request)
        )
        return openai_reply(completion)
