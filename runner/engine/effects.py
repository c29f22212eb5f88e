"""Where the engine meets the outside world: model requests and tool dispatches.

The engine decides; an `Effects` object performs. `LiveEffects` calls the real model and tools and
records every reply and outcome before the engine acts on it. `ReplayEffects` (`_replay_effects.py`)
serves a recording instead, and past its end either stops (`OutsideRecording`, for replay) or hands
over to live effects (for resuming a killed run). A write that was in flight when the runner died is
answered as lost, which the engine reconciles before anything else.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
from typing import Any, Protocol

from ..base._jsonsafe import MAX_INT, MIN_INT, NotJson, json_value, safe_str
from ..base.clock import Clock, within
from ..base.errors import RunFailure
from ..models._replies import checked_reply
from ..models._usage import accounted
from ..models.base import (
    ModelAdapter,
    ModelRejected,
    ModelReply,
    ModelUnavailable,
    TokenUsage,
    ToolChoice,
    ToolSpec,
)
from ..models.transcript import Transcript
from ..record.recording import (
    Recorded,
    RecordedOutput,
    RecordedTurn,
    raw_outcome,
)
from ..record.redaction import Redactor
from ..tools._outcomes import MalformedOutput, ReplayedError
from ..tools.invocation import ToolImplementation, ToolInvocation, ToolResponse
from ._cancel import Cancellation, RunCancelled, abandonable

FAILED_PREFIX = "failed:"


class Effects(Protocol):
    limit_sent: int | None
    """The output limit the last reply `ask` returned was asked under (None: none, as for an
    adapter that takes none, or a recorded reply from before limits were sent)."""

    async def ask(
        self,
        ordinal: int,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        choice: ToolChoice,
        timeout: float | None,
        *,
        max_output_tokens: int | None = None,
    ) -> ModelReply:
        """Model request number `ordinal`, its output limited to `max_output_tokens` (what the
        run's budget leaves: derived from recorded state, so a replay derives it again); raises
        `TimeoutError` or the adapter's error. Sets `limit_sent`."""
        ...

    async def call(
        self, ordinal: int, invocation: ToolInvocation, implementation: ToolImplementation
    ) -> ToolResponse | BaseException:
        """Dispatch number `ordinal` under `invocation.timeout_s`; failures come back as values."""
        ...

    def drain(self) -> list[Recorded]:
        """The inputs taken in since the last call, to be stored with the next transition (or
        before it, when a batch's later call answers while the run waits on an earlier one)."""
        ...

    def use_fallback(self) -> bool:
        """Switch to the model's same-family fallback; False when there is none."""
        ...

    def answered_at(self) -> float:
        """When the last model request ended, in seconds from the run's start: what a replay's
        clock reads at that point too, so a wait derived from it (a Retry-After date) replays."""
        ...

    def output_ended(self, ordinal: int) -> float | None:
        """When dispatch `ordinal`'s outcome came, in seconds from the run's start, as recorded
        (asked once, after its call returned; None: not recorded): a replay serves it at that
        time too, so a wait derived from it (a Retry-After date) replays to the microsecond."""
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
        self._ended: dict[int, float] = {}
        """Each recorded dispatch's end until `output_ended` takes it (the calls in flight)."""
        self.limit_sent: int | None = None
        self.limited = takes_output_limit(model)
        """Whether the adapter's `generate` takes `max_output_tokens` (one written before the
        runner passed it is asked without it)."""
        self.on_fallback = False
        """Whether `model` is now the adapter's fallback (`use_fallback`): its turns say so."""

    def drain(self) -> list[Recorded]:
        drained, self.recorded = self.recorded, []
        return drained

    def since_start(self) -> float:
        return self.clock.monotonic() - self.started

    def answered_at(self) -> float:
        return self.last_answer

    def output_ended(self, ordinal: int) -> float | None:
        return self._ended.pop(ordinal, None)

    async def ask(
        self,
        ordinal: int,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        choice: ToolChoice,
        timeout: float | None,
        *,
        max_output_tokens: int | None = None,
    ) -> ModelReply:
        asked_at, digest = self.since_start(), transcript.digest
        limit = self.limit_sent = max_output_tokens if self.limited else None
        if self.cancellation is not None:
            self.cancellation.check()  # cancelled before the request: never send it
        try:
            with self.clock.real_io(), abandonable(self.cancellation):
                if self.limited:  # its generate takes the keyword (see takes_output_limit)
                    request = self.model.generate(  # type: ignore[call-arg]
                        transcript, tools, choice, max_output_tokens=limit
                    )
                else:
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
            self._record_turn(ordinal, choice, failed, asked_at, digest, limit=limit, error=exc)
            if isinstance(exc, Exception):
                redacted = self.redactor.model_error(exc)
                if redacted is exc:
                    raise
                raise redacted from None  # the original's message holds a credential
            # SystemExit, KeyboardInterrupt... raised by the adapter, not the user: a model error
            raise ReplayedError(kind, failed.text) from exc
        if self.cancellation is not None and self.cancellation.requested:
            # answered after a cancel its adapter did not honour: abandoned all the same, so
            # nothing it proposes is sent (and, as an abandoned request, it is not recorded)
            raise RunCancelled()
        reply = self.redactor.reply(accounted(reply, transcript))  # usage is untrusted, too
        self._record_turn(ordinal, choice, reply, asked_at, digest, limit=limit)
        return reply

    def use_fallback(self) -> bool:
        """Switch to the adapter's fallback model, if it has one."""
        fallback = getattr(self.model, "fallback", None)
        if fallback is None:
            return False
        self.model = fallback
        self.limited = takes_output_limit(fallback)
        self.on_fallback = True
        return True

    def _record_turn(
        self,
        ordinal: int,
        choice: str,
        reply: ModelReply,
        asked_at: float,
        digest: str,
        *,
        limit: int | None,
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
            max_output_tokens=limit,
            fallback=self.on_fallback,
        )
        if error is not None and isinstance(error, ModelUnavailable | ModelRejected):
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
        self._ended[ordinal] = ended = self.since_start()
        self.recorded.append(
            RecordedOutput(
                run_id=self.run_id,
                ordinal=ordinal,
                call_id=invocation.call_id,
                tool=invocation.tool,
                operation_key=invocation.operation_key,
                outcome=raw_outcome(outcome),
                started_at=started,
                ended_at=ended,
            )
        )


def takes_output_limit(model: object) -> bool:
    """Whether `model.generate` takes the keyword `max_output_tokens` (or any keyword)."""
    generate = getattr(model, "generate", None)
    generate = getattr(generate, "__func__", generate)
    try:
        return _takes_limit_cached(generate)
    except TypeError:  # an unhashable callable
        return _takes_limit(generate)


def _takes_limit(generate: object) -> bool:
    try:
        parameters = inspect.signature(generate).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):  # not callable, or no signature to read
        return False
    named = parameters.get("max_output_tokens")
    if named is not None:
        return named.kind in (named.KEYWORD_ONLY, named.POSITIONAL_OR_KEYWORD)
    return any(p.kind is p.VAR_KEYWORD for p in parameters.values())


