"""Typed observations: the closed set of things that can happen in a step.

Every raw outcome maps to exactly one of these (see `classifier.py`). Each is a frozen value whose
`kind` tag is also the `result_class` written to the transition log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, TypeAdapter

from .budget import Bound


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSucceeded:
    """The tool answered with a valid, non-empty result."""

    call_id: str
    tool: str
    result: dict[str, Any]
    kind: Literal["ok"] = "ok"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFoundNothing:
    """A valid query found nothing: a domain result, not a failure."""

    call_id: str
    tool: str
    result: dict[str, Any]
    kind: Literal["empty"] = "empty"


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgumentsRejected:
    """The arguments failed the schema, a semantic rule, or the tool's own check."""

    call_id: str
    tool: str
    field: str | None
    """The offending argument, when one can be named."""
    reason: str
    correctable: bool = True
    """Whether the model can fix this by changing its arguments."""
    kind: Literal["invalid_arguments"] = "invalid_arguments"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRateLimited:
    """The tool refused for rate; `retry_after` is the raw header value, if any."""

    call_id: str
    tool: str
    retry_after: str | None = None
    retryable_hint: bool | None = None
    """What the tool claimed; an untrusted hint the policy ignores."""
    kind: Literal["rate_limited"] = "rate_limited"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFailedTransiently:
    """A read failed in a way that may pass: timeout, service unavailable, connection lost."""

    call_id: str
    tool: str
    reason: Literal["timeout", "service_unavailable", "connection"]
    detail: str = ""
    retryable_hint: bool | None = None
    retry_after: str | None = None
    """The raw Retry-After a `service_unavailable` (a 503) came with, if any: RFC 9110 gives it
    to a 503 as to a 429, and the policy honours it the same way."""
    kind: Literal["transient"] = "transient"


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessDenied:
    """The principal may not do this; retrying under the same authority cannot help."""

    call_id: str
    tool: str
    source: Literal["tool", "runner"]
    """`runner`: refused at admission (tool outside the principal's scopes), never dispatched."""
    detail: str = ""
    kind: Literal["access_denied"] = "access_denied"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFailedPermanently:
    """The request cannot succeed as made (not found, unsupported, the tool crashed)."""

    call_id: str
    tool: str
    reason: str
    detail: str = ""
    retryable_hint: bool | None = None
    kind: Literal["permanent"] = "permanent"


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultMalformed:
    """The tool's output failed its result schema; the model never sees the raw output."""

    call_id: str
    tool: str
    errors: tuple[str, ...]
    kind: Literal["malformed_result"] = "malformed_result"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolUnknown:
    """The model called a tool that does not exist, or one not offered at this step."""

    call_id: str
    tool: str
    may_use: tuple[str, ...] = ()
    """The tools offered at this step, when retrieval chose them (the model is told them)."""
    kind: Literal["unknown_tool"] = "unknown_tool"


@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomeUnknown:
    """A write ended without a response: it may or may not have happened."""

    call_id: str
    tool: str
    reason: str
    kind: Literal["unknown_outcome"] = "unknown_outcome"


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteNotApplied:
    """Reconciliation found no trace of the write under its key: it did not happen."""

    call_id: str
    tool: str
    operation_key: str
    kind: Literal["not_applied"] = "not_applied"


@dataclass(frozen=True, slots=True, kw_only=True)
class RepeatRefused:
    """The same tool with the same canonical arguments already settled, or a write already
    claimed by an earlier call of the same reply; not dispatched again."""

    call_id: str
    tool: str
    first_call_id: str
    first_kind: str
    in_same_reply: bool = False
    """The first call came in the same reply (same operation key): only it was dispatched."""
    kind: Literal["repeat_refused"] = "repeat_refused"


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExhausted:
    """A bound is spent; for a tool call, it was answered without being dispatched."""

    bound: Bound
    call_id: str | None = None
    tool: str | None = None
    detail: str = ""
    kind: Literal["budget_exhausted"] = "budget_exhausted"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequired:
    """A write that needs a person's approval: recorded as a proposal, never dispatched."""

    call_id: str
    tool: str
    operation_key: str
    reasons: tuple[str, ...]
    """Why: `contract`, `policy:tool`, `provenance:<argument>`."""
    kind: Literal["approval_required"] = "approval_required"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDenied:
    """A person denied the write's proposal: never dispatched."""

    call_id: str
    tool: str
    approver: str
    note: str | None = None
    kind: Literal["approval_denied"] = "approval_denied"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelAnswered:
    """The model replied with text and no tool calls."""

    text: str
    kind: Literal["model_final"] = "model_final"


ToolObservation = (
    ToolSucceeded
    | ToolFoundNothing
    | ArgumentsRejected
    | ToolRateLimited
    | ToolFailedTransiently
    | AccessDenied
    | ToolFailedPermanently
    | ResultMalformed
    | ToolUnknown
    | OutcomeUnknown
    | WriteNotApplied
    | RepeatRefused
    | BudgetExhausted
    | ApprovalRequired
    | ApprovalDenied
)
"""Everything a single tool call can come to."""

TypedToolObservation = Annotated[ToolObservation, Discriminator("kind")]
"""`ToolObservation` as a tagged union: read back from JSON by its `kind`."""

Observation = Annotated[ToolObservation | ModelAnswered, Discriminator("kind")]

# Built on first use, not at `import runner`.
OBSERVATION_ADAPTER: TypeAdapter[Observation] = TypeAdapter(
    Observation, config=ConfigDict(defer_build=True)
)

ResultClass = Literal[
    "ok",
    "empty",
    "invalid_arguments",
    "rate_limited",
    "transient",
    "access_denied",
    "permanent",
    "malformed_result",
    "unknown_tool",
    "unknown_outcome",
    "not_applied",
    "repeat_refused",
    "budget_exhausted",
    "approval_required",
    "approval_denied",
    "model_final",
]

RESULT_CLASSES: frozenset[str] = frozenset(ResultClass.__args__)  # type: ignore[attr-defined]
