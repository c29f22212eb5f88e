"""Engine behaviours: bounds, checks before sleeping, authority, transcript shape, records."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import pytest
import structlog
from pydantic import ValidationError

from runner.base.clock import FakeClock
from runner.core import machine
from runner.core.budget import Limits
from runner.core.states import State
from runner.engine.engine import Engine
from runner.models.base import ModelReply, TokenUsage, ToolCall
from runner.models.scripted import ScriptedModel
from runner.models.transcript import ToolResultMessage, Transcript
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.environment import ScriptedEnvironment
from runner.travel.scenario import run_fixture, spec_for
from tests.support.driving import RecordingModel, drive
from tests.support.travel import FLIGHT_ARGS, FLIGHTS_OK, make_fixture

RATE_LIMITED = {"status": "error", "error_code": "rate_limited", "retryable": True}
UNAVAILABLE = {"status": "error", "error_code": "service_unavailable", "retryable": False}


def search(**changes: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "search_flights", "args": {**FLIGHT_ARGS, **changes}}]}


def test_wait_that_outlasts_the_deadline_is_never_slept(contracts: ContractSet) -> None:
    fixture = make_fixture(
        budget={"max_seconds": 30},
        environment={"search_flights": [{"respond": RATE_LIMITED, "retry_after": "45"}]},
        model=[search(), {"final": "rate limited; nothing confirmed"}],
    )
    result, clock, env, _ = drive(fixture, contracts)
    assert clock.sleeps == []  # checked before the sleep, not after
    assert result.terminal.value == "abstain" and result.reason == "deadline"
    assert len(env.tools["search_flights"].invocations) == 1


def test_wait_that_fits_is_slept_then_retried(contracts: ContractSet) -> None:
    fixture = make_fixture(
        environment={
            "search_flights": [
                {"respond": RATE_LIMITED, "retry_after": "29"},
                {"respond": FLIGHTS_OK},
            ]
        },
    )
    result, clock, _, _ = drive(fixture, contracts)
    assert clock.sleeps == [29.0] and result.terminal.value == "complete"


def test_a_503s_retry_after_is_honoured_as_a_rate_limits_is(contracts: ContractSet) -> None:
    """RFC 9110 gives Retry-After to a 503 too: a `service_unavailable` that carries one is
    retried after it (delay-seconds or an HTTP-date), not after the backoff; past the deadline,
    not at all."""
    fixture = make_fixture(
        environment={
            "search_flights": [
                {"respond": UNAVAILABLE, "retry_after": "17"},
                {"respond": UNAVAILABLE, "retry_after": "Mon, 01 Mar 2027 09:00:25 GMT"},
                {"respond": FLIGHTS_OK},
            ]
        },
    )
    result, clock, _, _ = drive(fixture, contracts)
    assert clock.sleeps == [17.0, 8.0] and result.terminal.value == "complete"
    assert result.waits_s == [17.0, 8.0]
    late = make_fixture(
        budget={"max_seconds": 30},
        environment={"search_flights": [{"respond": UNAVAILABLE, "retry_after": "45"}]},
        model=[search(), {"final": "unavailable; nothing confirmed"}],
    )
    result, clock, _, _ = drive(late, contracts)
    assert clock.sleeps == [] and (result.terminal.value, result.reason) == ("abstain", "deadline")


def test_check_before_sleep_counts_attempts(contracts: ContractSet) -> None:
    """With the attempt budget spent, a retry is not even waited for."""
    fixture = make_fixture(
        budget={"max_attempts": 1},
        environment={"search_flights": [{"respond": RATE_LIMITED, "retry_after": "1"}]},
        model=[search(), {"final": "could not search"}],
    )
    result, clock, _, _ = drive(fixture, contracts)
    assert clock.sleeps == [] and result.reason == "attempts" and result.attempts == 1


def test_retries_are_bounded_then_back_to_the_model(contracts: ContractSet) -> None:
    fixture = make_fixture(
        environment={"search_flights": [{"respond": UNAVAILABLE}] * 5},
        model=[search(), {"final": "supplier unavailable"}],
    )
    result, clock, env, _ = drive(fixture, contracts)
    assert len(env.tools["search_flights"].invocations) == 3  # first try + max_retries (2)
    assert len(clock.sleeps) == 2
    assert result.terminal.value == "complete"
    decisions = [r.decision for r in result.transitions if r.trigger == "classify"]
    assert decisions == ["retry", "retry", "back_to_model"]


def test_no_run_passes_its_attempt_cap_or_deadline(contracts: ContractSet) -> None:
    turns = [
        search(date_start=f"2027-04-{d:02d}", date_end=f"2027-04-{d + 1:02d}") for d in range(1, 20)
    ]
    fixture = make_fixture(
        budget={"max_attempts": 8, "max_seconds": 30},
        environment={"search_flights": [{"latency_s": 2.5, "respond": UNAVAILABLE}] * 40},
        model=[*turns, {"final": "gave up"}],
    )
    result, _clock, env, _ = drive(fixture, contracts)
    assert result.attempts <= 8
    assert len(env.tools["search_flights"].invocations) <= 8
    assert result.elapsed_s <= 30
    assert result.terminal.value == "abstain"


def test_deadline_cuts_a_slow_tool_and_ends_abstain(contracts: ContractSet) -> None:
    fixture = make_fixture(
        budget={"max_seconds": 5},
        environment={"search_flights": [{"latency_s": 60, "respond": FLIGHTS_OK}]},
        model=[search(), {"final": "no answer in time"}],
    )
    result, _clock, _, _ = drive(fixture, contracts)
    assert result.reason == "deadline" and result.elapsed_s <= 5
    classified = [r for r in result.transitions if r.trigger == "classify"]
    assert classified[0].result_class == "transient"


def test_outstanding_calls_get_budget_results_and_the_final_request_forbids_tools(
    contracts: ContractSet,
) -> None:
    fixture = make_fixture(
        budget={"max_attempts": 1},
        environment={"search_flights": [{"respond": FLIGHTS_OK}]},
        model=[
            {
                "tool_calls": [
                    {"name": "search_flights", "args": FLIGHT_ARGS},
                    {"name": "search_flights", "args": {**FLIGHT_ARGS, "destination": "HND"}},
                ]
            },
            search(destination="KIX"),
            {"final": "NH7 only; HND not checked."},
        ],
    )
    model = RecordingModel(ScriptedModel(fixture.model))
    result, _, env, _ = drive(fixture, contracts, model)
    classes = [r.result_class for r in result.transitions if r.trigger == "classify"]
    assert classes == ["ok", "budget_exhausted"]
    assert len(env.tools["search_flights"].invocations) == 1
    assert model.requests[-1] == (("search_flights",), "none")
    assert result.reason == "attempts" and result.answer == "NH7 only; HND not checked."
    results = [m for m in model.transcripts[-1] if isinstance(m, ToolResultMessage)]
    assert [m.call_id for m in results] == ["call_1_0", "call_1_1"]
    assert [json.loads(m.content)["attempts_left"] for m in results] == [0, 0]


def test_token_bound_stops_the_loop(contracts: ContractSet) -> None:
    fixture = make_fixture(
        budget={"max_tokens": 1000},
        environment={"search_flights": [{"respond": FLIGHTS_OK}] * 3},
        model=[
            {**search(), "usage": {"input": 700, "output": 100}},
            {**search(destination="HND"), "usage": {"input": 900, "output": 100}},
            {"final": "partial", "usage": {"input": 50, "output": 5}},
        ],
    )
    result, _, env, _ = drive(fixture, contracts)
    assert result.reason == "tokens"
    assert len(env.tools["search_flights"].invocations) == 1  # second batch blocked before dispatch


def test_model_step_bound_stops_the_loop(contracts: ContractSet) -> None:
    fixture = make_fixture(
        budget={"max_model_steps": 2},
        environment={"search_flights": [{"respond": FLIGHTS_OK}] * 3},
        model=[
            search(),
            search(destination="HND"),
            search(destination="KIX"),
            {"final": "partial"},
        ],
    )
    result, _, _, _ = drive(fixture, contracts)
    assert result.reason == "model_steps" and result.model_steps == 3  # 2 + the final request


def test_repeat_of_a_settled_call_is_refused_and_counted(contracts: ContractSet) -> None:
    fixture = make_fixture(model=[search(), search(), {"final": "NH7"}])
    result, _, env, _ = drive(fixture, contracts)
    assert len(env.tools["search_flights"].invocations) == 1
    assert result.attempts == 2
    assert [r.result_class for r in result.transitions if r.trigger == "classify"] == [
        "ok",
        "repeat_refused",
    ]


def test_credentials_reach_the_tool_from_the_runtime_only(contracts: ContractSet) -> None:
    fixture = make_fixture()
    _, _, env, _ = drive(fixture, contracts)
    invocation = env.tools["search_flights"].invocations[0]
    assert invocation.tenant == "optiverse"
    assert invocation.credentials == {"supplier_token": "sim-optiverse"}
    assert "tenant" not in invocation.arguments and "credentials" not in invocation.arguments


def test_only_tools_in_scope_are_offered(contracts: ContractSet) -> None:
    fixture = make_fixture(tools=["search_flights", "hold_room"])
    model = RecordingModel(ScriptedModel(fixture.model))
    drive(fixture, contracts, model)
    assert model.requests[0] == (("search_flights",), "auto")


def test_lost_write_with_no_lookup_available_ends_unknown_with_its_key(
    contracts: ContractSet,
) -> None:
    fixture = make_fixture(
        principal={"id": "agent-7", "scopes": ["travel.read", "travel.book"]},
        tools=["hold_room"],
        environment={"hold_room": [{"timeout": True}]},
        model=[
            {
                "tool_calls": [
                    {
                        "name": "hold_room",
                        "args": {
                            "hotel_id": "H-SHIBA",
                            "check_in": "2027-04-02",
                            "check_out": "2027-04-06",
                            "guests": 4,
                            "room_type": "accessible",
                        },
                    }
                ]
            },
            {"final": "unreachable"},
        ],
    )
    result, _, env, _ = drive(fixture, contracts)
    assert result.terminal.value == "unknown"
    assert len(env.tools["hold_room"].invocations) == 1
    classified = next(r for r in result.transitions if r.trigger == "classify")
    assert classified.result_class == "unknown_outcome"
    assert classified.operation_key and classified.operation_key.startswith("optiverse:hold_room:")
    assert env.tools["hold_room"].invocations[0].operation_key == classified.operation_key
    last = result.transitions[-1]
    assert (last.to_state, last.operation_key) == ("unknown", classified.operation_key)
    assert [op.status for op in result.operations] == ["unknown"]


def test_a_failing_model_adapter_still_ends_in_a_declared_state(contracts: ContractSet) -> None:
    class Broken:
        async def generate(self, *_: object) -> ModelReply:
            raise ValueError("adapter bug")

    result, _, _, store = drive(make_fixture(), contracts, Broken())
    assert result.terminal.value == "abstain" and result.reason == "model_error: ValueError"
    assert store.summaries[result.run_id].terminal == "abstain"


def test_records_reach_the_store_in_order_and_the_machine_is_released(
    contracts: ContractSet,
) -> None:
    before = machine.attached_count()
    result, _, _, store = drive(make_fixture(), contracts)
    assert store.transitions(result.run_id) == result.transitions
    assert [r.seq for r in result.transitions] == list(range(1, len(result.transitions) + 1))
    assert machine.attached_count() == before


def test_one_log_event_per_transition(contracts: ContractSet) -> None:
    structlog.reset_defaults()  # transitions log at info, below the tests' default level
    with structlog.testing.capture_logs() as events:
        result, _, _, _ = drive(make_fixture(), contracts)
    transitions = [e for e in events if e["event"] == "transition"]
    assert len(transitions) == len(result.transitions)
    assert [e["seq"] for e in transitions] == [r.seq for r in result.transitions]


def test_invented_tool_call_is_counted_before_validation(contracts: ContractSet) -> None:
    fixture = make_fixture(
        model=[{"tool_calls": [{"name": "teleport", "args": {}}]}, {"final": "cannot"}],
    )
    result, _, _, _ = drive(fixture, contracts)
    assert result.attempts == 1
    assert [r.result_class for r in result.transitions if r.trigger == "classify"] == [
        "unknown_tool"
    ]


def test_tool_usage_is_estimated_when_the_script_states_none(contracts: ContractSet) -> None:
    result, _, _, _ = drive(make_fixture(), contracts)
    assert result.tokens_in > 0 and result.tokens_out > 0


def test_model_usage_is_counted_from_replies(contracts: ContractSet) -> None:
    class Fixed:
        async def generate(self, transcript: Transcript, tools: Any, choice: Any) -> ModelReply:
            if any(isinstance(m, ToolResultMessage) for m in transcript.messages):
                return ModelReply(
                    text="done",
                    tool_calls=(),
                    usage=TokenUsage(input_tokens=10, output_tokens=1),
                    stop_reason="end_turn",
                )
            call = ToolCall(id="x", name="search_flights", arguments=FLIGHT_ARGS)
            return ModelReply(
                text="",
                tool_calls=(call,),
                usage=TokenUsage(input_tokens=5, output_tokens=2),
                stop_reason="tool_use",
            )

    result, _, _, _ = drive(make_fixture(), contracts, Fixed())
    assert (result.tokens_in, result.tokens_out) == (15, 3)


def test_scenario_runner_checks_expectations(contracts: ContractSet) -> None:
    fixture = make_fixture(expect={"terminal": "abstain", "attempts": 5})
    outcome = run_fixture(fixture, contracts, MemoryStore())
    assert not outcome.passed
    assert "terminal: expected 'abstain', got 'complete'" in outcome.failures
    assert "attempts: expected 5, got 1" in outcome.failures


def test_limits_reject_nonsense() -> None:
    with pytest.raises(ValidationError):
        Limits(max_attempts=0)


def test_a_run_leaves_no_reference_cycle_for_the_collector(contracts: ContractSet) -> None:
    """A run's objects are freed as it lets go of them: garbage in a reference cycle (a model
    holding its own bound triggers, as every run's machine model once did) waits for the
    collector, whose passes over everything the process keeps cost every step."""
    answers = [{"respond": FLIGHTS_OK}, {"respond": FLIGHTS_OK}]  # one per run
    fixture = make_fixture(environment={"search_flights": answers})
    clock = FakeClock(fixture.clock.start)
    environment = ScriptedEnvironment(fixture.environment, fixture.tools, clock)
    engine = Engine(contracts=contracts, toolbox=environment, store=MemoryStore(), clock=clock)

    async def garbage_of_one_run() -> int:
        await engine.run(spec_for(fixture, 0), ScriptedModel(fixture.model))  # caches warm
        gc.collect()
        gc.disable()
        try:
            gc.collect()
            result = await engine.run(spec_for(fixture, 0), ScriptedModel(fixture.model))
            assert result.terminal.value == "complete"
            del result
            return gc.collect()
        finally:
            gc.enable()

    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        assert runner.run(garbage_of_one_run()) == 0


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [
        ("length", "model_truncated"),
        ("content_filter", "model_refused"),
        ("", "model_incomplete"),
        ("pause_turn", "model_incomplete"),
    ],
)
def test_calls_under_a_stop_reason_the_runner_does_not_know_are_never_dispatched(
    contracts: ContractSet, stop_reason: str, reason: str
) -> None:
    """An adapter of one's own that passes the provider's stop reason on had the calls of a
    reply cut off by `length` sent (a truncated id, a write included): only `tool_use` and
    `end_turn` replies are acted on; any other ends the run `abstain`, `model_incomplete`."""

    class PassesItOn:
        async def generate(self, transcript: Transcript, tools: Any, choice: Any) -> ModelReply:
            call = ToolCall(id="x", name="search_flights", arguments=FLIGHT_ARGS)
            return ModelReply(
                text="",
                tool_calls=(call,),
                usage=TokenUsage(input_tokens=5, output_tokens=2),
                stop_reason=stop_reason,
            )

    result, _, _, _ = drive(make_fixture(), contracts, PassesItOn())
    assert (result.terminal, result.reason) == (State.ABSTAIN, reason)
    assert result.attempts == 0
    assert [r.trigger for r in result.transitions if r.trigger == "classify"] == []


def test_a_reply_of_text_under_an_adapters_own_stop_reason_still_answers(
    contracts: ContractSet,
) -> None:
    class OwnReason:
        async def generate(self, transcript: Transcript, tools: Any, choice: Any) -> ModelReply:
            usage = TokenUsage(input_tokens=5, output_tokens=2)
            return ModelReply(text="done", tool_calls=(), usage=usage, stop_reason="my_own")

    result, _, _, _ = drive(make_fixture(), contracts, OwnReason())
    assert (result.terminal, result.answer) == (State.COMPLETE, "done")
