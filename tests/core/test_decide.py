"""The one decision (issue 10, item 1): a pure function of policy, observation and run facts."""

import random
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from runner.core import decide as decide_module
from runner.core.budget import Bound
from runner.core.decide import Batch, Facts, decide
from runner.core.machine import Decision
from runner.core.observations import (
    ArgumentsRejected,
    BudgetExhausted,
    OutcomeUnknown,
    ToolFailedTransiently,
    ToolRateLimited,
    ToolSucceeded,
)
from runner.core.policy import Policy
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.fixtures import load_fixture
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES

WALL = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
FACTS = Facts(
    call_id="c1",
    tool="search_flights",
    retries=0,
    corrections=0,
    resend_unsafe=False,
    can_look_up=False,
    operation_key=None,
    looked_up=False,
    blocked=None,
    now=0.0,
    deadline=30.0,
    wall=WALL,
    tripped=None,
    batch=Batch(),
    last=True,
)
TRANSIENT = ToolFailedTransiently(call_id="c1", tool="search_flights", reason="timeout")


def test_a_transient_failure_is_retried_with_a_jittered_wait_that_fits() -> None:
    verdict = decide(Policy(), TRANSIENT, FACTS, random.Random(0))
    assert verdict.decision is Decision.RETRY and verdict.reason == "timeout"
    assert verdict.wait is not None and 0 <= verdict.wait <= 0.5
    assert verdict.exit is None  # the batch does not move on while its call is retried


def test_the_same_inputs_give_the_same_verdict() -> None:
    assert decide(Policy(), TRANSIENT, FACTS, random.Random(3)) == decide(
        Policy(), TRANSIENT, FACTS, random.Random(3)
    )


def test_a_wait_past_the_deadline_is_a_final_answer_with_the_bound_as_reason() -> None:
    limited = ToolRateLimited(call_id="c1", tool="search_flights", retry_after="60")
    verdict = decide(Policy(), limited, FACTS, random.Random(0))
    assert verdict.decision is Decision.FINAL_ANSWER and verdict.reason == "deadline"
    assert isinstance(verdict.shown, BudgetExhausted) and verdict.tripped is Bound.DEADLINE
    assert verdict.exit is not None and verdict.exit.decision is Decision.FINAL_ANSWER


def test_retries_are_bounded_then_back_to_the_model() -> None:
    verdict = decide(Policy(), TRANSIENT, replace(FACTS, retries=2), random.Random(0))
    assert verdict.decision is Decision.BACK_TO_MODEL


def test_a_second_invalid_call_to_one_tool_abstains_with_the_class_as_run_reason() -> None:
    rejected = ArgumentsRejected(call_id="c1", tool="search_flights", field="origin", reason="x")
    first = decide(Policy(), rejected, FACTS, random.Random(0))
    second = decide(Policy(), rejected, replace(FACTS, corrections=1), random.Random(0))
    assert first.decision is Decision.BACK_TO_MODEL
    assert second.decision is Decision.ABSTAIN and second.reason == "origin: x"
    assert second.exit is not None and second.exit.reason == "invalid_arguments"


def test_an_unknown_write_is_looked_up_unless_a_bound_forbids_it() -> None:
    lost = OutcomeUnknown(call_id="h1", tool="hold_room", reason="timeout")
    write = replace(FACTS, tool="hold_room", operation_key="k1", can_look_up=True)
    assert decide(Policy(), lost, write, random.Random(0)).decision is Decision.RECONCILE
    blocked = decide(Policy(), lost, replace(write, blocked=Bound.ATTEMPTS), random.Random(0))
    assert blocked.decision is Decision.UNKNOWN and blocked.tripped is Bound.ATTEMPTS
    assert blocked.exit is not None
    assert (blocked.exit.reason, blocked.exit.operation_key) == ("attempts", "k1")


def test_a_success_while_a_write_is_open_ends_the_batch_unknown() -> None:
    ok = ToolSucceeded(call_id="c1", tool="search_flights", result={"status": "ok"})
    verdict = decide(Policy(), ok, replace(FACTS, unsettled="k0"), random.Random(0))
    assert verdict.decision is Decision.CONTINUE
    assert verdict.exit is not None and verdict.exit.decision is Decision.UNKNOWN
    assert (verdict.exit.reason, verdict.exit.unsettled) == ("write_not_settled", "k0")


def test_the_batch_follows_its_strongest_decision() -> None:
    ok = ToolSucceeded(call_id="c2", tool="search_flights", result={"status": "ok"})
    earlier = Batch(decision=Decision.ESCALATE, reason="access_denied")
    verdict = decide(Policy(), ok, replace(FACTS, batch=earlier), random.Random(0))
    assert verdict.exit is not None and verdict.exit.decision is Decision.ESCALATE
    assert verdict.exit.reason == "access_denied"


def test_the_verdict_is_recorded_once_with_its_reason(contracts: ContractSet) -> None:
    """The wait would outlast the deadline: the `classify` record says so, and the moves after
    it only carry that verdict out."""
    fixture = load_fixture(FIXTURES / "retry_after_past_deadline.yaml", contracts)
    result = run_fixture(fixture, contracts, MemoryStore()).result
    classify, resume = result.transitions[1], result.transitions[2]
    assert (classify.trigger, classify.result_class) == ("classify", "rate_limited")
    assert (classify.decision, classify.reason) == ("final_answer", "deadline")
    assert (resume.trigger, resume.decision) == ("resume", "final_answer")


def test_one_module_decides() -> None:
    """Only `decide.py` reads the policy's table or draws a tool retry's wait."""
    runner = Path(decide_module.__file__).parent
    readers = {
        path.relative_to(runner).as_posix()
        for path in runner.rglob("*.py")
        if "decision_for(" in (text := path.read_text()) or "retry_delay(" in text
    }
    assert readers == {"decide.py", "policy.py"}  # policy.py defines them
