from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import SkipJsonSchema

from runner.core.observations import RESULT_CLASSES
from runner.tools.classifier import classify
from runner.tools.contracts import CompiledContract, ContractSet
from runner.tools.declare import declare_contract
from runner.tools.invocation import ToolResponse
from tests.support.travel import FLIGHTS_OK


def error(code: str, **extra: Any) -> dict[str, Any]:
    return {"status": "error", "error_code": code, "retryable": True, **extra}


@pytest.mark.parametrize(
    ("tool", "outcome", "kind"),
    [
        ("search_flights", ToolResponse(payload=FLIGHTS_OK), "ok"),
        ("search_flights", ToolResponse(payload={**FLIGHTS_OK, "options": []}), "empty"),
        (
            "search_flights",
            ToolResponse(payload=error("invalid_arguments", field="origin")),
            "invalid_arguments",
        ),
        (
            "search_flights",
            ToolResponse(payload=error("rate_limited"), retry_after="5"),
            "rate_limited",
        ),
        ("search_flights", ToolResponse(payload=error("service_unavailable")), "transient"),
        ("search_flights", ToolResponse(payload=error("access_denied")), "access_denied"),
        ("hold_room", ToolResponse(payload=error("not_available")), "permanent"),
        ("search_flights", ToolResponse(payload=""), "malformed_result"),
        ("search_flights", ToolResponse(payload=None), "malformed_result"),
        (
            "search_flights",
            ToolResponse(payload={**FLIGHTS_OK, "options": [1, 2]}),
            "malformed_result",
        ),
        (
            "search_flights",
            ToolResponse(payload={**FLIGHTS_OK, "error_code": "rate_limited"}),
            "malformed_result",
        ),
        ("search_flights", ToolResponse(payload=error("teapot")), "malformed_result"),
        ("search_flights", TimeoutError(), "transient"),
        ("search_flights", ConnectionResetError("reset"), "transient"),
        ("search_flights", RuntimeError("boom"), "permanent"),
        ("search_flights", KeyError("x"), "permanent"),
        ("hold_room", TimeoutError(), "unknown_outcome"),
        ("hold_room", ConnectionResetError(), "unknown_outcome"),
    ],
)
def test_every_raw_outcome_maps_to_exactly_one_class(
    contracts: ContractSet, tool: str, outcome: ToolResponse | BaseException, kind: str
) -> None:
    observation = classify(contracts[tool], "c1", outcome)
    assert observation.kind == kind
    assert observation.kind in RESULT_CLASSES
    assert observation.call_id == "c1"


def test_retry_after_and_hint_are_carried(contracts: ContractSet) -> None:
    observation = classify(
        contracts["search_flights"],
        "c1",
        ToolResponse(payload=error("rate_limited"), retry_after="7"),
    )
    assert observation.kind == "rate_limited"
    assert observation.retry_after == "7"  # type: ignore[union-attr]
    assert observation.retryable_hint is True  # type: ignore[union-attr]


def test_malformed_result_says_what_is_wrong(contracts: ContractSet) -> None:
    observation = classify(
        contracts["search_flights"],
        "c1",
        ToolResponse(payload={**FLIGHTS_OK, "source_timestamp": "noon"}),
    )
    assert observation.kind == "malformed_result"
    assert any("source_timestamp" in e for e in observation.errors)  # type: ignore[union-attr]


def test_exception_detail_names_the_type(contracts: ContractSet) -> None:
    observation = classify(contracts["search_flights"], "c1", RuntimeError("boom"))
    assert observation.detail == "RuntimeError: boom"  # type: ignore[union-attr]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str


class _Reserved(BaseModel):  # a default is not `required` in the schema pydantic writes
    status: Literal["ok"] = "ok"
    reservation_id: str


class _Failed(BaseModel):
    status: Literal["error", "pending"] = "error"
    error_code: str | SkipJsonSchema[None] = None


def _lenient(side_effect: Literal["read", "write"]) -> CompiledContract:
    """A declared contract whose result schema leaves `status` and `error_code` optional."""
    return declare_contract(
        name=f"reserve_{side_effect}",
        description="Reserve stock for an order.",
        arguments=_Args,
        result=_Reserved | _Failed,
        scope="s",
        timeout_s=5,
        side_effect=side_effect,
        reconcile_with="find_reservation" if side_effect == "write" else None,
    )


@pytest.mark.parametrize(
    ("payload", "missing"),
    [
        ({"reservation_id": "S-1"}, "status"),
        ({}, "status"),
        ({"status": "error"}, "error_code"),
    ],
)
def test_a_result_without_status_or_error_code_is_malformed_not_permanent(
    payload: dict[str, Any], missing: str
) -> None:
    """A payload its schema lets through without saying ok or what failed is not a permanent
    failure of reason 'None' (which marks a write failed, never looked up): a read's is
    malformed, and a write's outcome is unknown, so it is looked up by key."""
    read = classify(_lenient("read"), "c1", ToolResponse(payload=payload))
    assert read.kind == "malformed_result"
    assert read.errors[0].startswith(f"{missing}: ")  # type: ignore[union-attr]
    write = classify(_lenient("write"), "c1", ToolResponse(payload=payload))
    assert write.kind == "unknown_outcome"
    assert f"malformed result: {missing}: " in write.reason  # type: ignore[union-attr]


def test_another_status_without_a_code_is_permanent_for_a_read_and_unknown_for_a_write() -> None:
    """A read's other status is a permanent failure named by it; a write's (`pending`) says
    nothing of whether it committed, so its outcome is looked up by key."""
    pending = ToolResponse(payload={"status": "pending"})
    observation = classify(_lenient("read"), "c1", pending)
    assert observation.kind == "permanent"
    assert observation.reason == "status: pending"  # type: ignore[union-attr]
    write = classify(_lenient("write"), "c1", pending)
    assert write.kind == "unknown_outcome"
    assert "'pending' says neither that the write was made" in write.reason  # type: ignore[union-attr]
