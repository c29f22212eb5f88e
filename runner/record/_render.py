"""How an observation is shown to the model: a deterministic JSON body, never a bare string.

A result larger than the render limit is shown as its head and tail with a marker saying how much
was elided and where the full output is; the same result always renders to the same text, so the
transcript stays an exact growing prefix.
"""

from __future__ import annotations

from typing import Any, assert_never

from ..core.observations import (
    AccessDenied,
    ApprovalDenied,
    ApprovalRequired,
    ArgumentsRejected,
    BudgetExhausted,
    OutcomeUnknown,
    RepeatRefused,
    ResultMalformed,
    ToolFailedPermanently,
    ToolFailedTransiently,
    ToolFoundNothing,
    ToolObservation,
    ToolRateLimited,
    ToolSucceeded,
    ToolUnknown,
    WriteNotApplied,
)
from ..models.transcript import render_json


def error_detail(observation: ToolObservation) -> dict[str, Any]:
    """The typed error the model reads for a failed call."""
    match observation:
        case ArgumentsRejected(field=field, reason=reason, correctable=correctable):
            return {"field": field, "reason": reason, "correctable": correctable}
        case ToolRateLimited():
            return {"reason": "rate limited; the runner decides any retry"}
        case ToolFailedTransiently(reason=reason, detail=detail):
            return {"reason": reason, "detail": detail}
        case AccessDenied(source=source, detail=detail):
            return {"reason": "access denied", "source": source, "detail": detail}
        case ToolFailedPermanently(reason=reason, detail=detail):
            return {"reason": reason, "detail": detail, "retry_same_call": False}
        case ResultMalformed(errors=errors):
            return {"reason": "the tool's output failed its result schema", "errors": list(errors)}
        case ToolUnknown(tool=tool, may_use=may_use) if may_use:
            return {"reason": f"no tool named {tool!r} is offered now", "may_use": list(may_use)}
        case ToolUnknown(tool=tool):
            return {"reason": f"no tool named {tool!r} is available"}
        case OutcomeUnknown(reason=reason):
            return {"reason": "the write's outcome is unknown", "detail": reason}
        case WriteNotApplied():
            return {"reason": "the write did not happen (checked by its operation key)"}
        case RepeatRefused(first_call_id=first, first_kind=kind):
            return {
                "reason": "same call already answered; not repeated",
                "see_call_id": first,
                "earlier_result_class": kind,
            }
        case BudgetExhausted(bound=bound, detail=detail):
            return {"reason": f"budget spent: {bound}", "detail": detail}
        case ApprovalRequired(reasons=reasons):
            return {
                "reason": "this write needs a person's approval; it was not sent",
                "why": list(reasons),
            }
        case ApprovalDenied():
            return {"reason": "a person denied this write; it was not sent"}
        case ToolSucceeded() | ToolFoundNothing():  # shown as a result, never as an error
            return {"reason": observation.kind}
        case unreachable:
            assert_never(unreachable)


def model_view(observation: ToolObservation, attempts_left: int) -> tuple[dict[str, Any], bool]:
    """The body of the tool-result message and whether it is an error."""
    body: dict[str, Any] = {
        "call_id": observation.call_id,
        "tool": observation.tool,
        "result_class": observation.kind,
        "attempts_left": attempts_left,
    }
    if isinstance(observation, ToolSucceeded | ToolFoundNothing):
        body["result"] = observation.result
        return body, False
    body["error"] = error_detail(observation)
    return body, True


def render_for_model(
    body: dict[str, Any], *, limit: int, run_id: str, call_id: str
) -> tuple[str, int]:
    """The text of a tool-result message, truncated to about `limit` characters, and the length
    it would have had in full."""
    full = render_json(body)
    if len(full) <= limit or "result" not in body:
        return full, len(full)
    result = render_json(body["result"])
    elided = len(result) - limit
    head, tail = result[: limit * 3 // 4], result[len(result) - limit // 4 :]
    marker = (
        f" ...[{elided} of {len(result)} characters elided; full output: "
        f"runner artifact {run_id} {call_id}]... "
    )
    shown = {**body, "result": f"{head}{marker}{tail}", "truncated": True}
    return render_json(shown), len(full)
