"""Where the engine meets the outside world: model requests and tool dispatches.

The engine decides; an `Effects` object performs. `LiveEffects` calls the real model and tools and
records every reply and outcome before the engine acts on it. `ReplayEffects` serves a recording
instead, on a clock that replays the recorded times, and past its end either stops
(`OutsideRecording`, for replay) or hands over to live effects (for resuming a killed run). A write
that was in flight when the runner died is answered `ResponseLost`, which the engine reconciles
before anything else.

Replays come in two kinds. An exact replay (and a resume) must ask for the same things in the same
order: inputs are served by position and at their recorded times. A counterfactual replay (another
policy or budget) may ask differently: a tool outcome is served to the same call (by call id and
try), and a model reply only for the same transcript (by its digest), each with its recorded
latency. What the recording cannot answer stops the replay, except the final tool-free request
after a bound, whose text cannot change the outcome and is stood in for.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Protocol

from .clock import Clock, within
from .errors import OutsideRecording, ReplayDivergence, RunFailure
from .models._usage import accounted
from .models.base import (
    ModelAdapter,
    ModelRejected,
    ModelReply,
    ModelUnavailable,
    TokenUsage,
    ToolChoice,
    ToolSpec,
)
from .recording import (
    Recorded,
    RecordedOutput,
    RecordedTurn,
    ReplayedError,
    ResponseLost,
    raw_outcome,
    rebuild_outcome,
)
from .tools import ToolImplementation, ToolInvocation, ToolResponse
from .transcript import Transcript

FAILED_PREFIX = "failed:"
STAND_IN_ANSWER = "[the final answer is not in the recording]"


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

    def drain(self) -> list[Recorded]:
        """The inputs taken in since the last call, to be stored with the next transition."""
        ...

    def use_fallback(self) -> bool:
        """Switch to the model's same-family fallback; False when there is none."""
        ...


class LiveEffects:
    """Calls the model and tools for real and records each reply and outcome."""

    def __init__(self, run_id: str, model: ModelAdapter, clock: Clock, started: float) -> None:
        self.run_id = run_id
        self.model = model
        self.clock = clock
        self.started = started
        self.recorded: list[Recorded] = []

    def drain(self) -> list[Recorded]:
        drained, self.recorded = self.recorded, []
        return drained

    def since_start(self) -> float:
        return self.clock.monotonic() - self.started

    async def ask(
        self,
        ordinal: int,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        choice: ToolChoice,
        timeout: float | None,
    ) -> ModelReply:
        asked_at, digest = self.since_start(), transcript.digest
        request = self.model.generate(transcript, tools, choice)
        try:
            with self.clock.real_io():
                reply = await (within(timeout, request) if timeout is not None else request)
        except RunFailure:
            raise
        except Exception as exc:
            kind = "TimeoutError" if isinstance(exc, TimeoutError) else type(exc).__name__
            failed = ModelReply(
                text=str(exc),
                tool_calls=(),
                usage=TokenUsage(input_tokens=0, output_tokens=0),
                stop_reason=f"{FAILED_PREFIX}{kind}",
            )
            self._record_turn(ordinal, choice, failed, asked_at, digest, error=exc)
            raise
        reply = accounted(reply, transcript)  # usage is untrusted, whichever adapter sent it
        self._record_turn(ordinal, choice, reply, asked_at, digest)
        return reply

    def use_fallback(self) -> bool:
        """Switch to the adapter's fallback model, if it has one."""
        fallback = getattr(self.model, "fallback", None)
        if fallback is None:
            return False
        self.model = fallback
        return True

    def _record_turn(
        self,
        ordinal: int,
        choice: str,
        reply: ModelReply,
        asked_at: float,
        digest: str,
        *,
        error: Exception | None = None,
    ) -> None:
        snapshot = getattr(self.model, "snapshot", None)
        turn = RecordedTurn.of(
            run_id=self.run_id,
            ordinal=ordinal,
            tool_choice=choice,
            reply=reply,
            started_at=asked_at,
            ended_at=self.since_start(),
            transcript_digest=digest,
            model_state=snapshot() if callable(snapshot) else None,
        )
        if isinstance(error, ModelUnavailable | ModelRejected):
            turn = dataclasses.replace(
                turn,
                error_status=error.status,
                retry_after=getattr(error, "retry_after", None),
            )
        self.recorded.append(turn)

    async def call(
        self, ordinal: int, invocation: ToolInvocation, implementation: ToolImplementation
    ) -> ToolResponse | BaseException:
        started = self.since_start()
        try:
            outcome: ToolResponse | BaseException = await within(
                invocation.timeout_s, implementation(invocation)
            )
        except RunFailure:
            raise
        except Exception as exc:
            outcome = exc
        self.record(ordinal, invocation, outcome, started)
        return outcome

    def record(
        self,
        ordinal: int,
        invocation: ToolInvocation,
        outcome: ToolResponse | BaseException,
        started: float,
    ) -> None:
        self.recorded.append(
            RecordedOutput(
                run_id=self.run_id,
                ordinal=ordinal,
                call_id=invocation.call_id,
                tool=invocation.tool,
                operation_key=invocation.operation_key,
                outcome=raw_outcome(outcome),
                started_at=started,
                ended_at=self.since_start(),
            )
        )


