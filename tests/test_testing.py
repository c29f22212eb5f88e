"""`runner.testing`: a function as the model, a tool double that records its calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import Engine, FunctionTools, MemoryStore, Principal, RunSpec, load_contracts
from runner.models.base import ToolSpec
from runner.models.transcript import Transcript
from runner.testing import (
    FakeClock,
    FunctionModel,
    Reply,
    ToolDouble,
    call,
    latest_results,
    scripted,
)
from runner.tools.invocation import ToolResponse
from tests.support.paths import ROOT

ORDER = {"status": "ok", "order_id": "A-1", "state": "lost", "amount_cents": 900}
SPEC = RunSpec(
    task="Refund A-1 if it was lost.",
    tenant="t",
    principal=Principal(id="bot", scopes=frozenset({"orders.read", "orders.refund"})),
    tools=("lookup_order", "refund_order"),
)


def _engine(**tools: ToolDouble) -> Engine:
    return Engine(
        contracts=load_contracts(ROOT / "examples" / "contracts"),
        toolbox=FunctionTools(dict(tools)),
        store=MemoryStore(),
        clock=FakeClock(),
    )


def test_an_async_function_model_sees_the_results_and_the_offered_tools() -> None:
    seen: list[tuple[list[str], tuple[str, ...]]] = []

    async def agent(transcript: Transcript, tools: tuple[ToolSpec, ...]) -> Reply:
        results = latest_results(transcript)
        seen.append(([r.result_class for r in results], tuple(t.name for t in tools)))
        if not results:
            return [call("lookup_order", order_id="A-1"), call("lookup_order", order_id="A-2")]
        return "Looked both up."

    lookup = ToolDouble(ORDER, {"status": "error", "error_code": "not_found", "retryable": False})
    model = FunctionModel(agent)
    result = _engine(lookup_order=lookup).run_sync(SPEC, model)
    assert result.terminal.value == "complete" and result.answer == "Looked both up."
    assert seen == [
        ([], ("lookup_order", "refund_order")),
        (["ok", "permanent"], ("lookup_order", "refund_order")),
    ]
    assert lookup.arguments == [{"order_id": "A-1"}, {"order_id": "A-2"}]
    assert model.requests == 2
    assert [t.call_id for t in result.transitions if t.trigger == "classify"] == [
        "call_1_0",
        "call_1_1",
    ]


def test_a_tool_double_answers_in_order_repeats_the_last_raises_and_computes() -> None:
    refunds = ToolDouble(
        ConnectionResetError("lost"),
        lambda invocation: ToolResponse(payload={"status": "ok", "refund_id": "R-1"}),
    )
    find = ToolDouble({"status": "ok", "found": False})
    lookup = ToolDouble(ORDER)

    def agent(transcript: Transcript, tools: tuple[ToolSpec, ...]) -> Reply:
        if len(transcript.messages) == 2:
            return call("lookup_order", order_id="A-1")
        if len(transcript.messages) == 4:
            return call("refund_order", order_id="A-1", amount_cents=900)
        return "done"

    result = _engine(lookup_order=lookup, refund_order=refunds, find_refund=find).run_sync(
        SPEC,
        FunctionModel(agent),
    )
    classified = [
        (t.result_class, t.decision) for t in result.transitions if t.trigger == "classify"
    ]
    assert classified == [
        ("ok", "continue"),
        ("unknown_outcome", "reconcile"),  # the first answer raised: looked up by key
        ("not_applied", "retry"),
        ("ok", "continue"),  # the second, computed from the invocation (and repeated)
    ]
    assert len(refunds.calls) == 2 and len(find.calls) == 1
    assert refunds.calls[0].operation_key == refunds.calls[1].operation_key is not None
    assert result.answer == "done"
    with pytest.raises(ValueError, match="at least one answer"):
        ToolDouble()


def test_the_scripted_model_from_fixture_turns(tmp_path: Path) -> None:
    model = scripted(
        {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1"}}]}, {"final": "ok"}
    )
    result = _engine(lookup_order=ToolDouble(ORDER)).run_sync(SPEC, model)
    assert result.answer == "ok" and result.attempts == 1


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def test_a_function_model_leaves_arguments_with_no_json_to_the_runner() -> None:
    """Its usage estimate rendered every call's arguments, so arguments nested too deep, or
    cyclic, ended the run `model_error` before the runner could answer them
    `invalid_arguments`, as it does the same call from any other adapter."""
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    for hostile in (_nested(100_000), cyclic):
        lookup = ToolDouble(ORDER)

        def agent(
            transcript: Transcript, tools: tuple[ToolSpec, ...], bad: object = hostile
        ) -> Reply:
            if latest_results(transcript):
                return "It could not be looked up."
            return call("lookup_order", order_id=bad)

        result = _engine(lookup_order=lookup).run_sync(SPEC, FunctionModel(agent))
        assert (result.terminal.value, result.reason) == ("complete", "model_final")
        classes = [r.result_class for r in result.transitions if r.trigger == "classify"]
        assert classes == ["invalid_arguments"] and lookup.calls == []
