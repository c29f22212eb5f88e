"""Serving a recording in place of the live model and tools: exact replay, resume, counterfactuals.

An exact replay (and a resume) must ask for the same things in the same order: inputs are served by
position and at their recorded times. A counterfactual replay (another policy or budget) may ask
differently: a tool outcome is served to the same call (by call id and try), and a model reply only
for the same transcript (by its digest), each with its recorded latency. An input the other budget
would have cut (its recorded latency reaches the call's timeout or the time left) is replaced by
what the cut produces, a timeout, as the live effects would; a recorded timeout that the other
budget would have waited past is not an answer the recording has. A recorded reply longer than
the other budget's output limit is cut there, as the live model would have been (stop reason
`max_tokens`, its text stood in for: where it would have stopped is not recorded). What the
recording cannot answer stops the replay, except the final tool-free request after a bound, whose
text cannot change the outcome and is stood in for.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Sequence

from ..base.clock import Clock
from ..base.errors import OutsideRecording, ReplayDivergence
from ..core.machine import Trigger
from ..models.base import (
    ModelRejected,
    ModelReply,
    ModelUnavailable,
    TokenUsage,
    ToolChoice,
    ToolSpec,
)
from ..models.transcript import Transcript
from ..record.recording import (
    Raised,
    Recorded,
    RecordedOutput,
    RecordedTurn,
    rebuild_outcome,
)
from ..record.trace import TransitionRecord
from ..tools._outcomes import ReplayedError, ResponseLost
from ..tools.invocation import ToolImplementation, ToolInvocation, ToolResponse
from .effects import FAILED_PREFIX, LiveEffects

STAND_IN_ANSWER = "[the final answer is not in the recording]"
TIMEOUT_FAILURE = f"{FAILED_PREFIX}TimeoutError"
CUT_SLACK_S = 1e-6
"""Recorded times are sums of float steps: a latency this close to a timeout reaches it."""


def _cut_shorter(turn: RecordedTurn, limit: int | None) -> bool:
    """Whether the recorded reply was cut off at the limit its request was sent, and the other
    budget's limit is larger: what the model would have said past the cut is not recorded."""
    sent = turn.max_output_tokens
    return (
        sent is not None
        and turn.stop_reason == "max_tokens"
        and turn.output_tokens >= sent
        and (limit is None or limit > sent)
    )


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


