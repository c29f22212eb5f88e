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
latency. An input the other budget would have cut (its recorded latency reaches the call's timeout
or the time left) is replaced by what the cut produces, a timeout, as the live effects would; a
recorded timeout that the other budget would have waited past is not an answer the recording has.
What the recording cannot answer stops the replay, except the final tool-free request after a
bound, whose text cannot change the outcome and is stood in for.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

from ._cancel import Cancellation, abandonable
from ._jsonsafe import NotJson, json_value, safe_str
from ._replies import checked_reply
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
    MalformedOutput,
    Raised,
    Recorded,
    RecordedOutput,
    RecordedTurn,
    ReplayedError,
    ResponseLost,
    raw_outcome,
    rebuild_outcome,
)
from .redaction import Redactor
from .tools import ToolImplementation, ToolInvocation, ToolResponse
from .transcript import Transcript

FAILED_PREFIX = "failed:"
STAND_IN_ANSWER = "[the final answer is not in the recording]"
TIMEOUT_FAILURE = f"{FAILED_PREFIX}TimeoutError"
CUT_SLACK_S = 1e-6
"""Recorded times are sums of float steps: a latency this close to a timeout reaches it."""


def _cut(latency: float, timeout: float | None) -> bool | None:
    """Whether a call that took `latency` would have been cut by `timeout`; None when the two
    are too close to tell (within `CUT_SLACK_S`: recorded times carry float noise, and which of
    two timers due at once fires first is not something to predict). A call that took no time
    is never cut by a timeout still to come."""
    if timeout is None or latency <= 0 < timeout:
        return False
    if abs(latency - timeout) <= CUT_SLACK_S:
        return None
    return latency > timeout


def _waited_past(
    started_at: float, ended_at: float, timeout: float | None, deadline: float | None
) -> bool:
    """Whether a recorded timeout was the recorded deadline's cut (it ended at that deadline;
    None: it may have been) and `timeout` would have waited longer: the call would still have
    been waiting, for an answer nobody recorded. A timeout of the tool's or adapter's own, or of
    the contract, comes again at the same latency."""
    cut_by_deadline = deadline is None or ended_at >= deadline - CUT_SLACK_S
    waits_longer = timeout is None or ended_at - started_at < timeout - CUT_SLACK_S
    return cut_by_deadline and waits_longer


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

    def answered_at(self) -> float:
        """When the last model request ended, in seconds from the run's start: what a replay's
        clock reads at that point too, so a wait derived from it (a Retry-After date) replays."""
        ...


class LiveEffects:
    """Calls the model and tools for real and records each reply and outcome."""

    def __init__(
        self,
        run_id: str,
        model: ModelAdapter,
        clock: Clock,
        started: float,
        redactor: Redactor | None = None,
    ) -> None:
        self.run_id = run_id
        self.model = model
        self.clock = clock
        self.started = started
        self.recorded: list[Recorded] = []
        self.redactor = redactor or Redactor(())
        """Takes the runtime's credentials out of every input before it is acted on or kept."""
        self.run_task = _current_task()
        """The task driving the run: only its cancellation propagates out of a tool or model."""
        self.cancellation: Cancellation | None = None
        """The run's handle's cancel request (runs started with `Engine.start`)."""
        self.last_answer = 0.0

    def drain(self) -> list[Recorded]:
        drained, self.recorded = self.recorded, []
        return drained

    def since_start(self) -> float:
        return self.clock.monotonic() - self.started

    def answered_at(self) -> float:
        return self.last_answer

    async def ask(
        self,
        ordinal: int,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        choice: ToolChoice,
        timeout: float | None,
    ) -> ModelReply:
        asked_at, digest = self.since_start(), transcript.digest
        if self.cancellation is not None:
            self.cancellation.check()  # cancelled before the request: never send it
        try:
            with self.clock.real_io(), abandonable(self.cancellation):
                request = self.model.generate(transcript, tools, choice)
                answer = await (within(timeout, request) if timeout is not None else request)
            reply = checked_reply(answer)  # before it is recorded: a replay gets the same reply
        except RunFailure:
            raise
        except BaseException as exc:
            if _run_cancelled(exc, self.run_task):
                raise
            kind = "TimeoutError" if isinstance(exc, TimeoutError) else safe_str(type(exc).__name__)
            failed = ModelReply(
                text=self.redactor.text(safe_str(exc)),
                tool_calls=(),
                usage=TokenUsage(input_tokens=0, output_tokens=0),
                stop_reason=f"{FAILED_PREFIX}{kind}",
            )
            self._record_turn(ordinal, choice, failed, asked_at, digest, error=exc)
            if isinstance(exc, Exception):
                redacted = self.redactor.model_error(exc)
                if redacted is exc:
                    raise
                raise redacted from None  # the original's message holds a credential
            # SystemExit, KeyboardInterrupt... raised by the adapter, not the user: a model error
            raise ReplayedError(kind, failed.text) from exc
        reply = self.redactor.reply(accounted(reply, transcript))  # usage is untrusted, too
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
        error: BaseException | None = None,
    ) -> None:
        state = _model_state(self.model)
        turn = RecordedTurn.of(
            run_id=self.run_id,
            ordinal=ordinal,
            tool_choice=choice,
            reply=reply,
            started_at=asked_at,
            ended_at=self.since_start(),
            transcript_digest=digest,
            model_state=self.redactor.value(state) if state is not None else None,
        )
        if isinstance(error, ModelUnavailable | ModelRejected):
            status, retry_after = error.status, getattr(error, "retry_after", None)
            turn = dataclasses.replace(  # what the adapter set, if it is what the fields hold
                turn,
                error_status=status if type(status) is int and abs(status) < 2**31 else None,
                retry_after=safe_str(retry_after) if isinstance(retry_after, str) else None,
            )
        self.last_answer = turn.ended_at
        self.recorded.append(turn)

    async def call(
        self, ordinal: int, invocation: ToolInvocation, implementation: ToolImplementation
    ) -> ToolResponse | BaseException:
        started = self.since_start()
        outcome: ToolResponse | BaseException
        try:
            outcome = _plain(await within(invocation.timeout_s, implementation(invocation)))
        except RunFailure:
            raise
        except BaseException as exc:  # whatever a tool raises is its outcome...
            if _run_cancelled(exc, self.run_task):  # ...but the run's own cancellation
                raise
            outcome = exc
        outcome = self.redactor.outcome(outcome)
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


