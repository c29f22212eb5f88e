"""The transition table as data, and the one shared `transitions.Machine`.

This is the only module that imports `transitions`. The table is validated when the module loads
(every problem reported at once) and the machine re-checks every move at run time: a trigger that
has no edge from the current state raises `IllegalTransition`, which is a bug, never a run outcome.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from transitions import Event, Machine, MachineError

from ..base.errors import ConfigError, IllegalTransition
from .states import TERMINAL, State


class Trigger(StrEnum):
    """Names of the machine's events."""

    PROPOSE = "propose"
    """plan -> call: the model proposed tool calls and budget is left."""
    ANSWER = "answer"
    """plan -> complete: the model answered."""
    INSIST = "insist"
    """plan -> plan: the model answered before the task's required evidence exists (the
    completion gate); it is told once what is missing and asked again."""
    GIVE_UP = "give_up"
    """plan -> abstain: a bound is spent; the final tool-free request has been made."""
    CLASSIFY = "classify"
    """call -> observe: one call's outcome has been classified."""
    RESUME = "resume"
    """observe -> plan: continue, or hand the outcome back to the model."""
    NEXT_CALL = "next_call"
    """observe -> call: the batch has another outstanding call to classify."""
    RETRY = "retry"
    """observe -> call: the policy retries the same call."""
    RECONCILE = "reconcile"
    """observe -> call: look an unknown write outcome up by its operation key."""
    ESCALATE = "escalate"
    """observe -> escalate."""
    ABSTAIN = "abstain"
    """observe -> abstain."""
    MARK_UNKNOWN = "mark_unknown"
    """observe -> unknown."""


class Decision(StrEnum):
    """What the policy makes of an observation."""

    CONTINUE = "continue"
    RETRY = "retry"
    RECONCILE = "reconcile"
    BACK_TO_MODEL = "back_to_model"
    FINAL_ANSWER = "final_answer"
    """A bound is spent: back to `plan` for the one tool-free request, then `abstain`."""
    ESCALATE = "escalate"
    ABSTAIN = "abstain"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Edge:
    trigger: Trigger
    source: State
    dest: State


TABLE: Final[tuple[Edge, ...]] = (
    Edge(Trigger.PROPOSE, State.PLAN, State.CALL),
    Edge(Trigger.ANSWER, State.PLAN, State.COMPLETE),
    Edge(Trigger.INSIST, State.PLAN, State.PLAN),
    Edge(Trigger.GIVE_UP, State.PLAN, State.ABSTAIN),
    Edge(Trigger.CLASSIFY, State.CALL, State.OBSERVE),
    Edge(Trigger.RESUME, State.OBSERVE, State.PLAN),
    Edge(Trigger.NEXT_CALL, State.OBSERVE, State.CALL),
    Edge(Trigger.RETRY, State.OBSERVE, State.CALL),
    Edge(Trigger.RECONCILE, State.OBSERVE, State.CALL),
    Edge(Trigger.ESCALATE, State.OBSERVE, State.ESCALATE),
    Edge(Trigger.ABSTAIN, State.OBSERVE, State.ABSTAIN),
    Edge(Trigger.MARK_UNKNOWN, State.OBSERVE, State.UNKNOWN),
)

# Which trigger carries each decision out of `observe` once a batch of calls is settled (read by
# the decision, `decide.py`, which puts the trigger on its verdict).
DECISION_TRIGGER: Final[dict[Decision, Trigger]] = {
    Decision.CONTINUE: Trigger.RESUME,
    Decision.BACK_TO_MODEL: Trigger.RESUME,
    Decision.FINAL_ANSWER: Trigger.RESUME,
    Decision.RETRY: Trigger.RETRY,
    Decision.RECONCILE: Trigger.RECONCILE,
    Decision.ESCALATE: Trigger.ESCALATE,
    Decision.ABSTAIN: Trigger.ABSTAIN,
    Decision.UNKNOWN: Trigger.MARK_UNKNOWN,
}


def validate_table(table: tuple[Edge, ...]) -> list[str]:
    """Return every problem with a transition table (empty when it is sound)."""
    problems: list[str] = []
    seen: dict[tuple[State, Trigger], State] = {}
    for edge in table:
        key = (edge.source, edge.trigger)
        if key in seen:
            problems.append(f"{edge.source}.{edge.trigger} is defined twice")
        seen[key] = edge.dest
        if edge.source in TERMINAL:
            problems.append(f"terminal state {edge.source} has an outgoing edge {edge.trigger}")
    sources = {edge.source for edge in table}
    reached = {edge.dest for edge in table} | {State.PLAN}
    for state in State:
        if state not in TERMINAL and state not in sources:
            problems.append(f"non-terminal state {state} has no way out")
        if state not in reached:
            problems.append(f"state {state} cannot be reached")
    for trigger in Trigger:
        if not any(edge.trigger is trigger for edge in table):
            problems.append(f"trigger {trigger} has no edge")
    for decision in Decision:
        mapped = DECISION_TRIGGER.get(decision)
        if mapped is None:
            problems.append(f"decision {decision} has no trigger")
        elif (State.OBSERVE, mapped) not in seen:
            problems.append(f"decision {decision} maps to {mapped}, which has no edge from observe")
    return problems


_PROBLEMS = validate_table(TABLE)
if _PROBLEMS:
    raise ConfigError("transition table is unsound: " + "; ".join(_PROBLEMS))


