"""Token usage the runner can count: a provider's report is untrusted input.

A count is believed only when it is a plain non-negative integer below `MAX_REPORTED_TOKENS` and
not too few for what was sent or got (`MAX_CHARS_PER_TOKEN`); anything else (missing, negative,
NaN, infinite, a float, a string, a boolean, an absurd size, 0 for a reply with text) is
replaced by the runner's own estimate from what it sent and got, and the usage is marked
`estimated`, so the token budget is always enforced and the record says which numbers are guesses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from .base import ModelReply, TokenUsage, ToolCall
from .scripted import estimate_tokens
from .transcript import render_json

if TYPE_CHECKING:
    from .transcript import Transcript

MAX_REPORTED_TOKENS: Final = 10**9
"""No single request uses a billion tokens; a larger count is not believed (and keeps every sum
far inside a 64-bit store column)."""


MAX_CHARS_PER_TOKEN: Final = 64
"""No tokenizer packs more characters than this into each token of a whole reply (about four is
usual): a count lower than a reply's text could have is not believed, nor 0 for a reply that
carries a call, nor 0 input tokens for a request that sent a transcript. A provider reporting
0/0 for a 50,000-character reply went past both the token and the money cap."""


def counted(value: object) -> int | None:
    """`value` as a token count if it can be believed, else None."""
    if type(value) is int and 0 <= value < MAX_REPORTED_TOKENS:
        return value
    return None


def reply_chars(text: str, calls: Sequence[ToolCall]) -> int:
    """The characters a reply carries: its text and each call's name and arguments."""
    return len(text) + sum(len(call.name) + len(render_json(call.arguments)) for call in calls)


def checked_usage(
    raw_input: object,
    raw_output: object,
    *,
    transcript: Transcript,
    text: str,
    calls: Sequence[ToolCall],
) -> TokenUsage:
    """The provider's counts where believable; the estimate for each one that is not."""
    tokens_in, tokens_out = counted(raw_input), counted(raw_output)
    if tokens_in == 0 and transcript.chars:
        tokens_in = None
    if tokens_out is not None and not _could_carry(tokens_out, text, calls):
        tokens_out = None
    if tokens_in is not None and tokens_out is not None:
        return TokenUsage(input_tokens=tokens_in, output_tokens=tokens_out)
    return TokenUsage(
        input_tokens=tokens_in if tokens_in is not None else estimate_tokens(transcript.chars),
        output_tokens=(
            tokens_out if tokens_out is not None else estimate_tokens(reply_chars(text, calls))
        ),
        estimated=True,
    )


def _could_carry(tokens: int, text: str, calls: Sequence[ToolCall]) -> bool:
    """Whether `tokens` output tokens could carry `text` and `calls` (a lower bound only: a
    call's arguments are not rendered to count them, on every step)."""
    return tokens * MAX_CHARS_PER_TOKEN >= len(text) and (tokens > 0 or not calls)


def accounted(reply: ModelReply, transcript: Transcript) -> ModelReply:
    """`reply` with usage the runner can count, whichever adapter built it."""
    usage = reply.usage
    if (  # believable counts, not an estimate: the reply as it is (the usual case)
        type(usage) is TokenUsage
        and usage.estimated is False
        and counted(usage.input_tokens) is not None
        and counted(usage.output_tokens) is not None
        and (usage.input_tokens > 0 or not transcript.chars)
        and _could_carry(usage.output_tokens, reply.text, reply.tool_calls)
    ):
        return reply
    checked = checked_usage(
        usage.input_tokens,
        usage.output_tokens,
        transcript=transcript,
        text=reply.text,
        calls=reply.tool_calls,
    )
    if checked.estimated or usage.estimated is not False:
        checked = dataclasses.replace(checked, estimated=True)
    return reply if checked == usage else dataclasses.replace(reply, usage=checked)
