"""Per-call spans to structlog and OpenTelemetry; secrets never reach either."""

from __future__ import annotations

import logging

import structlog
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner.base.tracing import REDACTED, OtelSpans, summarize
from runner.tools.contracts import ContractSet
from tests.support.driving import drive
from tests.support.travel import FLIGHT_ARGS, make_fixture


def test_secret_looking_arguments_are_redacted_and_long_ones_clipped() -> None:
    summary = summarize(
        {
            "api_key": "sk-live-1",
            "Authorization": "Bearer x",
            "note": "n" * 200,
            "nested": {"password": "p", "ok": 1},
            "items": list(range(9)),
        }
    )
    assert summary["api_key"] == REDACTED and summary["Authorization"] == REDACTED
    assert summary["nested"] == {"password": REDACTED, "ok": 1}
    assert summary["note"].endswith("(200 chars)") and len(summary["note"]) < 120
    assert summary["items"][-1] == "... 4 more"


def test_one_span_event_per_tool_call_with_run_fields_bound_once(
    contracts: ContractSet,
) -> None:
    structlog.reset_defaults()
    fixture = make_fixture(
        environment={
            "search_flights": [
                {
                    "latency_s": 1.5,
                    "respond": {
                        "status": "ok",
                        "options": [{"flight_id": "NH7", "assistance_status": "unknown"}],
                        "source_timestamp": "2027-03-01T09:00:00Z",
                    },
                }
            ]
        },
        model=[
            {
                "tool_calls": [
                    {"name": "search_flights", "args": FLIGHT_ARGS},
                    {"name": "teleport", "args": {"token": "s3cret"}},
                ],
                "usage": {"input": 321, "output": 12},
            },
            {"final": "done"},
        ],
    )
    with structlog.testing.capture_logs() as events:
        result, _, _, _ = drive(fixture, contracts)
    spans = [e for e in events if e["event"] == "tool_call"]
    assert [s["tool"] for s in spans] == ["search_flights", "teleport"]
    first, second = spans
    assert first["run_id"] == result.run_id and first["tenant"] == "optiverse"
    assert first["fixture"] == "inline"
    assert (first["result_class"], first["latency_ms"], first["attempt"]) == ("ok", 1500.0, 2)
    assert (first["model_tokens_in"], first["model_tokens_out"]) == (321, 12)
    assert first["arguments"]["origin"] == "SFO"
    assert second["result_class"] == "unknown_tool"
    assert second["arguments"] == {"token": REDACTED}
    assert "s3cret" not in repr(events)


def test_spans_export_to_opentelemetry(contracts: ContractSet) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    fixture = make_fixture(
        environment={
            "search_flights": [
                {
                    "latency_s": 2,
                    "respond": {
                        "status": "ok",
                        "options": [{"flight_id": "NH7", "assistance_status": "unknown"}],
                        "source_timestamp": "2027-03-01T09:00:00Z",
                    },
                }
            ]
        },
    )
    result, _, _, _ = drive(fixture, contracts, spans=[OtelSpans(provider)])
    [span] = exporter.get_finished_spans()
    assert span.name == "tool search_flights"
    attributes = dict(span.attributes or {})
    assert attributes["runner.run_id"] == result.run_id
    assert attributes["tool.result_class"] == "ok"
    assert attributes["tool.latency_ms"] == 2000.0
    assert span.end_time is not None and span.start_time is not None
    assert span.end_time - span.start_time == 2_000_000_000  # the fake clock's two seconds
