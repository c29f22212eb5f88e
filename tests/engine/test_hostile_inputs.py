"""Nothing a tool or a model sends may crash a run (issue 9, item 5).

Each hostile outcome or reply below used to raise out of `Engine.run` and leave the run
"(running)". Now each is classified and handled by the policy; the run ends declared with one
terminal record, the store reads every row back, and the stored run replays exactly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, model_validator

from runner.core.policy import parse_retry_after
from runner.models.base import ModelReply, ModelUnavailable, TokenUsage, ToolCall
from runner.store import MemoryStore, SqliteStore
from runner.store.base import Store
from runner.tools.contracts import ContractSet
from runner.tools.invocation import ToolResponse
from tests.support.hostile_runs import (
    FLIGHTS_OK,
    START,
    OneOutcome,
    ReplyList,
    answer,
    assert_declared,
    assert_replays,
    calls,
    engine,
    hold,
    search,
    spec,
    usage,
)
from tests.support.travel import FLIGHT_ARGS


class Opaque:
    """A value no JSON encoder knows."""


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message for you")


class Custom(BaseException):
    """A BaseException that is neither cancellation nor an Exception."""


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"x": [value]}
    return value


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "r.db")
    yield opened
    opened.close()


def ok_with(**fields: Any) -> dict[str, Any]:
    return {**FLIGHTS_OK, "options": [{**FLIGHTS_OK["options"][0], **fields}]}


# (outcome the tool returns or raises, the class its read call must get)
TOOL_OUTCOMES: dict[str, tuple[Callable[[], object], str]] = {
    "lone surrogate in payload": (
        lambda: ToolResponse(payload=ok_with(flight_id="NH\ud8007")),
        "ok",
    ),
    "set": (lambda: ToolResponse(payload={"status": "ok", "options": {1, 2}}), "malformed_result"),
    "bytes": (lambda: ToolResponse(payload=b"\xff"), "malformed_result"),
    "nan": (lambda: ToolResponse(payload=ok_with(price=math.nan)), "malformed_result"),
    "infinity": (lambda: ToolResponse(payload=ok_with(price=-math.inf)), "malformed_result"),
    "int past 2**64": (lambda: ToolResponse(payload=ok_with(n=2**64)), "malformed_result"),
    "int below -2**63": (lambda: ToolResponse(payload=ok_with(n=-(2**63) - 1)), "malformed_result"),
    "int past 4300 digits": (lambda: ToolResponse(payload=ok_with(n=10**5000)), "malformed_result"),
    "non-string key": (lambda: ToolResponse(payload={"status": "ok", 1: 2}), "malformed_result"),
    "custom object": (lambda: ToolResponse(payload=ok_with(x=Opaque())), "malformed_result"),
    "nesting 100 deep": (lambda: ToolResponse(payload=ok_with(x=nested(100))), "malformed_result"),
    "nesting 100000 deep": (lambda: ToolResponse(payload=nested(100_000)), "malformed_result"),
    "a dict, not a ToolResponse": (lambda: FLIGHTS_OK, "malformed_result"),
    "None": (lambda: None, "malformed_result"),
    "retry_after not a string": (
        lambda: ToolResponse(payload=FLIGHTS_OK, retry_after=5),  # type: ignore[arg-type]
        "malformed_result",
    ),
    "custom BaseException": (lambda: Custom("boom"), "permanent"),
    "SystemExit": (lambda: SystemExit(3), "permanent"),
    "KeyboardInterrupt raised by the tool": (KeyboardInterrupt, "permanent"),
    "GeneratorExit": (GeneratorExit, "permanent"),
    "CancelledError raised by the tool": (asyncio.CancelledError, "permanent"),
    "RecursionError": (lambda: RecursionError("deep"), "permanent"),
    "message with a lone surrogate": (lambda: ValueError("bad \udcff byte"), "permanent"),
    "unprintable exception": (Unprintable, "permanent"),
}


@pytest.mark.parametrize("case", list(TOOL_OUTCOMES))
def test_any_tool_outcome_of_a_read_is_classified(
    case: str, store: Store, contracts: ContractSet
) -> None:
    outcome, expected = TOOL_OUTCOMES[case]
    result = engine(contracts, OneOutcome(outcome()), store).run_sync(
        spec(), ReplyList([search(), answer("no flight")])
    )
    assert_declared(store, result)
    classified = [r.result_class for r in result.transitions if r.trigger == "classify"]
    assert classified == [expected]
    assert result.terminal.value == "complete"  # back to the model, which then answered
    assert_replays(store, contracts, result.run_id)


@pytest.mark.parametrize(
    "case", [c for c, (_, expected) in TOOL_OUTCOMES.items() if expected == "malformed_result"]
)
def test_a_write_answered_with_anything_unreadable_is_reconciled(
    case: str, store: Store, contracts: ContractSet
) -> None:
    """A garbled answer from a write does not say whether it happened: it is looked up by key."""
    outcome, _ = TOOL_OUTCOMES[case]
    result = engine(contracts, OneOutcome(outcome()), store).run_sync(
        spec(), ReplyList([hold(), answer("not held")])
    )
    assert_declared(store, result)
    classified = [r.result_class for r in result.transitions if r.trigger == "classify"]
    assert classified[:2] == ["unknown_outcome", "not_applied"]
    assert_replays(store, contracts, result.run_id)


def reply(**fields: Any) -> ModelReply:
    base: dict[str, Any] = {"text": "", "tool_calls": (), "usage": usage(), "stop_reason": "x"}
    return ModelReply(**{**base, **fields})


def flight_call(**arguments: Any) -> ToolCall:
    return ToolCall(id="c1", name="search_flights", arguments=arguments)


# (the model's reply, the run's terminal and reason, the first classified call's class)
MODEL_REPLIES: dict[str, tuple[Callable[[], object], str, str, str | None]] = {
    "text with a lone surrogate": (
        lambda: answer("fine \ud800"),
        "complete",
        "model_final",
        None,
    ),
    "stop_reason with a lone surrogate": (
        lambda: reply(text="fine", stop_reason="end\udfff"),
        "complete",
        "model_final",
        None,
    ),
    "argument with a lone surrogate": (
        lambda: calls(flight_call(origin="S\ud800O")),
        "complete",
        "model_final",
        "invalid_arguments",
    ),
    "argument key with a lone surrogate": (
        lambda: calls(flight_call(**{"\ud800": 1})),
        "complete",
        "model_final",
        "invalid_arguments",
    ),
    "argument that is a set": (
        lambda: calls(flight_call(origin={1})),
        "complete",
        "model_final",
        "invalid_arguments",
    ),
    "argument that is NaN": (
        lambda: calls(flight_call(max_results=math.nan)),
        "complete",
        "model_final",
        "invalid_arguments",
    ),
    "argument past 2**64": (
        lambda: calls(flight_call(max_results=2**70)),
        "complete",
        "model_final",
        "invalid_arguments",
    ),
    "non-string argument key": (
        lambda: calls(ToolCall(id="c1", name="search_flights", arguments={1: 1})),  # type: ignore[dict-item]
        "complete",
        "model_final",
        "invalid_arguments",
    ),
    "argument that is an object": (
        lambda: calls(flight_call(origin=Opaque())),
        "complete",
        "model_final",
        "invalid_arguments",
    ),
    "arguments nested 100000 deep": (
        lambda: calls(flight_call(origin=nested(100_000))),
        "complete",
        "model_final",
        "invalid_arguments",
    ),
    "arguments that are a list": (
        lambda: calls(ToolCall(id="c1", name="search_flights", arguments=[1])),  # type: ignore[arg-type]
        "complete",
        "model_final",
        "invalid_arguments",
    ),
    "call id with a lone surrogate": (
        lambda: search(call_id="c\ud800"),
        "complete",
        "model_final",
        "ok",
    ),
    "tool name with a lone surrogate": (
        lambda: calls(ToolCall(id="c1", name="search\ud800", arguments={})),
        "complete",
        "model_final",
        "unknown_tool",
    ),
    "text that is None": (lambda: reply(text=None), "abstain", "model_error: MalformedReply", None),
    # Usage that cannot be believed is replaced by the runner's estimate (issue 18), not fatal.
    "negative token count": (
        lambda: reply(text="x", usage=TokenUsage(input_tokens=-1, output_tokens=0)),
        "complete",
        "model_final",
        None,
    ),
    # Usage that cannot be believed is replaced by the runner's estimate (issue 18), not fatal.
    "token count past 2**64": (
        lambda: reply(text="x", usage=TokenUsage(input_tokens=2**64, output_tokens=0)),
        "complete",
        "model_final",
        None,
    ),
    "tool call that is a dict": (
        lambda: reply(tool_calls=({"id": "c1"},)),
        "abstain",
        "model_error: MalformedReply",
        None,
    ),
    "not a ModelReply": (lambda: "hello", "abstain", "model_error: MalformedReply", None),
    "adapter raises SystemExit": (
        lambda: SystemExit(1),
        "abstain",
        "model_error: SystemExit",
        None,
    ),
    "adapter raises a custom BaseException": (
        Custom,
        "abstain",
        "model_error: Custom",
        None,
    ),
    "adapter error message with a lone surrogate": (
        lambda: ValueError("\udcff"),
        "abstain",
        "model_error: ValueError",
        None,
    ),
    # Redaction read its message with str(): the RuntimeError that raised was recorded as the
    # model's error, and the replay (of the recorded Unprintable) diverged.
    "adapter error whose message cannot be printed": (
        Unprintable,
        "abstain",
        "model_error: Unprintable",
        None,
    ),
}


@pytest.mark.parametrize("case", list(MODEL_REPLIES))
def test_any_model_reply_ends_the_run_declared(
    case: str, store: Store, contracts: ContractSet
) -> None:
    make, terminal, reason, first_class = MODEL_REPLIES[case]
    toolbox = OneOutcome(ToolResponse(payload=FLIGHTS_OK))
    result = engine(contracts, toolbox, store).run_sync(spec(), ReplyList([make()]))
    assert_declared(store, result)
    assert (result.terminal.value, result.reason) == (terminal, reason)
    classified = [r.result_class for r in result.transitions if r.trigger == "classify"]
    assert classified[:1] == ([first_class] if first_class else [])
    if first_class == "invalid_arguments":
        assert toolbox.invocations == []  # nothing the model did not mean is dispatched
    if "token count" in case:  # counted by the runner's own estimate, and recorded as such
        assert [turn.usage_estimated for turn in store.turns(result.run_id)] == [True]
        assert 0 <= result.tokens_in < 2**31
    assert_replays(store, contracts, result.run_id)


def test_cancelling_the_run_itself_still_propagates(contracts: ContractSet) -> None:
    """A tool may not swallow the run's own cancellation (Ctrl-C, a service shutting down)."""
    started = asyncio.Event()

    class Slow:
        def implementation(self, tool: str) -> Any:
            async def wait(invocation: Any) -> ToolResponse:
                started.set()
                await asyncio.Event().wait()
                raise AssertionError("never reached")

            return wait

    runs = engine(contracts, Slow(), MemoryStore())

    async def scenario() -> None:
        running = asyncio.ensure_future(runs.run(spec(), ReplyList([search()])))
        await started.wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    with asyncio.Runner(loop_factory=runs.clock.loop_factory) as runner:  # a FakeClock's loop
        runner.run(scenario())


