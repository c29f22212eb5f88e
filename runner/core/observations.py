"""Typed observations: the closed set of things that can happen in a step.

Every raw outcome maps to exactly one of these (see `classifier.py`). Each is a frozen value whose
`kind` tag is also the `result_class` written to the transition log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

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


_REASON_CHARS: Final = 200


def malformed_reason(errors: tuple[str, ...]) -> str:
    """A `malformed_result`'s reason: the first schema error (`path: message`), cut to one short
    line (a schema message may quote the whole payload), and how many more there are."""
    first = " ".join((errors[0] if errors else "does not match its result schema").split())
    if len(first) > _REASON_CHARS:
        first = first[: _REASON_CHARS - 3] + "..."
    return f"{first} (and {len(errors) - 1} more)" if len(errors) > 1 else first


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


# -- the model's side: what a request to the model came to -----------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelProposed:
    """The model replied with tool calls, under a stop reason they may be acted on under."""

    calls: int
    kind: Literal["model_proposed"] = "model_proposed"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelAnswered:
    """The model replied with text and no tool calls."""

    text: str
    kind: Literal["model_final"] = "model_final"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCutOff:
    """The reply was cut off at the output limit a bound set (or went past it): the bound is
    reached, and the reply's text is kept as the partial answer."""

    bound: Bound
    text: str
    kind: Literal["model_cut_off"] = "model_cut_off"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelUnusable:
    """The provider's reply cannot be acted on: refused, truncated by the provider, incomplete,
    malformed or empty (`reason` names which)."""

    reason: str
    text: str
    kind: Literal["model_unusable"] = "model_unusable"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelLate:
    """The model answered after the run's deadline passed: what it spent counts, what it says
    is not acted on."""

    kind: Literal["model_late"] = "model_late"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelOutOfBudget:
    """No reply, because a bound ran out while asking: the deadline came first, or the
    fallback model's price leaves nothing to ask it with."""

    bound: Bound
    kind: Literal["model_out_of_budget"] = "model_out_of_budget"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelGaveNoReply:
    """No reply: the provider rejected the request, stayed unavailable, or the adapter failed
    (`reason` says which, secret-free)."""

    reason: str
    kind: Literal["model_no_reply"] = "model_no_reply"


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundSpent:
    """A bound is found spent before the next model request: the final tool-free request is
    made instead."""

    bound: Bound
    kind: Literal["bound_spent"] = "bound_spent"


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalAnswered:
    """The final tool-free request after `bound` was spent has been made (or could not be:
    `text` is None then, or when its reply came too late)."""

    bound: Bound
    text: str | None
    kind: Literal["final_answered"] = "final_answered"


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRequested:
    """The run's handle asked for a cancel, and the run is where one is carried out."""

    kind: Literal["cancel_requested"] = "cancel_requested"


PlanObservation = (
    ModelProposed
    | ModelAnswered
    | ModelCutOff
    | ModelUnusable
    | ModelLate
    | ModelOutOfBudget
    | ModelGaveNoReply
    | BoundSpent
    | FinalAnswered
    | CancelRequested
)
"""Everything the `plan` state can come to: a reply, no reply, a spent bound, a cancel."""


# -- one model request that failed: asked again, asked of the fallback, or given up ---------


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelWasUnavailable:
    """The provider answered 429 or 5xx (or could not be reached)."""

    status: str
    retry_after: str | None
    kind: Literal["model_unavailable"] = "model_unavailable"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRejectedRequest:
    """The provider refused the request itself (400, 401, 403...): asking again cannot help."""

    status: str
    message: str
    kind: Literal["model_rejected"] = "model_rejected"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTimedOut:
    """The request ran into the run's deadline."""

    kind: Literal["model_timed_out"] = "model_timed_out"


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterFailed:
    """The adapter raised something else: a bug, which still ends the run in a declared state."""

    name: str
    kind: Literal["model_error"] = "model_error"


RequestFailure = ModelWasUnavailable | ModelRejectedRequest | ModelTimedOut | AdapterFailed
"""How one model request can fail."""


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
