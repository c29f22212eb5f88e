import pytest

from runner import machine
from runner.errors import IllegalTransition
from runner.machine import TABLE, Decision, Edge, Trigger, attach, decide, detach, fire
from runner.states import TERMINAL, State


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
        assert (State.OBSERVE, decide(decision)) in sources


def test_detach_releases_the_model() -> None:
    before = machine.attached_count()
    lifecycle = attach()
    assert machine.attached_count() == before + 1
    detach(lifecycle)
    assert machine.attached_count() == before


def test_machine_is_built_once_per_process() -> None:
    first = machine._MACHINE
    attach_a, attach_b = attach(), attach()
    try:
        assert machine._MACHINE is first
        assert attach_a in first.models and attach_b in first.models
    finally:
        detach(attach_a)
        detach(attach_b)