def test_huge_retry_after_is_a_wait_that_never_fits(store: Store, contracts: ContractSet) -> None:
    limited = {"status": "error", "error_code": "rate_limited", "retryable": True}
    toolbox = OneOutcome(ToolResponse(payload=limited, retry_after="9" * 5000))
    result = engine(contracts, toolbox, store).run_sync(spec(), ReplyList([search()]))
    assert_declared(store, result)
    assert (result.terminal.value, result.reason) == ("abstain", "deadline")
    assert parse_retry_after("9" * 400, START) == math.inf


def test_model_retry_after_that_is_not_a_string_falls_back_to_backoff(
    store: Store, contracts: ContractSet
) -> None:
    busy = ModelUnavailable("busy", status=503, retry_after=object())  # type: ignore[arg-type]
    result = engine(contracts, OneOutcome(None), store).run_sync(
        spec(), ReplyList([busy, answer("fine")])
    )
    assert_declared(store, result)
    assert (result.terminal.value, result.reason) == ("complete", "model_final")


@pytest.mark.parametrize("snapshot", [lambda: {"at": {1, 2}}, lambda: 1 / 0, lambda: "x"])
def test_an_adapter_snapshot_that_is_not_a_json_object_is_not_recorded(
    snapshot: Callable[[], object], store: Store, contracts: ContractSet
) -> None:
    model = ReplyList([search(), answer("fine")])
    model.snapshot = snapshot  # type: ignore[attr-defined]
    result = engine(contracts, OneOutcome(ToolResponse(payload=FLIGHTS_OK)), store).run_sync(
        spec(), model
    )
    assert_declared(store, result)
    assert [turn.model_state for turn in store.turns(result.run_id)] == [None, None]


