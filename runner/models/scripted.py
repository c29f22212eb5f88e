"""`ScriptedModel`: plays a fixture's turns, so runs are reproducible without a live model."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .base import ModelReply, TokenUsage, ToolCall, ToolChoice, ToolSpec
from .identity import SCRIPTED
from .pricing import ModelPrice
from .transcript import Transcript, render_json


class ScriptedCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ScriptedUsage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    input: int = Field(ge=0, strict=True)
    output: int = Field(ge=0, strict=True)


class ScriptedTurn(BaseModel):
    """One model reply: tool calls or a final answer; with `when`, only after those classes."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    tool_calls: list[ScriptedCall] | None = None
    final: str | None = None
    when: list[str] | None = None
    """Play this turn only if the previous step's results include one of these classes."""
    usage: ScriptedUsage | None = None

    @model_validator(mode="before")
    @classmethod
    def _when_as_list(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("when"), str):
            return {**data, "when": [data["when"]]}
        return data

    @model_validator(mode="after")
    def _one_kind(self) -> ScriptedTurn:
        if (self.tool_calls is None) == (self.final is None):
            raise ValueError("a turn has exactly one of tool_calls or final")
        if self.tool_calls is not None and not self.tool_calls:
            raise ValueError("tool_calls must not be empty")
        return self

    @functools.cached_property
    def fixed_reply(self) -> ModelReply | None:
        """The reply this turn always plays, built once (the turn is frozen, the reply too): when
        it states its usage and every call its id. None when the reply depends on the run (an id
        from the step, usage estimated from the transcript). Not a field: pydantic's equality,
        dumps and validation ignore it."""
        if self.usage is None or any(call.id is None for call in self.tool_calls or ()):
            return None
        return _turn_reply(self, step=0, transcript=None)  # neither is read: see above

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; one with `update` builds its own fixed reply (pydantic copies `__dict__`,
        where the cached one is kept)."""
        copied = super().model_copy(update=update, deep=deep)
        if update:
            copied.__dict__.pop("fixed_reply", None)
        return copied


# model_construct: these literals need no validating, and validating would build pydantic's
# validators at `import runner` (tests/test_import_cost.py).
SCRIPTED_PRICE = ModelPrice.model_construct(input_usd_per_mtok=3.0, output_usd_per_mtok=15.0)
"""The scripted model's price unless it is given one: a fixture's cost never depends on a
price table (the figures are a mid-range hosted model's)."""


def estimate_tokens(chars: int) -> int:
    """About four characters a token: the estimate used when a turn states no usage."""
    return max(1, (chars + 3) // 4)  # ceil(chars / 4) in integers: exact, and every step


class ScriptedModel:
    """Replies with the script's turns in order.

    A turn with `when` is skipped unless the previous step's results include one of its classes.
    Asked with tools disabled, it answers with the next `final` turn, skipping tool-call turns.
    """

    identity = SCRIPTED
    """Recorded in the run header: a resumed run continues with the script, and only then."""

    def __init__(self, turns: Sequence[ScriptedTurn], *, price: ModelPrice | None = None) -> None:
        self._turns = tuple(turns)
        self.price = price or SCRIPTED_PRICE
        """What its requests cost: a configured price, so a fixture's cost is deterministic."""
        self._cursor = 0
        self._step = 0

    async def generate(
        self,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        tool_choice: ToolChoice,
        *,
        max_output_tokens: int | None = None,
    ) -> ModelReply:
        self._step += 1
        turn = self._next_turn(transcript, final_only=tool_choice == "none")
        if turn is None:
            text = "No scripted answer is left; nothing further can be determined."
            reply = _reply(transcript, text, (), None, "script_exhausted")
        else:
            reply = turn.fixed_reply or _turn_reply(turn, step=self._step, transcript=transcript)
        return within_limit(reply, max_output_tokens)

    def snapshot(self) -> dict[str, Any]:
        """Where the script stands, recorded with each turn so a resumed run continues from it."""
        return {"cursor": self._cursor, "step": self._step}

    def restore(self, state: dict[str, Any]) -> None:
        self._cursor = int(state["cursor"])
        self._step = int(state["step"])

    def _next_turn(self, transcript: Transcript, *, final_only: bool) -> ScriptedTurn | None:
        last: frozenset[str] | None = None  # the previous step's classes, read once if needed
        while self._cursor < len(self._turns):
            turn = self._turns[self._cursor]
            self._cursor += 1
            if final_only and turn.final is None:
                continue
            if turn.when is None:
                return turn
            if last is None:
                last = transcript.last_result_classes()
            if last.intersection(turn.when):
                return turn
        return None


def within_limit(reply: ModelReply, limit: int | None) -> ModelReply:
    """`reply` as a provider told `limit` sends it: as it is when it fits (or no limit was
    sent), else `cut_off` there."""
    if limit is not None and reply.usage.output_tokens > limit:
        return cut_off(reply, limit)
    return reply


def cut_off(reply: ModelReply, limit: int) -> ModelReply:
    """`reply` as a provider sends it when its output limit cuts it off at `limit` tokens: the
    text up to there (about four characters a token), no calls (a cut call is never acted on),
    usage at the limit, stop reason `max_tokens`."""
    usage = TokenUsage(
        input_tokens=reply.usage.input_tokens,
        output_tokens=max(0, limit),
        estimated=reply.usage.estimated,
    )
    text = reply.text[: max(0, limit) * 4]
    return ModelReply(text=text, tool_calls=(), usage=usage, stop_reason="max_tokens")


def _turn_reply(turn: ScriptedTurn, *, step: int, transcript: Transcript | None) -> ModelReply:
    """What `turn` plays at model step `step` (a call without an id is named from it) on
    `transcript` (usage the turn does not state is estimated from it)."""
    if turn.final is not None:
        return _reply(transcript, turn.final, (), turn.usage, "end_turn")
    calls = tuple(
        [
            ToolCall(id=call.id or f"call_{step}_{index}", name=call.name, arguments=call.args)
            for index, call in enumerate(turn.tool_calls or ())
        ]
    )
    return _reply(transcript, "", calls, turn.usage, "tool_use")


def _reply(
    transcript: Transcript | None,
    text: str,
    calls: tuple[ToolCall, ...],
    usage: ScriptedUsage | None,
    stop_reason: str,
) -> ModelReply:
    if usage is None:
        assert transcript is not None, "usage is estimated from the transcript"
        out_chars = len(text) + sum(len(c.name) + len(render_json(c.arguments)) for c in calls)
        tokens = TokenUsage(
            # Budget annotations left out: the estimate must not move with another budget.
            input_tokens=estimate_tokens(transcript.stable_chars),
            output_tokens=estimate_tokens(out_chars),
            estimated=True,
        )
    else:
        tokens = TokenUsage(input_tokens=usage.input, output_tokens=usage.output)
    return ModelReply(text=text, tool_calls=calls, usage=tokens, stop_reason=stop_reason)