# Keyed on the function (a process has a few adapter classes): read once, not every run.
_takes_limit_cached = functools.lru_cache(maxsize=256)(_takes_limit)


def _model_state(model: object) -> dict[str, Any] | None:
    """A resumable adapter's snapshot, if it has one that is a plain JSON object."""
    snapshot = getattr(model, "snapshot", None)
    if not callable(snapshot):
        return None
    try:
        state = snapshot()
        if not _flat_and_plain(state):  # else it is plain JSON as it is
            state = json_value(state)
    except Exception:  # an adapter that cannot say where it stands: its turns record no state
        return None
    return state if isinstance(state, dict) else None


def _flat_and_plain(state: object) -> bool:
    """Whether `state` is a dict of ASCII keys to integers in JSON's range, ASCII strings,
    booleans or None (a cursor, a step count: what a snapshot usually is), so plain JSON as it
    is; `json_value` decides anything else."""
    if type(state) is not dict:
        return False
    for key, value in state.items():
        if type(key) is not str or not key.isascii():
            return False
        kind = type(value)
        if kind is int:
            if not MIN_INT <= value <= MAX_INT:
                return False
        elif not (value is None or kind is bool or (kind is str and value.isascii())):
            return False
    return True


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
    if type(answer) is ToolResponse and payload is answer.payload and retry_after is None:
        return answer  # plain already (frozen): nothing to rebuild
    return ToolResponse(
        payload=payload, retry_after=None if retry_after is None else safe_str(retry_after)
    )