class ReplayEffects:
    """Serves a recording; past its end, hands over to `live` or stops."""

    def __init__(
        self,
        turns: Sequence[RecordedTurn],
        outputs: Sequence[RecordedOutput],
        clock: Clock,
        started: float,
        *,
        live: LiveEffects | None = None,
        in_flight: set[int] | None = None,
        counterfactual: bool = False,
    ) -> None:
        self.turns = {turn.ordinal: turn for turn in turns}
        self.outputs = {output.ordinal: output for output in outputs}
        self.by_call: dict[tuple[str, int], RecordedOutput] = {}
        tries: Counter[str] = Counter()
        for output in sorted(outputs, key=lambda o: o.ordinal):
            tries[output.call_id] += 1
            self.by_call[(output.call_id, tries[output.call_id])] = output
        self.tries: defaultdict[str, int] = defaultdict(int)
        self.clock = clock
        self.started = started
        self.live = live
        self.in_flight = in_flight or set()
        """Dispatch ordinals of writes whose intent was recorded but whose outcome was not."""
        self.counterfactual = counterfactual
        self.stood_in = False
        """Whether a final answer had to be stood in for (counterfactual replays only)."""
        self._restored = False
        self._asked = 0

    def drain(self) -> list[Recorded]:
        return self.live.drain() if self.live is not None else []

    async def _serve_at(self, started_at: float, ended_at: float) -> None:
        """Let the recorded time pass: until the recorded end, or for the recorded latency."""
        now = self.clock.monotonic() - self.started
        wait = ended_at - started_at if self.counterfactual else ended_at - now
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
        self._asked = ordinal
        turn = self.turns.get(ordinal)
        if self.counterfactual and turn is not None and turn.transcript_digest != transcript.digest:
            turn = None  # the model would have seen something else: its reply is unknown
        if turn is None:
            if self.counterfactual and choice == "none":
                self.stood_in = True
                return ModelReply(
                    text=STAND_IN_ANSWER,
                    tool_calls=(),
                    usage=TokenUsage(input_tokens=0, output_tokens=0),
                    stop_reason="stand_in",
                )
            live = self._hand_over(f"model request {ordinal}")
            return await live.ask(ordinal, transcript, tools, choice, timeout)
        if turn.tool_choice != choice:
            raise ReplayDivergence(
                f"model request {ordinal}", f"tool_choice {turn.tool_choice}", choice
            )
        if not self.counterfactual and turn.transcript_digest != transcript.digest:
            raise ReplayDivergence(
                f"model request {ordinal}", "the recorded transcript", "a different transcript"
            )
        await self._serve_at(turn.started_at, turn.ended_at)
        if turn.stop_reason.startswith(FAILED_PREFIX):
            kind = turn.stop_reason.removeprefix(FAILED_PREFIX)
            if kind == "TimeoutError":
                raise TimeoutError(turn.text)
            if kind == "ModelUnavailable":
                raise ModelUnavailable(
                    turn.text, status=turn.error_status, retry_after=turn.retry_after
                )
            if kind == "ModelRejected":
                raise ModelRejected(turn.text, status=turn.error_status)
            raise ReplayedError(kind, turn.text)
        return turn.reply()

    def use_fallback(self) -> bool:
        """The recording switched models if it went on asking; past it, ask the live adapter."""
        if self.turns and max(self.turns) > self._asked:
            return True
        return self.live.use_fallback() if self.live is not None else False

    async def call(
        self, ordinal: int, invocation: ToolInvocation, implementation: ToolImplementation
    ) -> ToolResponse | BaseException:
        if self.counterfactual:
            self.tries[invocation.call_id] += 1
            output = self.by_call.get((invocation.call_id, self.tries[invocation.call_id]))
        else:
            output = self.outputs.get(ordinal)
        if output is None:
            what = f"tool call {ordinal} ({invocation.tool} {invocation.call_id})"
            live = self._hand_over(what)
            if ordinal in self.in_flight:
                # The runner died with this write in flight: nobody saw its response.
                self.in_flight.discard(ordinal)
                lost = ResponseLost("the runner stopped before this write's response was recorded")
                live.record(ordinal, invocation, lost, live.since_start())
                return lost
            return await live.call(ordinal, invocation, implementation)
        if (output.tool, output.call_id) != (invocation.tool, invocation.call_id):
            raise ReplayDivergence(
                f"dispatch {ordinal}",
                f"{output.tool} {output.call_id}",
                f"{invocation.tool} {invocation.call_id}",
            )
        await self._serve_at(output.started_at, output.ended_at)
        return rebuild_outcome(output.outcome)
