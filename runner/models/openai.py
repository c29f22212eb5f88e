"""An adapter for the OpenAI Chat Completions tool-calling API (OpenAI, vLLM, llama.cpp, Ollama).

Built on the official `openai` SDK (`pip install 'runner-fsm[openai]'`) with its retries turned
off: the runner's policy is the one retry layer. The API key comes from `OPENAI_API_KEY` (a local
server that needs none may be given any key); it never appears in fixtures or logs.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from ..base.errors import ConfigError
from ._usage import checked_usage
from ._wire import http_client, member, output_limit, parse_arguments, provider_call
from .base import ModelReply, ToolCall, ToolChoice, ToolSpec
from .identity import ModelIdentity, redact_url
from .transcript import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    Transcript,
    UserMessage,
    render_json,
)

TokenLimitField = Literal["max_completion_tokens", "max_tokens"]

# Any other finish reason (`function_call`, none at all, one added later) is `incomplete`.
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


def openai_reply(completion: Any, transcript: Transcript) -> ModelReply:
    """A Chat Completions response as a `ModelReply`; nothing in it is trusted.

    Content that is neither text nor a list of text parts, and calls without a string id and
    name, make the reply `malformed`; a finish reason this adapter does not know makes it
    `incomplete`. Usage that cannot be believed is replaced by the runner's estimate.
    """
    usage = member(completion, "usage")

    def reply(text: str, calls: tuple[ToolCall, ...], stop: str) -> ModelReply:
        counts = checked_usage(
            member(usage, "prompt_tokens"), member(usage, "completion_tokens"),
            transcript=transcript, text=text, calls=calls,
        )  # fmt: skip
        return ModelReply(text=text, tool_calls=calls, usage=counts, stop_reason=stop)

    choices = member(completion, "choices")
    if not choices:
        return reply("", (), "empty")
    if not isinstance(choices, list):
        return reply("", (), "malformed")
    choice = choices[0]
    message = member(choice, "message")
    text, refusal = _text(member(message, "content")), member(message, "refusal")
    calls = _calls(member(message, "tool_calls"))
    if text is None or calls is None or not isinstance(refusal, str | None):
        return reply("", (), "malformed")
    if refusal:
        return reply(refusal, calls, "refusal")
    finish = member(choice, "finish_reason")
    stop = _STOPS.get(finish, "incomplete") if isinstance(finish, str) else "incomplete"
    return reply(text, calls, stop)


def _text(content: Any) -> str | None:
    """The message's text: a string, or a list of text parts joined; None for anything else."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        return None
    texts = [member(part, "text") for part in content if member(part, "type") == "text"]
    if len(texts) != len(content) or not all(isinstance(text, str) for text in texts):
        return None
    return "".join(texts)


def _calls(raw: Any) -> tuple[ToolCall, ...] | None:
    """The proposed calls, or None when one has no string id or name (or they are no list)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        return None
    calls = []
    for call in raw:
        function = member(call, "function")
        call_id, name = member(call, "id"), member(function, "name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            return None
        arguments, error = parse_arguments(member(function, "arguments"))
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments, arguments_error=error))
    return tuple(calls)


class OpenAIChatModel:
    """One model behind a Chat Completions endpoint, with an optional same-family fallback."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        fallback_model: str | None = None,
        max_tokens: int | None = None,
        token_limit_field: TokenLimitField = "max_completion_tokens",
        request_timeout: float = 120.0,
        client: Any = None,
    ) -> None:
        try:
            import openai  # noqa: PLC0415  # an optional extra, loaded only when used
        except ImportError as exc:
            raise ConfigError(
                "the openai adapter needs `pip install 'runner-fsm[openai]'`"
            ) from exc
        self._openai = openai
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if key is None and base_url is None:
            raise ConfigError("OPENAI_API_KEY is not set (or give --base-url for a local server)")
        self.model = model
        self.name = f"openai:{model}"
        self.identity = ModelIdentity(
            provider="openai", name=model, base_url=redact_url(base_url), fallback=fallback_model
        )
        self.secrets: tuple[str, ...] = (key,) if key else ()
        """What the run redacts by value, like its own credentials: an endpoint may echo it."""
        self.max_tokens = max_tokens
        """The adapter's own cap on a reply's output tokens (None: the endpoint's default)."""
        if token_limit_field not in ("max_completion_tokens", "max_tokens"):
            raise ConfigError(f"token_limit_field {token_limit_field!r} is not a known field")
        self.token_limit_field = token_limit_field
        """The request field the output limit goes in: OpenAI's `max_completion_tokens`, or
        `max_tokens` for a server that reads only that one (Ollama, LM Studio, older
        llama.cpp: they ignore the other)."""
        self.client = client or openai.AsyncOpenAI(
            api_key=key or "unused-by-local-servers",
            base_url=base_url,
            max_retries=0,  # the runner's policy is the only retry layer
            timeout=request_timeout,
            http_client=http_client(openai),
        )
        self.fallback = (
            OpenAIChatModel(fallback_model, base_url=base_url, api_key=key, client=self.client,
                            max_tokens=max_tokens, token_limit_field=token_limit_field)
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
        """One Chat Completions request; its output limit (`token_limit_field`) is the least of
        the adapter's own `max_tokens` and the run's `max_output_tokens` (none when neither)."""
        request: dict[str, Any] = {"model": self.model, "messages": openai_messages(transcript)}
        limit = output_limit(self.max_tokens, max_output_tokens)
        if limit is not None:
            request[self.token_limit_field] = limit
        if tools:
            request["tools"] = openai_tools(tools)
            request["tool_choice"] = tool_choice
        completion = await provider_call(
            self._openai, self.client.chat.completions.create(**request)
        )
        return openai_reply(completion, transcript)
