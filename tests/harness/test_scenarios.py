"""Every fixture, three times each from a clean state, on the fake clock."""

import time
from pathlib import Path

import pytest

from runner.core.states import TERMINAL
from runner.harness.fixtures import collect_fixture_paths, load_fixture
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES

PATHS = collect_fixture_paths([FIXTURES])


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_fixture_meets_its_expectations_three_times(path: Path, contracts: ContractSet) -> None:
    fixture = load_fixture(path, contracts)
    outcomes = [run_fixture(fixture, contracts, MemoryStore(), seed=0) for _ in range(3)]
    for outcome in outcomes:
        assert outcome.failures == [], outcome.failures
        result = outcome.result
        assert result.terminal in TERMINAL
        assert result.attempts <= fixture.budget.max_attempts
        assert result.elapsed_s <= fixture.budget.max_seconds
        assert result.transitions[-1].to_state == result.terminal.value
        assert sum(r.to_state in {t.value for t in TERMINAL} for r in result.transitions) == 1
    # Same seed, same world: the three runs are identical apart from their ids and stamps.
    shapes = [
        [
            (r.from_state, r.to_state, r.tool, r.result_class, r.decision, r.wait_s)
            for r in o.result.transitions
        ]
        for o in outcomes
    ]
    assert shapes[0] == shapes[1] == shapes[2]


def test_rate_limit_waits_on_the_fake_clock(contracts: ContractSet) -> None:
    fixture = load_fixture(FIXTURES / "rate_limited.yaml", contracts)
    started = time.monotonic()
    outcome = run_fixture(fixture, contracts, MemoryStore())
    real = time.monotonic() - started
    assert outcome.result.waits_s == [2.0]
    assert outcome.result.elapsed_s >= 2.0
    assert real < outcome.result.elapsed_s  # the 2 s wait cost less than 2 real seconds


def test_every_tool_call_gets_one_result_in_call_order(contracts: ContractSet) -> None:
    fixture = load_fixture(FIXTURES / "parallel_calls.yaml", contracts)
    outcome = run_fixture(fixture, contracts, MemoryStore())
    classified = [r.call_id for r in outcome.result.transitions if r.trigger == "classify"]
    assert classified == ["c-flights", "c-hotels", "c-rail", "c-rail"]
    # Dispatched concurrently: the 3 s, 2 s and 1 s calls overlap.
    assert outcome.result.elapsed_s < 6


def test_access_denied_is_never_retried(contracts: ContractSet) -> None:
    fixture = load_fixture(FIXTURES / "access_denied.yaml", contracts)
    outcome = run_fixture(fixture, contracts, MemoryStore())
    assert len(outcome.environment.tools["search_flights"].invocations) == 1
    assert [r.trigger for r in outcome.result.transitions].count("retry") == 0


def test_out_of_scope_tool_is_never_dispatched_nor_offered(contracts: ContractSet) -> None:
    fixture = load_fixture(FIXTURES / "out_of_scope_tool.yaml", contracts)
    outcome = run_fixture(fixture, contracts, MemoryStore())
    assert outcome.environment.tools["hold_room"].invocations == []


def test_budget_exhaustion_ends_with_a_tool_free_answer(contracts: ContractSet) -> None:
    fixture = load_fixture(FIXTURES / "budget_exhausted.yaml", contracts)
    outcome = run_fixture(fixture, contracts, MemoryStore())
    assert len(outcome.environment.tools["search_flights"].invocations) == 8
    last = outcome.result.transitions[-1]
    assert (last.from_state, last.to_state, last.reason) == ("plan", "abstain", "attempts")
    assert outcome.result.answer and "nothing is confirmed" in outcome.result.answer


def test_a_missed_expectation_names_the_states_plainly(contracts: ContractSet) -> None:
    """Both sides of a failed `transitions` expectation print as state names, not one side as
    names and the other as enum members."""
    fixture = load_fixture(FIXTURES / "read_only_success.yaml", contracts)
    assert fixture.expect.transitions is not None
    wrong = fixture.expect.model_copy(update={"transitions": fixture.expect.transitions[:-1]})
    outcome = run_fixture(fixture.model_copy(update={"expect": wrong}), contracts, MemoryStore())
    [failure] = outcome.failures
    assert failure.startswith("transitions: expected ['plan', 'call', ")
    assert "], got ['plan', 'call', " in failure and "State." not in failure
