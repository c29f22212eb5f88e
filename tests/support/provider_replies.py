"""Canned provider replies for the hostile-endpoint tests: one builder per protocol, so each test
says only what is odd about its reply."""

from __future__ import annotations

import json
from typing import Any

from tests.support.travel import FLIGHT_ARGS

OK_USAGE = {"input": 40, "output": 12}


def openai_exchange(
    *,
    content: Any = None,
    calls: int = 0,
    finish: str = "stop",
    usage: Any = OK_USAGE,
    status: int = 200,
) -> dict[str, Any]:
    """A Chat Completions answer: `calls` search_flights calls, `usage` as given (`None`: none)."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "search_flights", "arguments": json.dumps(FLIGHT_ARGS)}}
            for i in range(calls)
        ]  # fmt: skip
    body: dict[str, Any] = {
        "id": "chatcmpl-hostile", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }  # fmt: skip
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage["input"], "completion_tokens": usage["output"]}
    return {"status": status, "raw": _dumps(body)}


def anthropic_exchange(
    *,
    content: Any = None,
    calls: int = 0,
    stop: str = "end_turn",
    usage: Any = OK_USAGE,
    status: int = 200,
) -> dict[str, Any]:
    """A Messages answer: text `content` (or a list of blocks as given) and `calls` tool_use."""
    blocks: list[Any] = (
        content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
    )
    blocks = blocks + [
        {"type": "tool_use", "id": f"c{i}", "name": "search_flights", "input": FLIGHT_ARGS}
        for i in range(calls)
    ]
    body: dict[str, Any] = {
        "id": "msg_hostile", "type": "message", "role": "assistant", "model": "m",
        "content": blocks, "stop_reason": stop, "stop_sequence": None,
    }  # fmt: skip
    if usage is not None:
        body["usage"] = {"input_tokens": usage["input"], "output_tokens": usage["output"]}
        body["usage"].update({k: v for k, v in usage.items() if k.startswith("cache_")})
    return {"status": status, "raw": _dumps(body)}


def exchange(protocol: str, **fields: Any) -> dict[str, Any]:
    """`openai_exchange` or `anthropic_exchange`; `stop` names the Anthropic stop reason and is
    translated for OpenAI (`max_tokens` -> `length`, `tool_use` -> `tool_calls`, `end_turn` ->
    `stop`; anything else is sent as it is)."""
    if protocol == "anthropic":
        return anthropic_exchange(**fields)
    stop = fields.pop("stop", "end_turn")
    finish = {"max_tokens": "length", "tool_use": "tool_calls", "end_turn": "stop"}.get(stop, stop)
    return openai_exchange(finish=finish, **fields)


def _dumps(body: dict[str, Any]) -> str:
    """JSON as a careless server writes it: NaN and Infinity as bare words, any integer size."""
    return json.dumps(body, allow_nan=True)