def _model_state(model: object) -> dict[str, Any] | None:
    """A resumable adapter's snapshot, if it has one that is a plain JSON object."""
    snapshot = getattr(model, "snapshot", None)
    if not callable(snapshot):
        return None
    try:
        state = json_value(snapshot())
    except Exception:  # an adapter that cannot say where it stands: its turns record no state
        return None
    return state if isinstance(state, dict) else None


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # built outside a running loop
        return None


def _run_cancelled(exc: BaseException, run_task: asyncio.Task[Any] | None) -> bool:
    """Whether `exc` is the run being cancelled (which must propagate), rather than a
    `CancelledError` a tool or adapter raised, or a tool cancelling its own task in a batch."""
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = run_task or _current_task()
    return task is None or task.cancelling() > 0


def _plain(answer: object) -> ToolResponse | MalformedOutput:
    """The tool's answer as a `ToolResponse` of plain JSON, or why it is not one."""
    if not isinstance(answer, ToolResponse):
        return MalformedOutput(f"the tool returned {type(answer).__name__}, not a ToolResponse")
    retry_after = answer.retry_after
    if retry_after is not None and type(retry_after) is not str:
        return MalformedOutput(f"retry_after is {type(retry_after).__name__}, not a string")
    try:
        payload = json_value(answer.payload)
    except NotJson as exc:
        return MalformedOutput(f"the payload is not plain JSON: {exc}")
    return ToolResponse(
        payload=payload, retry_after=None if retry_after is None else safe_str(retry_after)
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
        recorded_seconds: float | None = None,
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
        self.recorded_seconds = recorded_seconds
        """The recorded run's deadline, in seconds from its start (None: not known)."""
        self.stood_in = False
        """Whether a final answer had to be stood in for (counterfactual replays only)."""
        self._restored = False
        self._asked = 0
        self.served: set[int] = set()
        """Dispatch ordinals answered from the recording."""
        self._live_answer = False

    def unserved(self) -> list[str]:
        """Recorded inputs an exact re-drive never asked for (a recording with extra inputs)."""
        turns = [f"model turn {n}" for n in sorted(self.turns) if n > self._asked]
        outputs = [f"tool output {n}" for n in sorted(self.outputs) if n not in self.served]
        return turns + outputs

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
        if self.counterfactual and turn is not None:
            latency = turn.ended_at - turn.started_at
            cut = _cut(latency, timeout) if turn.tool_choice == choice else False
            if cut is None and turn.stop_reason == TIMEOUT_FAILURE:
                cut = True  # a recorded timeout at the timeout: cut or not, the same timeout
            if turn.transcript_digest != transcript.digest or cut is None:
                turn = None  # the model would have seen something else (or the reply might
                # have come too late): what it would have answered is unknown
            elif cut:
                assert timeout is not None
                await self.clock.sleep(timeout)  # the reply would have come too late
                raise TimeoutError()
            elif turn.stop_reason == TIMEOUT_FAILURE and _waited_past(
                turn.started_at, turn.ended_at, timeout, self.recorded_seconds
            ):
                turn = None  # with more time the request might have been answered
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
            self._live_answer = True
            return await live.ask(ordinal, transcript, tools, choice, timeout)
        self._live_answer = False
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

    def answered_at(self) -> float:
        if self._live_answer and self.live is not None:
            return self.live.answered_at()
        return self.clock.monotonic() - self.started  # a served reply ends when the clock says

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
        if not self.counterfactual and output.operation_key != invocation.operation_key:
            raise ReplayDivergence(
                f"dispatch {ordinal}",
                f"operation_key={output.operation_key!r}",
                f"operation_key={invocation.operation_key!r}",
            )
        self.served.add(ordinal)
        if self.counterfactual:
            latency, timeout = output.ended_at - output.started_at, invocation.timeout_s
            cut = _cut(latency, timeout)
            timed_out = isinstance(output.outcome, Raised) and output.outcome.type == "TimeoutError"
            if cut is None and timed_out:
                cut = True  # a recorded timeout at the timeout: cut or not, the same timeout
            if cut is None:
                raise OutsideRecording(
                    f"tool call {ordinal} ({invocation.tool} {invocation.call_id}): it took "
                    f"{latency:g} s against a {timeout:g} s timeout: too close to tell"
                )
            if cut:
                await self.clock.sleep(timeout)  # the live runner's timeout ends the call here
                return TimeoutError()
            if timed_out and _waited_past(
                output.started_at, output.ended_at, timeout, self.recorded_seconds
            ):
                raise OutsideRecording(
                    f"tool call {ordinal} ({invocation.tool} {invocation.call_id}) given "
                    f"{timeout:g} s; the recording timed out after {latency:g} s"
                )
        await self._serve_at(output.started_at, output.ended_at)
        return rebuild_outcome(output.outcome)
