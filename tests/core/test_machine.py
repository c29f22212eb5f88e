import logging
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transitions import Machine, MachineError

from runner.base.errors import ConfigError, IllegalTransition
from runner.core import machine
from runner.core.machine import (
    DECISION_TRIGGER,
    TABLE,
    Decision,
    Edge,
    Trigger,
    attach,
    detach,
    fire,
)
from runner.core.states import TERMINAL, State


def test_table_is_sound() -> None:
    assert machine.validate_table(TABLE) == []


def test_validation_reports_every_problem_at_once() -> None:
    broken = (
        *TABLE,
        Edge(Trigger.PROPOSE, State.PLAN, State.OBSERVE),  # duplicate (plan, propose)
        Edge(Trigger.RETRY, State.COMPLETE, State.PLAN),  # way out of a terminal state
    )
    problems = machine.validate_table(broken)
    assert any("plan.propose is defined twice" in p for p in problems)
    assert any("terminal state complete" in p for p in problems)
    assert len(problems) >= 2


def test_missing_edges_are_reported() -> None:
    without_call = tuple(e for e in TABLE if e.source is not State.CALL)
    problems = machine.validate_table(without_call)
    assert "non-terminal state call has no way out" in problems
    assert "trigger classify has no edge" in problems


def test_legal_path_reaches_complete() -> None:
    lifecycle = attach()
    try:
        assert fire(lifecycle, Trigger.PROPOSE) is State.CALL
        assert fire(lifecycle, Trigger.CLASSIFY) is State.OBSERVE
        assert fire(lifecycle, Trigger.RESUME) is State.PLAN
        assert fire(lifecycle, Trigger.ANSWER) is State.COMPLETE
    finally:
        detach(lifecycle)


def test_illegal_transition_raises() -> None:
    lifecycle = attach()
    try:
        with pytest.raises(IllegalTransition, match="'plan' on trigger 'classify'"):
            fire(lifecycle, Trigger.CLASSIFY)
        assert lifecycle.current is State.PLAN
    finally:
        detach(lifecycle)


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
@pytest.mark.parametrize("trigger", list(Trigger))
def test_terminal_states_have_no_way_out(terminal: State, trigger: Trigger) -> None:
    lifecycle = attach(initial=terminal)
    try:
        with pytest.raises(IllegalTransition):
            fire(lifecycle, trigger)
    finally:
        detach(lifecycle)


def test_no_automatic_to_state_triggers() -> None:
    lifecycle = attach()
    try:
        assert not hasattr(lifecycle, "to_complete")
    finally:
        detach(lifecycle)


def test_every_decision_has_a_trigger_out_of_observe() -> None:
    sources = {(e.source, e.trigger) for e in TABLE}
    for decision in Decision:
        assert (State.OBSERVE, DECISION_TRIGGER[decision]) in sources


def test_detach_releases_the_model() -> None:
    before = machine.attached_count()
    lifecycle = attach()
    assert machine.attached_count() == before + 1
    detach(lifecycle)
    assert machine.attached_count() == before


def _attach_detach_seconds(rounds: int = 300) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        detach(attach())
    return time.perf_counter() - started


def test_attaching_costs_the_same_however_many_runs_are_attached() -> None:
    """The machine holds every run in flight: registering and releasing one must not scan them
    all (a list's `in` and `remove` did, so a thousand concurrent runs slowed each other)."""
    alone = min(_attach_detach_seconds() for _ in range(3))
    others = [attach() for _ in range(20_000)]
    try:
        crowded = min(_attach_detach_seconds() for _ in range(3))
    finally:
        for lifecycle in others:
            detach(lifecycle)
    assert crowded < 10 * alone, (crowded, alone)


def test_machine_is_built_once_per_process() -> None:
    first = machine._MACHINE
    attach_a, attach_b = attach(), attach()
    try:
        assert machine._MACHINE is first
        assert attach_a in first.models and attach_b in first.models
    finally:
        detach(attach_a)
        detach(attach_b)


class Model:
    """A bare model for the stock machine (which keeps `state` on it)."""

    state: str


def _stock_machine() -> Machine:
    """The same table on an unmodified `transitions.Machine` (its full callback pipeline)."""
    return Machine(
        model=None,
        states=[state.value for state in State],
        transitions=[
            {"trigger": e.trigger.value, "source": e.source.value, "dest": e.dest.value}
            for e in TABLE
        ],
        initial=State.PLAN.value,
        auto_transitions=False,
        ignore_invalid_triggers=False,
        send_event=True,
    )


