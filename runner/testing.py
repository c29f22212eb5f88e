"""What you import to test your own agent: a model that is a plain function, the scripted model,
the fake clock, and a tool double that records its calls.

    from runner.testing import FakeClock, FunctionModel, ToolDouble, call, latest_results

    def my_model(transcript, tools):           # your agent's policy, as a plain function
        return "done" if latest_results(transcript) else call("search_flights", origin="SFO")

A `FunctionModel` reply may be a `ModelReply`, a string (the final answer), one `ToolCall` or a
list of them (`call(...)` builds one; ids are given when left empty). Token usage is estimated
from the transcript's size, as the scripted model does, so budgets bind in tests too.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from .base.clock import FakeClock
from .models.base import ModelReply, TokenUsage, ToolCall, ToolChoice, ToolSpec
from .models.scripted import ScriptedModel, ScriptedTurn, estimate_tokens, within_limit
from .models.transcript import AssistantMessage, ToolResultMessage, Transcript, render_json
from .tools.invocation import ToolInvocation, ToolResponse

__all__ = [
    "FakeClock",
    "FunctionModel",
    "Reply",
    "ScriptedModel",
    "ToolDouble",
    "call",
    "latest_results",
    "scripted",
]

Reply: TypeAlias = ModelReply | str | ToolCall | Sequence[ToolCall]
"""What a model function may return: a reply, a final answer, or the tool calls to propose."""

ModelFunction: TypeAlias = Callable[[Transcript, tuple[ToolSpec, ...]], Reply | Awaitable[Reply]]


def call(name: str, /, **arguments: Any) -> ToolCall:
    """A tool call to propose (its id is given by `FunctionModel` when the reply is made)."""
    return ToolCall(id="", name=name, arguments=arguments)


def latest_results(transcript: Transcript) -> list[ToolResultMessage]:
    """The tool results since the model's latest reply (empty before any tool was called)."""
    results: list[ToolResultMessage] = []
    for message in reversed(transcript.messages):
        if isinstance(message, AssistantMessage):
            break
        if isinstance(message, ToolResultMessage):
            results.append(message)
    return results[::-1]


class FunctionModel:
    """A model adapter that calls `function(transcript, tools)` (sync or async) for each request.

    Asked for a tool-free answer (the final request after a bound is spent), the function is
    given no tools. `requests` counts the requests made. Each request's output limit (what the
    run's token and money caps leave, as a provider is told it) is kept in `output_limits`, and a
    reply longer than it is cut off there as a provider would cut it (`max_tokens`, no calls).
    """

    def __init__(self, function: ModelFunction) -> None:
        self.function = function
        self.requests = 0
        self.output_limits: list[int | None] = []

    async def generate(
        self,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        tool_choice: ToolChoice,
        *,
        max_output_tokens: int | None = None,
    ) -> ModelReply:
        self.requests += 1
        self.output_limits.append(max_output_tokens)
        answer = self.function(transcript, () if tool_choice == "none" else tools)
        if inspect.isawaitable(answer):
            answer = await answer
        return within_limit(self._reply(transcript, answer), max_output_tokens)

    def _reply(self, transcript: Transcript, answer: Reply) -> ModelReply:
        if isinstance(answer, ModelReply):
            return answer
        text = answer if isinstance(answer, str) else ""
        given: tuple[ToolCall, ...] = ()
        if isinstance(answer, ToolCall):
            given = (answer,)
        elif not isinstance(answer, str):
            given = tuple(answer)
        calls = tuple(
            item if item.id else dataclasses.replace(item, id=f"call_{self.requests}_{index}")
            for index, item in enumerate(given)
        )
        out_chars = len(text) + sum(_call_chars(c) for c in calls)
        return ModelReply(
            text=text,
            tool_calls=calls,
            usage=TokenUsage(
                input_tokens=estimate_tokens(transcript.stable_chars),
                output_tokens=estimate_tokens(out_chars),
                estimated=True,
            ),
            stop_reason="tool_use" if calls else "end_turn",
        )


def _call_chars(call: ToolCall) -> int:
    """What a call says, in characters, for its usage estimate; hostile calls (arguments with no
    JSON: cyclic, too deep; a name that is no string) are what the runner answers
    `invalid_arguments` or refuses, so the double estimates them and leaves them to it."""
    name = len(call.name) if isinstance(call.name, str) else 0
    try:
        return name + len(render_json(call.arguments))
    except (TypeError, ValueError, RecursionError):
        return name + 1


def scripted(*turns: dict[str, Any]) -> ScriptedModel:
    """A `ScriptedModel` from turns as a fixture writes them:
    `{"tool_calls": [{"name": ..., "args": {...}}]}` or `{"final": "..."}`."""
    return ScriptedModel([ScriptedTurn.model_validate(turn) for turn in turns])


Answer: TypeAlias = object
"""A payload (plain JSON), a `ToolResponse`, an exception to raise, or a function of the
invocation returning one of those (sync or async)."""


class ToolDouble:
    """A tool implementation that answers from a list and records every invocation.

    Answers are used in order and the last one repeats. Register it like any tool:
    `FunctionTools({"search_flights": double})`.
    """

    def __init__(self, *answers: Answer) -> None:
        if not answers:
            raise ValueError("a ToolDouble needs at least one answer")
        self.answers = answers
        self.calls: list[ToolInvocation] = []

    @property
    def arguments(self) -> list[dict[str, Any]]:
        """The arguments of each call, in order."""
        return [dict(invocation.arguments) for invocation in self.calls]

    async def __call__(self, invocation: ToolInvocation) -> ToolResponse:
        self.calls.append(invocation)
        answer = self.answers[min(len(self.calls), len(self.answers)) - 1]
        if callable(answer) and not isinstance(answer, type):
            answer = answer(invocation)
            if inspect.isawaitable(answer):
                answer = await answer
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, ToolResponse):
            return answer
        return ToolResponse(payload=answer)
