from typing import Any

import pytest

from runner.classifier import classify
from runner.contracts import ContractSet
from runner.observations import RESULT_CLASSES
from runner.tools import ToolResponse

from .conftest import FLIGHTS_OK


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
