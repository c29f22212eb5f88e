"""What every phase of a run shares: the engine's settings and the one way to make a move.

`move` fires a trigger on the shared machine and records the transition it made (checking it
against the stored one when a run is being re-driven); `carry` carries a verdict's `Move` out,
and is the one way into a terminal state, and the one place a run's `Ending` is set. They are
the only writers of a run's `Moves` (`_state.WRITERS`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from ..base.clock import Clock
from ..base.errors import ReplayDivergence
from ..base.tracing import SpanSink
from ..core.machine import Trigger, fire
from ..core.states import TERMINAL
from ..core.verdicts import Move
from ..record.trace import TransitionRecord
from ._state import RunState, Runtime


class Core:
    """The settings every phase reads, and the one way to make a move; `Engine` (engine.py)
    builds one and hands it to the phases (`_planning.plan`, `_acting.call`, `_acting.observe`).
    """

    __slots__ = ("clock", "render_limit", "runtime", "spans")

    def __init__(self, runtime: Runtime, *, render_limit: int, spans: tuple[SpanSink, ...]) -> None:
        self.runtime = runtime
        self.clock: Clock = runtime.clock
        """The runtime's (a frozen `Runtime`): kept, not a property. Wall stamps only: a run
        reads monotonic time and waits on its own clock (`RunState.clock`)."""
        self.render_limit = render_limit
        """The most characters of one tool result the model is shown."""
        self.spans = spans

    def move(self, run: RunState, trigger: Trigger, **fields: Any) -> None:
        """Fire `trigger` on the machine and record the transition it made."""
        moves, setup = run.moves, run.setup
        records = moves.records
        source = moves.lifecycle.current
        dest = fire(moves.lifecycle, trigger)
        assert dest not in TERMINAL or moves.ending is not None, "a run ends through Core.carry"
        seq = len(records) + 1
        runtime = self.runtime
        record = TransitionRecord(
            run_id=setup.run_id,
            seq=seq,
            time=self.clock.now(),
            from_state=source,
            to_state=dest,
            trigger=trigger,
            attempt=run.spending.usage.attempts,
            **fields,
        )
        records.append(record)
        known = setup.known
        if seq <= len(known):  # re-driving a stored run: it must say the same
            stored = known[seq - 1]
            differing = differing_fields(stored, record)
            if differing:
                raise ReplayDivergence(
                    f"seq {seq}", brief(stored, differing), brief(record, differing)
                )
        else:
            runtime.store.append(record, setup.effects.drain())
        if not setup.logging:
            return
        setup.log.info(
            "transition",
            seq=record.seq,
            state=source,
            to=record.to_state,
            trigger=record.trigger,
            tool=record.tool,
            call_id=record.call_id,
            result_class=record.result_class,
            attempt=record.attempt,
            decision=record.decision,
            latency_ms=record.latency_ms,
            operation_key=record.operation_key,
            reason=record.reason,
        )

    def carry(self, run: RunState, verdict: Move, **fields: Any) -> None:
        """Carry out a verdict's move, recording what it says; one with an ending ends the run,
        recording the ending's reason as the move's."""
        reason = verdict.reason
        ending = verdict.ending
        if ending is not None:
            assert run.moves.ending is None, "a run ends once"
            run.moves.ending = ending
            reason = ending.reason
        self.move(
            run,
            verdict.trigger,
            decision=verdict.decision,
            result_class=verdict.result_class,
            reason=reason,
            operation_key=verdict.operation_key,
            **fields,
        )

    def ms_since(self, run: RunState, started: float) -> float:
        return round((run.clock.monotonic() - started) * 1000, 3)


_TIMING: Final = frozenset({"time", "latency_ms"})
_FIELDS: Final = tuple(field.name for field in dataclasses.fields(TransitionRecord))
_MEANT_OTHERWISE_IN_V1: Final = frozenset({"decision", "reason", "observation"})
"""On a `classify` recorded under `runner-log/1` (no observation): some /1 runners recorded the
policy table's first answer and the observation's own reason there, later ones the verdict; the
move that carries the verdict out follows it and is still compared, so a different verdict shows."""


def same_transition(recorded: TransitionRecord, again: TransitionRecord) -> bool:
    """Whether a re-driven transition says what the recorded one says.

    Timing is left out: it is replayed from the recorded inputs' times, but on a real clock the
    engine's own time between inputs is not an input, so it cannot come out to the microsecond.
    """
    return not differing_fields(recorded, again)


def differing_fields(recorded: TransitionRecord, again: TransitionRecord) -> list[str]:
    """The fields (timing left out, see `same_transition`) where two transitions differ,
    compared as the typed values they are (enums, the observation), by attribute name."""
    skip = _TIMING
    if recorded.trigger == Trigger.CLASSIFY and recorded.observation is None:
        skip = _TIMING | _MEANT_OTHERWISE_IN_V1  # recorded under runner-log/1
    return [
        name
        for name in _FIELDS
        if name not in skip and getattr(recorded, name) != getattr(again, name)
    ]


_SHOWN: Final = frozenset({"from_state", "to_state", "trigger", "tool", "result_class", "decision"})


def brief(record: TransitionRecord, fields: Sequence[str] = ()) -> str:
    """One line for a transition: `from->to trigger tool result decision`, then `field=value`
    for each of `fields` the line does not already show (so a divergence names what differs)."""
    parts = [f"{record.from_state}->{record.to_state}", record.trigger]
    parts += [str(v) for v in (record.tool, record.result_class, record.decision) if v is not None]
    extra = [f"{name}={getattr(record, name)!r}" for name in fields if name not in _SHOWN]
    return " ".join(parts) + (f" [{', '.join(extra)}]" if extra else "")
