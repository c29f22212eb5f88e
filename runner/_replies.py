"""What the engine accepts from any model adapter: a `ModelReply` it can act on, store and replay.

An adapter is foreign code. Its reply is checked once, before it is recorded: a reply whose shape
is wrong (not a `ModelReply`, text that is not a string, token counts that are not counts) raises
`MalformedReply`, which ends the run like any other model failure (`model_error`). Lone
surrogates in its text are replaced. A tool call whose arguments are not plain JSON keeps its
place in the batch with no arguments and an `arguments_error`, so the model is told
(`invalid_arguments`) and nothing it did not mean is dispatched.
"""

from __future__ import annotations

from ._jsonsafe import MAX_INT, NotJson, clean_text, json_value
from .models.base import ModelReply, TokenUsage, ToolCall


class MalformedReply(Exception):
    """A model adapter returned something the engine cannot act on."""


def _count(value: object, what: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_INT:
        raise MalformedReply(f"{what} is not a token count (an int from 0 to 2**64-1)")
    return value


def _text(value: object, what: str) -> str:
    if type(value) is not str:
        raise MalformedReply(f"{what} is {type(value).__name__}, not a string")
    return clean_text(value)


def _call(call: object, index: int) -> ToolCall:
    if not isinstance(call, ToolCall):
        raise MalformedReply(f"tool call {index} is {type(call).__name__}, not a ToolCall")
    problem = call.arguments_error
    if problem is not None:
        problem = _text(problem, f"tool call {index} arguments_error")
    arguments = call.arguments
    if problem is None:
        if type(arguments) is not dict:
            problem = f"arguments are {type(arguments).__name__}, not an object"
        else:
            try:  # refused, not repaired: never dispatch what the model did not send
                arguments = json_value(arguments, refuse_surrogates=True)
            except NotJson as exc:
                problem = f"arguments are not plain JSON: {exc}"
    return ToolCall(
        id=_text(call.id, f"tool call {index} id"),
        name=_text(call.name, f"tool call {index} name"),
        arguments={} if problem is not None else arguments,
        arguments_error=problem,
    )


def checked_reply(reply: object) -> ModelReply:
    """`reply` as a `ModelReply` the engine can act on, store and replay; or `MalformedReply`."""
    if not isinstance(reply, ModelReply):
        raise MalformedReply(f"the adapter returned {type(reply).__name__}, not a ModelReply")
    usage = reply.usage
    if not isinstance(usage, TokenUsage):
        raise MalformedReply(f"usage is {type(usage).__name__}, not a TokenUsage")
    calls: object = reply.tool_calls
    if not isinstance(calls, tuple | list):
        raise MalformedReply(f"tool_calls is {type(calls).__name__}, not a sequence")
    return ModelReply(
        text=_text(reply.text, "text"),
        tool_calls=tuple(_call(call, index) for index, call in enumerate(calls)),
        usage=usage,  # its counts are untrusted: `models._usage.accounted` checks them next
        stop_reason=_text(reply.stop_reason, "stop_reason"),
    )
