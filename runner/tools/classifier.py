"""One classifier: every raw tool outcome becomes exactly one typed observation, read by the
tool's contract (here, beside the contracts, not in `core`: the observations it makes are core's).

Raw outcomes are a `ToolResponse` (whatever payload the tool returned) or the exception the call
ended with. Nothing reaches the model as an empty string or a traceback: a payload that fails its
result schema is `malformed_result`, an exception is named by its type. An answer that is not a
`ToolResponse` of plain JSON arrives as `MalformedOutput` (`effects.py`) and is malformed too.
"""

from __future__ import annotations

from typing import Any

from ..core.observations import (
    AccessDenied,
    ArgumentsRejected,
    OutcomeUnknown,
    ResultMalformed,
    ToolFailedPermanently,
    ToolFailedTransiently,
    ToolFoundNothing,
    ToolObservation,
    ToolRateLimited,
    ToolSucceeded,
    malformed_reason,
)
from ._outcomes import MalformedOutput, describe_exception
from .contracts import CompiledContract
from .invocation import ToolResponse

__all__ = ["classify", "malformed_reason"]  # the reason's text is core's; found here too


def classify(
    contract: CompiledContract, call_id: str, outcome: ToolResponse | BaseException
) -> ToolObservation:
    """Map one raw outcome of a dispatched call to its observation."""
    tool = contract.name
    is_write = contract.contract.side_effect == "write"
    if isinstance(outcome, MalformedOutput):  # not a ToolResponse of plain JSON
        if is_write:
            return OutcomeUnknown(call_id=call_id, tool=tool, reason=f"malformed result: {outcome}")
        return ResultMalformed(call_id=call_id, tool=tool, errors=(str(outcome),))
    if isinstance(outcome, BaseException):
        return _classify_exception(tool, call_id, outcome, is_write=is_write)
    errors = contract.check_result(outcome.payload)
    if errors:
        if is_write:  # a garbled answer from a write does not say whether it happened
            return OutcomeUnknown(
                call_id=call_id, tool=tool, reason=f"malformed result: {errors[0]}"
            )
        return ResultMalformed(call_id=call_id, tool=tool, errors=errors)
    payload: dict[str, Any] = outcome.payload  # type: ignore[assignment]  # schema-checked object
    status = payload.get("status")
    if status == "ok":
        field = contract.contract.results_field
        if field is not None and not payload.get(field):
            return ToolFoundNothing(call_id=call_id, tool=tool, result=payload)
        return ToolSucceeded(call_id=call_id, tool=tool, result=payload)
    broken = _convention_broken(status, payload, is_write=is_write)
    if broken is not None:  # the schema let it through, but it says neither ok nor what failed
        if is_write:
            return OutcomeUnknown(call_id=call_id, tool=tool, reason=f"malformed result: {broken}")
        return ResultMalformed(call_id=call_id, tool=tool, errors=(broken,))
    return _classify_error(tool, call_id, payload, outcome.retry_after, is_write=is_write)


def _convention_broken(status: object, payload: dict[str, Any], *, is_write: bool) -> str | None:
    """Why a payload that passed its schema still cannot be read by the tool-result convention,
    or None. A schema may leave `status` or `error_code` optional (a pydantic field with a
    default is not `required`); an answer without them says nothing of what happened, so it is
    malformed (a write's is then looked up by key), never a permanent failure of reason 'None'.
    Nor does a write's other status without a code (`pending`): it may have committed."""
    if status is None:
        return "status: a result states its status ('ok' or 'error'), and this one has none"
    if not isinstance(status, str):
        return f"status: a result states its status as text, not {type(status).__name__}"
    code = payload.get("error_code")
    if status == "error" and not isinstance(code, str):
        return "error_code: an error result states its code as text, and this one does not"
    if is_write and status != "error" and not isinstance(code, str):
        return f"status: {status!r} says neither that the write was made nor why it was not"
    return None


def _classify_exception(
    tool: str, call_id: str, exc: BaseException, *, is_write: bool
) -> ToolObservation:
    detail = describe_exception(exc)
    if is_write:  # raised after it committed, as before: only a lookup by key can tell (a
        # write that did not happen says so with a typed error, the tool-result convention)
        return OutcomeUnknown(call_id=call_id, tool=tool, reason=detail)
    if isinstance(exc, TimeoutError | ConnectionError):
        if isinstance(exc, TimeoutError):
            return ToolFailedTransiently(
                call_id=call_id, tool=tool, reason="timeout", detail=detail
            )
        return ToolFailedTransiently(call_id=call_id, tool=tool, reason="connection", detail=detail)
    return ToolFailedPermanently(call_id=call_id, tool=tool, reason="tool_error", detail=detail)


def _classify_error(
    tool: str,
    call_id: str,
    payload: dict[str, Any],
    retry_after: str | None,
    *,
    is_write: bool = False,
) -> ToolObservation:
    code = payload.get("error_code")
    if not isinstance(code, str):  # another status the schema allows, with no code: its name
        code = f"status: {payload['status']}"
    hint = payload.get("retryable")
    hint = hint if isinstance(hint, bool) else None
    message = str(payload.get("message", ""))
    match code:
        case "invalid_arguments":
            field = payload.get("field")
            return ArgumentsRejected(
                call_id=call_id,
                tool=tool,
                field=field if isinstance(field, str) else None,
                reason=message or "the tool rejected the arguments",
            )
        case "access_denied":
            return AccessDenied(call_id=call_id, tool=tool, source="tool", detail=message)
        case "outcome_unknown" if is_write:  # the tool says it cannot tell what became of it
            return OutcomeUnknown(call_id=call_id, tool=tool, reason=message or code)
        case "rate_limited":
            return ToolRateLimited(
                call_id=call_id, tool=tool, retry_after=retry_after, retryable_hint=hint
            )
        case "service_unavailable":
            return ToolFailedTransiently(
                call_id=call_id,
                tool=tool,
                reason="service_unavailable",
                detail=message,
                retryable_hint=hint,
                retry_after=retry_after,
            )
        case _:
            return ToolFailedPermanently(
                call_id=call_id, tool=tool, reason=code, detail=message, retryable_hint=hint
            )
