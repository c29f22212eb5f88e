"""Per-call spans: one per tool call, to structlog always and to OpenTelemetry when asked.

A span carries the tool, a summary of its arguments (anything that looks like a secret redacted,
long values clipped), the result class, the attempt count, latency, operation key, and the tokens
of the model request that proposed the call. OpenTelemetry is an optional extra
(`pip install 'runner-fsm[otel]'`); `OtelSpans` imports it only when built.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

_SECRET: Final = re.compile(
    r"token|secret|passw|credential|api.?key|authori[sz]ation|auth|cookie|session|private",
    re.IGNORECASE,
)
REDACTED: Final = "[redacted]"


@functools.lru_cache(maxsize=1024)
def _is_secret(name: str) -> bool:
    """Argument names repeat from call to call: remember the verdict."""
    return _SECRET.search(name) is not None


_PLAIN: Final = (int, float, bool, type(None))


def summarize(value: Any, *, clip: int = 80, depth: int = 2) -> Any:
    """A log-safe view of arguments: secret-looking keys redacted, long strings clipped."""
    if isinstance(value, _PLAIN) or (isinstance(value, str) and len(value) <= clip):
        return value
    if isinstance(value, dict):
        if depth == 0:
            return f"{{{len(value)} keys}}"
        return {
            str(k): REDACTED if _is_secret(str(k)) else summarize(v, clip=clip, depth=depth - 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        if depth == 0:
            return f"[{len(value)} items]"
        shown = [summarize(v, clip=clip, depth=depth - 1) for v in value[:5]]
        return [*shown, f"... {len(value) - 5} more"] if len(value) > 5 else shown
    if isinstance(value, str) and len(value) > clip:
        return f"{value[:clip]}... ({len(value)} chars)"
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpan:
    run_id: str
    tenant: str
    fixture: str
    tool: str
    call_id: str
    arguments: dict[str, Any]
    """Already summarized and redacted."""
    result_class: str
    attempt: int
    latency_ms: float | None
    operation_key: str | None
    model_tokens_in: int
    model_tokens_out: int
    started_at: datetime
    ended_at: datetime

    def fields(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "call_id": self.call_id,
            "arguments": self.arguments,
            "result_class": self.result_class,
            "attempt": self.attempt,
            "latency_ms": self.latency_ms,
            "operation_key": self.operation_key,
            "model_tokens_in": self.model_tokens_in,
            "model_tokens_out": self.model_tokens_out,
        }


class SpanSink(Protocol):
    def tool_span(self, span: ToolSpan) -> None: ...


def _nanoseconds(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


class OtelSpans:
    """Exports every tool span to OpenTelemetry, with the run's own start and end times."""

    def __init__(self, tracer_provider: Any = None) -> None:
        from opentelemetry import trace  # noqa: PLC0415  # an optional extra, loaded on demand

        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("runner")

    def tool_span(self, span: ToolSpan) -> None:
        attributes: dict[str, Any] = {
            "runner.run_id": span.run_id,
            "runner.tenant": span.tenant,
            "runner.fixture": span.fixture,
            "tool.name": span.tool,
            "tool.call_id": span.call_id,
            "tool.arguments": repr(span.arguments),
            "tool.result_class": span.result_class,
            "runner.attempt": span.attempt,
            "model.tokens_in": span.model_tokens_in,
            "model.tokens_out": span.model_tokens_out,
        }
        if span.latency_ms is not None:
            attributes["tool.latency_ms"] = span.latency_ms
        if span.operation_key is not None:
            attributes["tool.operation_key"] = span.operation_key
        otel_span = self._tracer.start_span(
            f"tool {span.tool}", start_time=_nanoseconds(span.started_at), attributes=attributes
        )
        otel_span.end(end_time=_nanoseconds(span.ended_at))
