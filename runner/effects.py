"""Where the engine meets the outside world: model requests and tool dispatches.

The engine decides; an `Effects` object performs. `LiveEffects` calls the real model and tools and
records every reply and outcome before the engine acts on it. `ReplayEffects` serves a recording
instead, on a clock that replays the recorded times, and then either stops (`OutsideRecording`, for
replay) or hands over to live effects (for resuming a killed run). A write that was in flight when
the runner died is answered `ResponseLost`, which the engine reconciles before anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .clock import Clock, within
from .errors import OutsideRecording, ReplayDivergence, RunFailure
from .models.base import ModelAdapter, ModelReply, ToolChoice, ToolSpec
from .recording import (
    RecordedOutput,
    RecordedTurn,
    ReplayedError,
    ResponseLost,
    raw_outcome,
    rebuild_outcome,
)
from .store.base import RunLog
from .tools import ToolImplementation, ToolInvocation, ToolResponse
from .transcript import Transcript


class Effects(Protocol):
    async def ask(
        self,
        ordinal: int,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        choice: ToolChoice,
        timeout: float | None,
    ) -> ModelReply:
        """Model request number `ordinal`; raises `TimeoutError` or the adapter's error."""
        ...

    async def call(
        self, ordinal: int, invocation: ToolInvocation, implementation: ToolImplementation
    ) -> ToolResponse | BaseException:
        """Dispatch number `ordinal` under `invocation.timeout_s`; failures come back as values."""
        ...


def _resumable_state(model: ModelAdapter) -> dict[str, object] | None:
    snapshot = getattr(model, "snapshot", None)
    return snapshot() if callable(snapshot) else None


class LiveEffects:
    """Calls the model and tools for real and records each reply and outcome."""

    def __init__(
        self, run_id: str, model: ModelAdapter, log: RunLog, clock: Clock, started: float
    ) -> None:
        self.run_id = run_id
        self.model = model
        self.log = log
        self.clock = clock
        self.started = started

    def _since_start(self) -> float:
        return self.clock.monotonic() - self.started

    async def ask(
        self,
        ordinal: int,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        choice: ToolChoice,
        timeout: float | None,
    ) -> ModelReply:
        request = self.model.generate(transcript, tools, choice)
        try:
            reply = await (within(timeout, request) if timeout is not None else request)
        except RunFailure:
            raise
        except Exception as exc:
            self.log.record_turn(
                _failed_turn(self.run_id, ordinal, choice, exc, self._since_start())
            )
            raise
        state = _resumable_state(self.model)
        self.log.record_turn(
            RecordedTurn.of(
                run_id=self.run_id,
                ordinal=ordinal,
                tool_choice=choice,
                reply=reply,
                ended_at=self._since_start(),
                model_state=state,
            )
        )
        return reply

    async def call(
        self, ordinal: int, invocation: ToolInvocation, implementation: ToolImplementation
    ) -> ToolResponse | BaseException:
        try:
            outcome: ToolResponse | BaseException = await within(
                invocation.timeout_s, implementation(invocation)
            )
        except RunFailure:
            raise
        except Exception as exc:
            outcome = exc
        self.record(ordinal, invocation, outcome)
        return outcome

    def record(
        self, ordinal: int, invocation: ToolInvocation, outcome: ToolResponse | BaseException
    ) -> None:
        self.log.record_output(
            RecordedOutput(
                run_id=self.run_id,
                ordinal=ordinal,
                call_id=invocation.call_id,
                tool=invocation.tool,
                operation_key=invocation.operation_key,
                outcome=raw_outcome(outcome),
                ended_at=self._since_start(),
            )
        )


_FAILED_PREFIX = "failed:"


def _failed_turn(
    run_id: str, ordinal: int, choice: str, exc: BaseException, ended_at: float
) -> RecordedTurn:
    kind = "TimeoutError" if isinstance(exc, TimeoutError) else type(exc).__name__
    return RecordedTurn(
        run_id=run_id,
        ordinal=ordinal,
        tool_choice=choice,
        text=str(exc),
        tool_calls=[],
        input_tokens=0,
        output_tokens=0,
        stop_reason=f"{_FAILED_PREFIX}{kind}",
        ended_at=ended_at,
    )


class ReplayEffects:
    """Serves a recording in order; past its end, hands over to `live` or stops."""

    def __init__(
        self,
        turns: Sequence[RecordedTurn],
        outputs: Sequence[RecordedOutput],
        clock: Clock,
        started: float,
        *,
        live: LiveEffects | None = None,
        in_flight: set[int] | None = None,
    ) -> None:
        self.turns = {turn.ordinal: turn for turn in turns}
        self.outputs = {output.ordinal: output for output in outputs}
        self.clock = clock
        self.started = started
        self.live = live
        self.in_flight = in_flight or set()
        """Dispatch ordinals of writes whose intent was recorded but whose outcome was not."""
        self._restored = False

    async def _until(self, ended_at: float) -> None:
        wait = self.started + ended_at - self.clock.monotonic()
        if wait > 0:
            await self.clock.sleep(wait)

    def _hand_over(self, what: str) -> LiveEffects:
        if self.live is None:
            raise OutsideRecording(what)
        if not self._restored:  # the live model continues where the recording left it
            self._restored = True
            restore = getattr(self.live.model, "restore", None)
            last = self.turns.get(len(self.turns))
            if callable(restore) and last is not None and last.model_state is not None:
                restore(last.model_state)
        return self.live

    async def ask(
        self,
        ordinal: int,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        choice: ToolChoice,
        timeout: float | None,
    ) -> ModelReply:
        turn = self.turns.get(ordinal)
        if turn is None:
            live = self._hand_over(f"model request {ordinal}")
            return await live.ask(ordinal, transcript, tools, choice, timeout)
        if turn.tool_choice != choice:
            raise ReplayDivergence(
                0,
                f"model request {ordinal} with tool_choice {turn.tool_choice}",
                f"tool_choice {choice}",
            )
        await self._until(turn.ended_at)
        if turn.stop_reason.startswith(_FAILED_PREFIX):
            kind = turn.stop_reason.removeprefix(_FAILED_PREFIX)
            if kind == "TimeoutError":
                raise TimeoutError(turn.text)
            raise ReplayedError(kind, turn.text)
        return turn.reply()

    async def call(
        self, ordinal: int, invocation: ToolInvocation, implementation: ToolImplementation
    ) -> ToolResponse | BaseException:
        output = self.outputs.get(ordinal)
        if output is None:
            live = self._hand_over(f"tool call {ordinal} ({invocation.tool} {invocation.call_id})")
            if ordinal in self.in_flight:
                # The runner died with this write in flight: nobody saw its response.
                self.in_flight.discard(ordinal)
                lost = ResponseLost("the runner stopped before this write's response was recorded")
                live.record(ordinal, invocation, lost)
                return lost
            return await live.call(ordinal, invocation, implementation)
        if (output.tool, output.call_id) != (invocation.tool, invocation.call_id):
            raise ReplayDivergence(
                0,
                f"dispatch {ordinal} of {output.tool} {output.call_id}",
                f"{invocation.tool} {invocation.call_id}",
            )
        await self._until(output.ended_at)
        return rebuild_outcome(output.outcome)
