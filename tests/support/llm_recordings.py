"""Writes the recorded provider exchanges in `tests/data/llm/`.

Run: `python -m tests.support.llm_recordings`.

Two kinds: behaviour scenarios (tool calls, parallel calls, invalid JSON arguments, an invented
tool, 429 with Retry-After, 500, a refusal, 401, a fallback, a hold unlike the fixture's script)
and, for every fixture, the model turns its scripted model plays, as each provider would have sent
them.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from runner.base import log
from runner.harness.fixtures import collect_fixture_paths, load_fixture
from runner.models.base import ModelReply, ToolCall
from runner.models.scripted import ScriptedModel
from runner.store import MemoryStore
from runner.travel import load_travel_contracts
from runner.travel.scenario import run_fixture
from tests.support.paths import DATA, FIXTURES

OUT = DATA / "llm"
FLIGHT = {"origin": "SFO", "destination": "NRT", "date_start": "2027-04-01",
          "date_end": "2027-04-03", "accessibility": "wheelchair"}  # fmt: skip
STAY = {"check_in": "2027-04-02", "check_out": "2027-04-06"}
_FINISH = {"tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "length"}


def openai_body(model: str, reply: ModelReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.stop_reason == "refusal":
        message.update(content=None, refusal=reply.text)
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {
                "name": c.name,
                "arguments": c.arguments_error or json.dumps(c.arguments)}}
            for c in reply.tool_calls
        ]  # fmt: skip
    usage = reply.usage
    return {
        "id": "chatcmpl-recorded", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": _FINISH.get(reply.stop_reason, "stop")}],
        "usage": {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                  "total_tokens": usage.input_tokens + usage.output_tokens},
    }  # fmt: skip


def anthropic_body(model: str, reply: ModelReply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name,
         "input": c.arguments_error if c.arguments_error is not None else c.arguments}
        for c in reply.tool_calls
    ]  # fmt: skip
    return {
        "id": "msg_recorded", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": reply.stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": reply.usage.input_tokens,
                  "output_tokens": reply.usage.output_tokens},
    }  # fmt: skip


def error(
    protocol: str, status: int, message: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    body = (
        {"error": {"message": message, "type": "api_error", "code": None}}
        if protocol == "openai"
        else {"type": "error", "error": {"type": "api_error", "message": message}}
    )
    return {"status": status, "headers": headers or {}, "body": body}


def ok(protocol: str, model: str, reply: ModelReply) -> dict[str, Any]:
    body = openai_body(model, reply) if protocol == "openai" else anthropic_body(model, reply)
    return {"status": 200, "headers": {}, "body": body}


def reply(text: str = "", calls: tuple[ToolCall, ...] = (), stop: str | None = None) -> ModelReply:
    from runner.models.base import TokenUsage  # noqa: PLC0415

    return ModelReply(
        text=text,
        tool_calls=calls,
        usage=TokenUsage(input_tokens=120, output_tokens=20),
        stop_reason=stop or ("tool_use" if calls else "end_turn"),
    )


def call(call_id: str, name: str = "search_flights", **changes: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments={**FLIGHT, **changes})


def scenarios(protocol: str) -> dict[str, list[dict[str, Any]]]:
    final = reply("NH7 with assistance reported available.")
    bad = ToolCall(id="c1", name="search_flights", arguments={},
                   arguments_error='{"origin": "SFO", "destination"')  # fmt: skip
    return {
        "tool_calls": [ok(protocol, "tool_calls", reply(calls=(call("c1"),))),
                       ok(protocol, "tool_calls", final)],
        "parallel_calls": [ok(protocol, "parallel_calls",
                              reply(calls=(call("c1"), call("c2", destination="HND")))),
                           ok(protocol, "parallel_calls", final)],
        "invalid_json_args": [ok(protocol, "invalid_json_args", reply(calls=(bad,))),
                              ok(protocol, "invalid_json_args", final)],
        "invented_tool": [ok(protocol, "invented_tool",
                             reply(calls=(ToolCall(id="c1", name="teleport", arguments={}),))),
                          ok(protocol, "invented_tool", final)],
        "rate_limited": [error(protocol, 429, "slow down", {"retry-after": "2"}),
                         ok(protocol, "rate_limited", reply(calls=(call("c1"),))),
                         ok(protocol, "rate_limited", final)],
        "server_error": [error(protocol, 500, "internal error"),
                         ok(protocol, "server_error", final)],
        "refusal": [ok(protocol, "refusal", reply("I can't help with that.", stop="refusal"))],
        "unauthorized": [error(protocol, 401, "invalid api key")],
        "primary": [error(protocol, 503, "overloaded")] * 3,
        "secondary": [ok(protocol, "secondary", final)],
        # The fixture hold_timeout_after_commit, driven by a model that holds for three guests
        # where the fixture's script holds for four: a resume that replays the script shows.
        "live-hold": [ok(protocol, "live-hold", reply(calls=(ToolCall(
                          id="h1", name="search_hotels", arguments={**STAY, "city": "Tokyo",
                          "accessibility": "wheelchair", "guests": 3}),))),
                      ok(protocol, "live-hold", reply(calls=(ToolCall(
                          id="h2", name="hold_room", arguments={**STAY, "hotel_id": "H-SHIBA",
                          "guests": 3, "room_type": "accessible"}),))),
                      ok(protocol, "live-hold", reply("Held a room at Shiba Park Hotel."))],
    }  # fmt: skip


class _Capturing:
    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.replies: list[ModelReply] = []

    async def generate(self, transcript: Any, tools: Any, choice: Any) -> ModelReply:
        got = await self.inner.generate(transcript, tools, choice)
        self.replies.append(got)
        return got


def fixture_replies() -> dict[str, list[ModelReply]]:
    contracts = load_travel_contracts()
    found = {}
    for path in collect_fixture_paths([FIXTURES]):
        fixture = load_fixture(path, contracts)
        capturing = _Capturing(ScriptedModel(fixture.model))
        run_fixture(fixture, contracts, MemoryStore(), model=capturing)  # type: ignore[arg-type]
        found[fixture.name] = capturing.replies
    return found


def main() -> None:
    replies = fixture_replies()
    for protocol in ("openai", "anthropic"):
        folder = OUT / protocol
        folder.mkdir(parents=True, exist_ok=True)
        for model, exchanges in scenarios(protocol).items():
            doc = {"protocol": protocol, "model": model, "exchanges": exchanges}
            (folder / f"{model}.json").write_text(json.dumps(doc, indent=1) + "\n")
        for name, turns in replies.items():
            model = f"fixture-{name}"
            doc = {"protocol": protocol, "model": model,
                   "exchanges": [ok(protocol, model, r) for r in turns]}  # fmt: skip
            (folder / f"{model}.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    log.configure(json=True, level=logging.WARNING)
    main()