class Lifecycle:
    """The object a run hands to the shared machine; `state` is kept by `transitions`.

    The machine binds nothing to it (`_PlainMachine.add_model`): a run moves only through `fire`.
    """

    __slots__ = ("current", "state")

    state: str
    """Kept by `transitions`."""
    current: State
    """`state` as a `State`, refreshed by `fire` (read on every iteration, so kept, not parsed)."""


class _DirectEvent(Event):
    """A trigger that asks the machine's own table and moves, without the callback pipeline.

    `Event.trigger` builds an `EventData`, queues a partial and walks prepare, condition,
    before, enter, exit, after and finalize callback lists (about 7 us a trigger here). This
    machine configures none of them (`_check_plain` below refuses one), so the walk decides
    nothing: the destination is the one transition `transitions` registered for the model's
    state on this event, set as `Machine.set_state` sets it; no transition from that state raises
    `MachineError`, as `Event.trigger` does with `ignore_invalid_triggers=False`.
    """

    def trigger(self, model: object, *args: object, **kwargs: object) -> bool:
        state: str = getattr(model, "state")  # noqa: B009  # set by `transitions`, untyped
        moves = self.transitions.get(state)
        dest = moves[0].dest if moves else None
        if dest is None:  # no edge (or an internal transition, which the table never has)
            raise MachineError(f"Can't trigger event {self.name} from state {state}!")
        # What `Machine.set_state` does for one model and a state of plain name (`dest`).
        setattr(model, self.machine.model_attribute, dest)
        return True


class _Models:
    """The machine's models, in the list operations `transitions` uses (append, remove, `in`,
    iteration, len, [i]) over a dict: attaching and detaching a run cost the same however many
    runs are attached (a list scans them all)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[object, None] = {}

    def append(self, model: object) -> None:
        self._held[model] = None

    def remove(self, model: object) -> None:
        try:
            del self._held[model]
        except KeyError:
            raise ValueError("model not attached") from None

    def __contains__(self, model: object) -> bool:
        return model in self._held

    def __iter__(self) -> Iterator[object]:
        return iter(tuple(self._held))

    def __len__(self) -> int:
        return len(self._held)

    def __getitem__(self, index: int) -> object:
        return tuple(self._held)[index]


class _PlainMachine(Machine):
    event_cls = _DirectEvent

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.models = _Models()  # type: ignore[assignment]  # used as a list (see `_Models`)

    def add_model(self, model: Any, initial: Any = None) -> None:
        """Register `model`, setting its initial state, and bind nothing to it: its triggers
        are fired through the machine's events (`fire`). Bound triggers would hold the model in
        a reference cycle (each run's garbage for the collector) and cost more than a step."""
        start = self.initial if initial is None else initial
        assert start is not None, "the machine has an initial state"
        for mod in model if isinstance(model, list) else [model]:
            if mod not in self.models:
                self.set_state(start, model=mod)
                self.models.append(mod)


def _check_plain(machine: Machine) -> None:
    """Refuse a configuration `_DirectEvent` would not honour: any callback or condition, an
    event queue, or two transitions from one state on one trigger."""
    lists = [
        machine.prepare_event,
        machine.finalize_event,
        machine.before_state_change,
        machine.after_state_change,
        machine.on_exception,
        machine.on_final,
    ]
    for state in machine.states.values():
        lists += [state.on_enter, state.on_exit]
    for event in machine.events.values():
        for moves in event.transitions.values():
            if len(moves) != 1:
                raise ConfigError(f"{event.name}: {len(moves)} transitions from one state")
            lists += [moves[0].prepare, moves[0].before, moves[0].after, moves[0].conditions]
    if any(lists) or machine.has_queue:
        raise ConfigError("the shared machine must have no callbacks, conditions or queue")


# Built once per process: constructing a Machine costs about 40 triggers' worth of time.
# `send_event` off: no callback reads an `EventData` (there are none; `_check_plain`).
_MACHINE: Final = _PlainMachine(
    model=None,
    states=[state.value for state in State],
    transitions=[
        {"trigger": e.trigger.value, "source": e.source.value, "dest": e.dest.value} for e in TABLE
    ],
    initial=State.PLAN.value,
    auto_transitions=False,
    ignore_invalid_triggers=False,
    send_event=False,
)
_check_plain(_MACHINE)
_EVENTS: Final[dict[Trigger, Event]] = {t: _MACHINE.events[t.value] for t in Trigger}
_STATES: Final[dict[str, State]] = {state.value: state for state in State}


def attach(initial: State = State.PLAN) -> Lifecycle:
    """Register a new run with the shared machine."""
    lifecycle = Lifecycle()
    _MACHINE.add_model(lifecycle, initial=initial.value)
    lifecycle.current = initial
    return lifecycle


def detach(lifecycle: Lifecycle) -> None:
    """Release a run: the machine otherwise keeps every model it was given."""
    if lifecycle in _MACHINE.models:
        _MACHINE.remove_model(lifecycle)


def fire(lifecycle: Lifecycle, trigger: Trigger) -> State:
    """Move `lifecycle` along `trigger` (the shared machine decides where), or raise
    `IllegalTransition`."""
    try:
        _EVENTS[trigger].trigger(lifecycle)
    except MachineError as exc:
        raise IllegalTransition(lifecycle.state, trigger.value) from exc
    current = lifecycle.current = _STATES[lifecycle.state]
    return current


def attached_count() -> int:
    """How many runs the shared machine currently holds (for leak checks)."""
    return len(_MACHINE.models)
