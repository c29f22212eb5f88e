"""The one decision (issue 10, item 1): a pure function of policy, observation and run facts."""

import random
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from runner.core import decide as decide_module
from runner.core.budget import Bound
from runner.core.decide import Batch, Exit, Facts, PlanFacts, RequestFacts, decide
from runner.core.machine import Decision, Trigger
from runner.core.observations import (
    ArgumentsRejected,
    BoundSpent,
    BudgetExhausted,
    CancelRequested,
    ModelAnswered,
    ModelCutOff,
    ModelGaveNoReply,
    ModelOutOfBudget,
    ModelRejectedRequest,
    ModelUnusable,
    ModelWasUnavailable,
    OutcomeUnknown,
    ToolFailedTransiently,
    ToolRateLimited,
    ToolSucceeded,
)
from runner.core.policy import Policy
from runner.core.verdicts import AskAgain, Ending, FallBack, FinalRequest, Move, NoReply, Trip
from runner.harness.fixtures import load_fixture
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
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
    assert verdict.exit is not None and verdict.exit.move.decision is Decision.FINAL_ANSWER


def test_retries_are_bounded_then_back_to_the_model() -> None:
    verdict = decide(Policy(), TRANSIENT, replace(FACTS, retries=2), random.Random(0))
    assert verdict.decision is Decision.BACK_TO_MODEL


def test_a_second_invalid_call_to_one_tool_abstains_with_the_class_as_run_reason() -> None:
    rejected = ArgumentsRejected(call_id="c1", tool="search_flights", field="origin", reason="x")
    first = decide(Policy(), rejected, FACTS, random.Random(0))
    second = decide(Policy(), rejected, replace(FACTS, corrections=1), random.Random(0))
    assert first.decision is Decision.BACK_TO_MODEL
    assert second.decision is Decision.ABSTAIN and second.reason == "origin: x"
    assert second.exit is not None and _reason(second.exit) == "invalid_arguments"


def test_an_unknown_write_is_looked_up_unless_a_bound_forbids_it() -> None:
    lost = OutcomeUnknown(call_id="h1", tool="hold_room", reason="timeout")
    write = replace(FACTS, tool="hold_room", operation_key="k1", can_look_up=True)
    assert decide(Policy(), lost, write, random.Random(0)).decision is Decision.RECONCILE
    blocked = decide(Policy(), lost, replace(write, blocked=Bound.ATTEMPTS), random.Random(0))
    assert blocked.decision is Decision.UNKNOWN and blocked.tripped is Bound.ATTEMPTS
    assert blocked.exit is not None
    assert (_reason(blocked.exit), blocked.exit.move.operation_key) == ("attempts", "k1")


def test_a_success_while_a_write_is_open_ends_the_batch_unknown() -> None:
    ok = ToolSucceeded(call_id="c1", tool="search_flights", result={"status": "ok"})
    verdict = decide(Policy(), ok, replace(FACTS, unsettled="k0"), random.Random(0))
    assert verdict.decision is Decision.CONTINUE
    assert verdict.exit is not None and verdict.exit.move.decision is Decision.UNKNOWN
    assert (_reason(verdict.exit), verdict.exit.unsettled) == ("write_not_settled", "k0")


def test_the_batch_follows_its_strongest_decision() -> None:
    ok = ToolSucceeded(call_id="c2", tool="search_flights", result={"status": "ok"})
    earlier = Batch(decision=Decision.ESCALATE, reason="access_denied")
    verdict = decide(Policy(), ok, replace(FACTS, batch=earlier), random.Random(0))
    assert verdict.exit is not None and verdict.exit.move.decision is Decision.ESCALATE
    assert _reason(verdict.exit) == "access_denied"


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


def _reason(exit_: Exit) -> str | None:
    """The reason the run ends with when the batch leaves by `exit_` (None: back to the model)."""
    return exit_.move.ending.reason if exit_.move.ending is not None else None


# -- the model's side: what `plan` and a failed request come to ------------------------------

NOTHING_MISSING = PlanFacts()


def test_a_final_answer_completes_the_run_when_nothing_is_missing() -> None:
    move = decide(Policy(), ModelAnswered(text="done"), NOTHING_MISSING, random.Random(0))
    assert isinstance(move, Move) and move.trigger is Trigger.ANSWER
    assert move.ending == Ending("model_final", answer="done")


def test_a_premature_answer_is_refused_once_then_abstains_with_the_evidence_named() -> None:
    first = PlanFacts(missing=("a booking",), refused_answers=0)
    again = PlanFacts(missing=("a booking",), refused_answers=1)
    refused = decide(Policy(), ModelAnswered(text="done"), first, random.Random(0))
    ended = decide(Policy(), ModelAnswered(text="done"), again, random.Random(0))
    assert isinstance(refused, Move) and refused.trigger is Trigger.INSIST
    assert refused.ending is None and refused.decision is Decision.BACK_TO_MODEL
    assert isinstance(ended, Move) and ended.trigger is Trigger.GIVE_UP
    assert ended.ending == Ending("missing_evidence: a booking", answer="done")


def test_what_plan_comes_to_ends_or_moves_as_the_rules_say() -> None:
    rng = random.Random(0)
    cut = decide(Policy(), ModelCutOff(bound=Bound.TOKENS, text=""), NOTHING_MISSING, rng)
    assert isinstance(cut, Move) and cut.ending == Ending("tokens", answer=None)
    assert cut.result_class == "budget_exhausted" and cut.decision is Decision.ABSTAIN
    unusable = decide(
        Policy(), ModelUnusable(reason="model_refused", text="no"), NOTHING_MISSING, rng
    )
    assert isinstance(unusable, Move) and unusable.ending == Ending("model_refused", answer="no")
    assert unusable.decision is None and unusable.result_class is None
    out = decide(Policy(), ModelOutOfBudget(bound=Bound.DEADLINE), NOTHING_MISSING, rng)
    assert out == Trip(Bound.DEADLINE)
    spent = decide(Policy(), BoundSpent(bound=Bound.ATTEMPTS), NOTHING_MISSING, rng)
    assert spent == FinalRequest(Bound.ATTEMPTS)
    cancel = decide(Policy(), CancelRequested(), NOTHING_MISSING, rng)
    assert isinstance(cancel, Move) and cancel.ending == Ending("cancelled")
    assert cancel.trigger is Trigger.GIVE_UP and cancel.decision is Decision.ABSTAIN


def test_an_unavailable_model_is_asked_again_while_retries_are_left_and_the_wait_fits() -> None:
    failed = ModelWasUnavailable(status="503", retry_after="2")
    fits = RequestFacts(retries=0, now=0.0, deadline=10.0, came=WALL)
    late = RequestFacts(retries=0, now=9.0, deadline=10.0, came=WALL)
    spent = RequestFacts(retries=Policy().max_retries, now=0.0, deadline=10.0, came=WALL)
    assert decide(Policy(), failed, fits, random.Random(0)) == AskAgain(2.0)
    assert decide(Policy(), failed, late, random.Random(0)) == FallBack(
        ModelOutOfBudget(bound=Bound.DEADLINE)
    )
    assert decide(Policy(), failed, spent, random.Random(0)) == FallBack(
        ModelGaveNoReply(reason="model_unavailable: 503")
    )


def test_a_rejected_request_is_not_asked_again() -> None:
    facts = RequestFacts(retries=0, now=0.0, deadline=10.0, came=WALL)
    rejected = ModelRejectedRequest(status="400", message="bad request")
    assert decide(Policy(), rejected, facts, random.Random(0)) == NoReply(
        ModelGaveNoReply(reason="model_rejected: 400 bad request")
    )
