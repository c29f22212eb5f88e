"""What the engine accepts from any model adapter: a `ModelReply` it can act on, store and replay.

An adapter is foreign code. Its reply is checked once, before it is recorded: a reply whose shape
is wrong (not a `ModelReply`, text that is not a string, token counts that are not counts) raises
`MalformedReply`, which ends the run like any other model failure (`model_error`). Lone
surrogates in its text are replaced. A tool call whose arguments are not plain JSON keeps its
place in the batch with no arguments and an `arguments_error`, so the model is told
(`invalid_arguments`) and nothing it did not mean is dispatched.
"""

from __future__ import annotations

import operator

from ..base._jsonsafe import MAX_INT, NotJson, clean_text, json_value
from .base import ModelReply, TokenUsage, ToolCall


class MalformedReply(Exception):
    """A model adapter returned something the engine cannot act on."""


def _count(value: object, what: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_INT:
        raise MalformedReply(f"{what} is not a token count (an int from 0 to 2**64-1)")
    return value


def _text(value: object, what: str, index: int | None = None) -> str:
    """`value` if it is a string (lone surrogates replaced); `what` names it (with `index`,
    a field of that tool call: named only when it is wrong, not on every call)."""
    if type(value) is not str:
        where = what if index is None else f"tool call {index} {what}"
        raise MalformedReply(f"{where} is {type(value).__name__}, not a string")
    return value if value.isascii() else clean_text(value)  # ASCII holds no lone surrogate


def _call(call: object, index: int) -> ToolCall:
    if not isinstance(call, ToolCall):
        raise MalformedReply(f"tool call {index} is {type(call).__name__}, not a ToolCall")
    problem = call.arguments_error
    if problem is not None:
        problem = _text(problem, "arguments_error", index)
    arguments = call.arguments
    if problem is None:
        if type(arguments) is not dict:
            problem = f"arguments are {type(arguments).__name__}, not an object"
        else:
            try:  # refused, not repaired: never dispatch what the model did not send
                arguments = json_value(arguments, refuse_surrogates=True)
            except NotJson as exc:
                problem = f"arguments are not plain JSON: {exc}"
    call_id = _text(call.id, "id", index)
    name = _text(call.name, "name", index)
    if problem is None:
        if (
            type(call) is ToolCall
            and arguments is call.arguments
            and call_id is call.id
            and name is call.name
        ):
            return call  # plain already (frozen): nothing to rebuild
        return ToolCall(id=call_id, name=name, arguments=arguments)
    return ToolCall(id=call_id, name=name, arguments={}, arguments_error=problem)


def checked_reply(reply: object) -> ModelReply:
    """`reply` as a `ModelReply` the engine can act on, store and replay; or `MalformedReply`."""
    if not isinstance(reply, ModelReply):
        raise MalformedReply(f"the adapter returned {type(reply).__name__}, not a ModelReply")
    usage = reply.usage
    if not isinstance(usage, TokenUsage):
        raise MalformedReply(f"usage is {type(usage).__name__}, not a TokenUsage")
    calls: object = reply.tool_calls
    if not isinstance(calls, (tuple, list)):
        raise MalformedReply(f"tool_calls is {type(calls).__name__}, not a sequence")
    text = _text(reply.text, "text")
    checked = tuple([_call(call, index) for index, call in enumerate(calls)])
    stop_reason = _text(reply.stop_reason, "stop_reason")
    if (
        type(reply) is ModelReply
        and text is reply.text
        and stop_reason is reply.stop_reason
        and type(calls) is tuple
        and all(map(operator.is_, checked, calls))
    ):
        return reply  # plain already (frozen): nothing to rebuild
    return ModelReply(
        text=text,
        tool_calls=checked,
        usage=usage,  # its counts are untrusted: `models._usage.accounted` checks them next
        stop_reason=stop_reason,
    )
