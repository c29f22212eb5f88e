"""The transition table as data, and the one shared `transitions.Machine`.

This is the only module that imports `transitions`. The table is validated when the module loads
(every problem reported at once) and the machine re-checks every move at run time: a trigger that
has no edge from the current state raises `IllegalTransition`, which is a bug, never a run outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, NoReturn

from transitions import Machine, MachineError

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

    Each trigger is declared here as a stub, so the machine (`model_override=True`) binds exactly
    these names, and mypy sees them. `attach` binds them (`Machine.add_model`), `fire` calls them,
    `detach` unbinds them: a detached run, or one never attached, cannot move.
    """

    __slots__ = ("__dict__", "current", "state")  # `__dict__`: the triggers `add_model` binds

    state: str
    """Kept by `transitions`."""
    current: State
    """`state` as a `State`, refreshed by `fire` (read on every iteration, so kept, not parsed)."""

    def propose(self) -> bool:
        return _unbound(self, Trigger.PROPOSE)

    def answer(self) -> bool:
        return _unbound(self, Trigger.ANSWER)

    def insist(self) -> bool:
        return _unbound(self, Trigger.INSIST)

    def give_up(self) -> bool:
        return _unbound(self, Trigger.GIVE_UP)

    def classify(self) -> bool:
        return _unbound(self, Trigger.CLASSIFY)

    def resume(self) -> bool:
        return _unbound(self, Trigger.RESUME)

    def next_call(self) -> bool:
        return _unbound(self, Trigger.NEXT_CALL)

    def retry(self) -> bool:
        return _unbound(self, Trigger.RETRY)

    def reconcile(self) -> bool:
        return _unbound(self, Trigger.RECONCILE)

    def escalate(self) -> bool:
        return _unbound(self, Trigger.ESCALATE)

    def abstain(self) -> bool:
        return _unbound(self, Trigger.ABSTAIN)

    def mark_unknown(self) -> bool:
        return _unbound(self, Trigger.MARK_UNKNOWN)


def _unbound(lifecycle: Lifecycle, trigger: Trigger) -> NoReturn:
    """A stub was called: the machine has not bound (or no longer binds) `lifecycle`'s triggers."""
    raise IllegalTransition(f"{getattr(lifecycle, 'state', '?')} (detached)", trigger.value)


def _check_stubs() -> None:
    """Refuse a `Lifecycle` that does not declare exactly one stub per trigger: the machine would
    leave an undeclared trigger unbound, and bind a stray name that happens to be an event."""
    declared = {name for name, value in vars(Lifecycle).items() if callable(value)}
    wanted = {trigger.value for trigger in Trigger}
    if declared != wanted:
        raise ConfigError(
            f"Lifecycle's trigger stubs: missing {sorted(wanted - declared)}, "
            f"not triggers {sorted(declared - wanted)}"
        )


class _Models:
    """The machine's models, in the list operations `transitions` uses (append, remove, `in`,
    iteration, len, [i]) over a dict: attaching and detaching a run cost the same however many
    runs are attached (a list scans them all, so a thousand runs in flight slowed each other)."""

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


class _SharedMachine(Machine):
    """A stock `Machine` whose model list is a `_Models` (the one change: the same API, O(1))."""

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.models = _Models()  # type: ignore[assignment]  # used as a list (see `_Models`)


def _check_table_only(machine: Machine) -> None:
    """Refuse a machine that does anything but move along the table: any callback or condition,
    an event queue, or two transitions from one state on one trigger. A move is then exactly the
    table's edge, so a run replays from its records alone."""
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


# Built once per process: one machine for every run, each attached as a model while it moves.
# `send_event` off: no callback reads an `EventData` (there are none; `_check_table_only`).
_MACHINE: Final = _SharedMachine(
    model=None,
    states=[state.value for state in State],
    transitions=[
        {"trigger": e.trigger.value, "source": e.source.value, "dest": e.dest.value} for e in TABLE
    ],
    initial=State.PLAN.value,
    auto_transitions=False,
    ignore_invalid_triggers=False,
    send_event=False,
    model_override=True,
)
_check_table_only(_MACHINE)
_check_stubs()
_STATES: Final[dict[str, State]] = {state.value: state for state in State}
_TRANSITIONS_LOG: Final = logging.getLogger("transitions.core")

# The library logs every state a run enters and leaves at INFO, which the runner's own
# transition records already say: kept to warnings unless the application set a level itself.
if logging.getLogger("transitions").level == logging.NOTSET:
    logging.getLogger("transitions").setLevel(logging.WARNING)


def attach(initial: State = State.PLAN) -> Lifecycle:
    """Register a new run with the shared machine, which binds its triggers."""
    lifecycle = Lifecycle()
    # With `model_override=True`, `add_model` logs a warning for every name it could bind and
    # the model does not declare (`trigger`, `may_*`, `is_*`: 21 a run, by design): quiet here.
    was_disabled = _TRANSITIONS_LOG.disabled
    _TRANSITIONS_LOG.disabled = True
    try:
        _MACHINE.add_model(lifecycle, initial=initial.value)
    finally:
        _TRANSITIONS_LOG.disabled = was_disabled
    lifecycle.current = initial
    return lifecycle


def detach(lifecycle: Lifecycle) -> None:
    """Release a run (the machine otherwise keeps every model it was given) and unbind its
    triggers (each holds the run: left bound, the two would wait for the cycle collector)."""
    if lifecycle in _MACHINE.models:
        _MACHINE.remove_model(lifecycle)
    vars(lifecycle).clear()


def fire(lifecycle: Lifecycle, trigger: Trigger) -> State:
    """Move `lifecycle` along `trigger` through its bound trigger (the shared machine decides
    where), or raise `IllegalTransition`."""
    try:
        getattr(lifecycle, trigger)()  # a `Trigger` is its name (a StrEnum)
    except MachineError as exc:
        raise IllegalTransition(lifecycle.state, trigger.value) from exc
    current = lifecycle.current = _STATES[lifecycle.state]
    return current


def attached_count() -> int:
    """How many runs the shared machine currently holds (for leak checks)."""
    return len(_MACHINE.models)