def test_a_tool_cancelling_its_own_task_in_a_batch_is_its_outcome(
    store: Store, contracts: ContractSet
) -> None:
    """Calls of one batch run as tasks of their own; a tool cancelling its task is not the run
    being cancelled."""

    class SelfCancelling:
        def implementation(self, tool: str) -> Any:
            async def cancel_self(invocation: Any) -> ToolResponse:
                task = asyncio.current_task()
                assert task is not None
                task.cancel()
                await asyncio.sleep(0)
                raise AssertionError("never reached")

            return cancel_self

    batch = calls(
        ToolCall(id="c1", name="search_flights", arguments=dict(FLIGHT_ARGS)),
        ToolCall(id="c2", name="search_flights", arguments={**FLIGHT_ARGS, "origin": "LAX"}),
    )
    result = engine(contracts, SelfCancelling(), store).run_sync(
        spec(), ReplyList([batch, answer("none")])
    )
    assert_declared(store, result)
    classified = [r.result_class for r in result.transitions if r.trigger == "classify"]
    assert classified == ["permanent", "permanent"]
    assert_replays(store, contracts, result.run_id)


def test_a_semantic_rule_that_breaks_on_the_arguments_rejects_them(
    store: Store, contracts: ContractSet
) -> None:
    class Breaks(BaseModel):
        @model_validator(mode="after")
        def _rule(self) -> Breaks:
            raise TypeError("a rule with a bug")

    broken = ContractSet(
        dataclasses.replace(c, rules=Breaks) if c.name == "search_flights" else c
        for c in contracts.values()
    )
    toolbox = OneOutcome(ToolResponse(payload=FLIGHTS_OK))
    result = engine(broken, toolbox, store).run_sync(spec(), ReplyList([search(), answer("no")]))
    assert_declared(store, result)
    [rejected] = [r for r in result.transitions if r.trigger == "classify"]
    assert rejected.result_class == "invalid_arguments"
    assert rejected.reason == "the semantic rules failed: TypeError"
    assert toolbox.invocations == []


@pytest.mark.parametrize("returns", [True, False])
def test_a_tool_that_is_not_async_is_a_tool_error(
    returns: bool, store: Store, contracts: ContractSet
) -> None:
    """A plain function as a tool: returning (not awaitable) or raising before any await."""

    def plain(invocation: Any) -> ToolResponse:
        if returns:
            return ToolResponse(payload=FLIGHTS_OK)
        raise ValueError("raised while being called")

    class Plain:
        def implementation(self, tool: str) -> Any:
            return plain

    result = engine(contracts, Plain(), store).run_sync(spec(), ReplyList([search(), answer("no")]))
    assert_declared(store, result)
    [call] = [r for r in result.transitions if r.trigger == "classify"]
    assert (call.result_class, call.reason) == ("permanent", "tool_error")