def _stock_move(stock: Machine, state: State, trigger: Trigger) -> State | None:
    model = Model()
    stock.add_model(model, initial=state.value)
    try:
        stock.events[trigger.value].trigger(model)
    except MachineError:
        return None
    finally:
        stock.remove_model(model)
    return State(model.state)


@pytest.mark.parametrize("state", list(State))
def test_every_move_is_the_one_stock_transitions_makes(state: State) -> None:
    """The shared machine's triggers agree with an unmodified `transitions.Machine` on
    every (state, trigger): the same destination, or both refuse."""
    stock = _stock_machine()
    for trigger in Trigger:
        lifecycle = attach(initial=state)
        try:
            moved: State | None = fire(lifecycle, trigger)
        except IllegalTransition:
            moved = None
            assert lifecycle.current is state and lifecycle.state == state.value
        finally:
            detach(lifecycle)
        assert moved is _stock_move(stock, state, trigger), (state, trigger)


@settings(max_examples=100)
@given(st.lists(st.sampled_from(list(Trigger)), max_size=40))
def test_any_trigger_sequence_walks_as_stock_transitions_walks(triggers: list[Trigger]) -> None:
    stock, model, lifecycle = _stock_machine(), Model(), attach()
    stock.add_model(model, initial=State.PLAN.value)
    try:
        for trigger in triggers:
            try:
                fire(lifecycle, trigger)
            except IllegalTransition:
                with pytest.raises(MachineError):
                    stock.events[trigger.value].trigger(model)
            else:
                stock.events[trigger.value].trigger(model)
            assert lifecycle.state == model.state
            assert lifecycle.current is State(model.state)
    finally:
        detach(lifecycle)


def test_a_callback_on_the_shared_machine_is_refused() -> None:
    """A move is exactly the table's edge, so a machine that has any callback is refused."""
    shared = machine._SharedMachine(
        model=None, states=["a", "b"], transitions=[["go", "a", "b"]], initial="a"
    )
    machine._check_table_only(shared)  # none: accepted
    shared.events["go"].add_callback("after", lambda: None)
    with pytest.raises(ConfigError, match="no callbacks"):
        machine._check_table_only(shared)
    shared.events["go"].transitions["a"][0].after.clear()
    shared.on_enter_b(lambda: None)
    with pytest.raises(ConfigError, match="no callbacks"):
        machine._check_table_only(shared)


def test_the_machine_binds_exactly_the_declared_triggers() -> None:
    """`model_override=True`: the run's model gets one bound trigger per `Trigger` (the stubs it
    declares), and none of the convenience names (`is_plan`, `may_propose`, `trigger`, ...)."""
    lifecycle = attach()
    try:
        assert sorted(vars(lifecycle)) == sorted(trigger.value for trigger in Trigger)
        assert not hasattr(lifecycle, "is_plan") and not hasattr(lifecycle, "may_propose")
        assert machine._MACHINE.model_override
    finally:
        detach(lifecycle)


def test_a_detached_run_cannot_move() -> None:
    lifecycle = attach()
    detach(lifecycle)
    assert vars(lifecycle) == {}
    with pytest.raises(IllegalTransition, match="detached"):
        fire(lifecycle, Trigger.PROPOSE)
    assert lifecycle.current is State.PLAN and lifecycle.state == State.PLAN.value


def test_attaching_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """`add_model` with `model_override=True` warns for each name the model does not declare;
    a run's attach says nothing, and leaves the library's logger as it found it."""
    caplog.set_level(logging.DEBUG)
    log = logging.getLogger("transitions.core")
    detach(attach())
    assert [record for record in caplog.records if record.name.startswith("transitions")] == []
    assert log.disabled is False
    log.disabled = True
    try:
        detach(attach())
        assert log.disabled is True
    finally:
        log.disabled = False


def test_a_stub_for_every_trigger_is_checked() -> None:
    machine._check_stubs()
    machine.Lifecycle.surplus = lambda self: True  # type: ignore[attr-defined]
    try:
        with pytest.raises(ConfigError, match="not triggers \\['surplus'\\]"):
            machine._check_stubs()
    finally:
        del machine.Lifecycle.surplus  # type: ignore[attr-defined]