def recorded_horizon(
    turns: Sequence[RecordedTurn],
    outputs: Sequence[RecordedOutput],
    known: Sequence[TransitionRecord] = (),
) -> float:
    """The latest time, in seconds from the run's start, that a recording shows the run reached:
    the greatest end of its inputs, or the end of a retry's wait the log stores after them.

    A retry's wait is slept before its move is stored, so a log that ends in retries (the crash
    came before the retried call answered) shows that time too: the retried call's latest
    output's end plus the wait. Anything later (a wait the crash interrupted, the run's own time
    after its last input) is not recorded: a re-drive lives it again.
    """
    ends = [turn.ended_at for turn in turns] + [output.ended_at for output in outputs]
    horizon = max(ends, default=0.0)
    trailing = len(known)
    while trailing and known[trailing - 1].trigger == Trigger.RETRY:
        trailing -= 1
    for record in known[trailing:]:
        tried = [output.ended_at for output in outputs if output.call_id == record.call_id]
        if tried and record.wait_s is not None:
            horizon = max(horizon, max(tried) + record.wait_s)
    return horizon


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
        record_as: str | None = None,
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
        self.limit_sent: int | None = None
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
        self.record_as = record_as
        """A continuation's run id: every input served is recorded again under it, so the
        continuation's own recording is whole (it re-drives another run's inputs)."""
        self._served_inputs: list[Recorded] = []
        self._ended: dict[int, float] = {}
        """Each served dispatch's recorded end until `output_ended` takes it."""

    def unserved(self) -> list[str]:
        """Recorded inputs an exact re-drive never asked for (a recording with extra inputs)."""
        turns = [f"model turn {n}" for n in sorted(self.turns) if n > self._asked]
        outputs = [f"tool output {n}" for n in sorted(self.outputs) if n not in self.served]
        return turns + outputs

    def drain(self) -> list[Recorded]:
        served, self._served_inputs = self._served_inputs, []
        return served + (self.live.drain() if self.live is not None else [])

    def _served(self, item: RecordedTurn | RecordedOutput) -> None:
        if self.record_as is not None and item.run_id != self.record_as:  # not its own already
            self._served_inputs.append(dataclasses.replace(item, run_id=self.record_as))

    async def _serve_at(self, started_at: float, ended_at: float) -> None:
        """Let the recorded time pass: until the recorded end, or for the recorded latency (a
        resume on a real clock waits on `clock.CatchUp`, where this recorded time takes none)."""
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
        *,
        max_output_tokens: int | None = None,
    ) -> ModelReply:
        self._asked = ordinal
        self.limit_sent = None
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
            elif _cut_shorter(turn, max_output_tokens):
                turn = None  # the budget cut the reply; with more room it would have gone on
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
            answer = await live.ask(
                ordinal, transcript, tools, choice, timeout, max_output_tokens=max_output_tokens
            )
            self.limit_sent = live.limit_sent
            return answer
        self._live_answer = False
        if turn.tool_choice != choice:
            raise ReplayDivergence(
                f"model request {ordinal}", f"tool_choice {turn.tool_choice}", choice
            )
        if not self.counterfactual and turn.transcript_digest != transcript.digest:
            raise ReplayDivergence(
                f"model request {ordinal}", "the recorded transcript", "a different transcript"
            )
        recorded_limit = turn.max_output_tokens
        if not self.counterfactual and recorded_limit not in (None, max_output_tokens):
            raise ReplayDivergence(  # the budget left another limit: the run is not as recorded
                f"model request {ordinal}",
                f"output limit {recorded_limit}",
                f"output limit {max_output_tokens}",
            )
        # a counterfactual asks under its own budget's limit (a reply past it is cut below)
        self.limit_sent = max_output_tokens if self.counterfactual else recorded_limit
        await self._serve_at(turn.started_at, turn.ended_at)
        self._served(turn)
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
        reply = turn.reply()
        if (
            self.counterfactual
            and max_output_tokens is not None
            and reply.usage.output_tokens > max_output_tokens
        ):  # the other budget's output limit would have cut it off; where, is not recorded
            self.stood_in = True
            self.limit_sent = max_output_tokens
            usage = dataclasses.replace(reply.usage, output_tokens=max(0, max_output_tokens))
            return ModelReply(
                text=STAND_IN_ANSWER, tool_calls=(), usage=usage, stop_reason="max_tokens"
            )
        return reply

    def output_ended(self, ordinal: int) -> float | None:
        served = self._ended.pop(ordinal, None)
        if served is None and self.live is not None:  # answered live (or lost) past the record
            return self.live.output_ended(ordinal)
        return served

    def answered_at(self) -> float:
        if self._live_answer and self.live is not None:
            return self.live.answered_at()
        served = self.turns.get(self._asked)
        if served is not None and not self.counterfactual:  # as recorded, as the live run read
            return served.ended_at
        return self.clock.monotonic() - self.started  # a counterfactual's: when its clock says

    def use_fallback(self) -> bool:
        """Whether the recorded run switched to its fallback model here: its next request was
        asked of the fallback (as its turn records), or, in a turn recorded before that was, is
        this one asked again (the same transcript: a run that could not switch asked nothing
        more, or made its final request). Past the recording, the live adapter says; a switch
        the recording shows switches it too, for what is asked past it (a resume goes on with
        the model the run went on with)."""
        asked, following = self.turns.get(self._asked), self.turns.get(self._asked + 1)
        if asked is None or following is None:
            return self.live.use_fallback() if self.live is not None else False
        if not following.fallback and following.transcript_digest != asked.transcript_digest:
            return False
        if self.live is not None:
            self.live.use_fallback()
        return True

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
        if self.live is not None:  # resuming: a tool that keeps its place in a script skips one
            skip = getattr(implementation, "answered_from_record", None)
            if skip is not None:
                skip(invocation)
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
        self._served(output)
        self._ended[ordinal] = output.ended_at
        return rebuild_outcome(output.outcome)
