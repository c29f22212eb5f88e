"""What a run took in from the outside world, recorded so the run can be re-driven exactly.

A run's only inputs are model replies and tool outcomes (plus the seed and the clock, which are
injected). Each model reply is a `RecordedTurn`, each dispatched tool call a `RecordedOutput`, both
numbered in the order the engine asked for them. Re-driving the engine on these (see `effects.py`)
reproduces every transition: that is how a killed run resumes and how a stored run replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, NotRequired

from pydantic import ConfigDict, Discriminator, TypeAdapter, with_config
from typing_extensions import TypedDict  # pydantic needs it, not typing's, before 3.12

from ..base._jsonsafe import safe_str
from ..models.base import ModelReply, TokenUsage, ToolCall
from ..tools._outcomes import (
    MALFORMED_OUTPUT,
    MalformedOutput,
    ReplayedError,
    ResponseLost,
    exception_name,
)
from ..tools.invocation import ToolResponse

_DEFERRED: Final = ConfigDict(defer_build=True)
"""Adapters and their schemas are built on first use, not at `import runner`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Responded:
    """The tool answered (whatever the payload)."""

    payload: Any
    retry_after: str | None = None
    form: Literal["response"] = "response"


@dataclass(frozen=True, slots=True, kw_only=True)
class Raised:
    """The call ended with an exception: a timeout, a dropped connection, a crash."""

    type: str
    message: str
    form: Literal["raised"] = "raised"


@dataclass(frozen=True, slots=True, kw_only=True)
class Lost:
    """A write was in flight when the runner died: nobody saw its response."""

    detail: str
    form: Literal["lost"] = "lost"


RawOutcome = Annotated[Responded | Raised | Lost, Discriminator("form")]


def raw_outcome(outcome: ToolResponse | BaseException) -> Responded | Raised | Lost:
    if isinstance(outcome, ToolResponse):
        return Responded(payload=outcome.payload, retry_after=outcome.retry_after)
    if isinstance(outcome, ResponseLost):
        return Lost(detail=str(outcome))
    return Raised(type=exception_name(outcome), message=safe_str(outcome))


_REBUILT: dict[str, type[BaseException]] = {
    MALFORMED_OUTPUT: MalformedOutput,
    "TimeoutError": TimeoutError,
    "ConnectionError": ConnectionError,
    "ConnectionResetError": ConnectionResetError,
    "ConnectionAbortedError": ConnectionAbortedError,
    "ConnectionRefusedError": ConnectionRefusedError,
    "BrokenPipeError": BrokenPipeError,
}


def rebuild_outcome(raw: Responded | Raised | Lost) -> ToolResponse | BaseException:
    """The outcome as the engine first saw it (exception classes the classifier tells apart)."""
    match raw:
        case Responded(payload=payload, retry_after=retry_after):
            return ToolResponse(payload=payload, retry_after=retry_after)
        case Lost(detail=detail):
            return ResponseLost(detail)
        case Raised(type=name, message=message):
            known = _REBUILT.get(name)
            return known(message) if known is not None else ReplayedError(name, message)


class RecordedCall(TypedDict):
    """One tool call of a recorded reply (typed, so a row missing a field does not read back)."""

    id: str
    name: str
    arguments: dict[str, Any]
    arguments_error: NotRequired[str]
    """Only when the arguments were refused (older logs lack it)."""


def _call_json(call: ToolCall) -> RecordedCall:
    data: RecordedCall = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if call.arguments_error is not None:
        data["arguments_error"] = call.arguments_error
    return data


@with_config(_DEFERRED)
@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedTurn:
    """One model request's reply."""

    run_id: str
    ordinal: int
    """1 for the run's first model request, 2 for the second, ..."""
    tool_choice: str
    text: str
    tool_calls: list[RecordedCall]
    input_tokens: int
    output_tokens: int
    stop_reason: str
    started_at: float
    """Seconds since the run started when the request was made."""
    ended_at: float
    """Seconds since the run started when the reply arrived."""
    transcript_digest: str
    """The chained digest of the transcript the model was shown (see `Transcript.digest`)."""
    model_state: dict[str, Any] | None = None
    """What a resumable model adapter needs to continue after this turn."""
    error_status: int | None = None
    """For a failed request: the provider's HTTP status, when there was one."""
    retry_after: str | None = None
    """For a failed request: the provider's Retry-After, when it sent one."""
    usage_estimated: bool = False
    """The token counts are the runner's estimate: the provider gave none it could believe."""
    max_output_tokens: int | None = None
    """The output limit the request was sent with, from the run's budget (None: none was sent:
    an adapter that takes none, or a run recorded before limits were sent). A reply stopped at
    it is the budget's bound, not a model fault; a re-drive must work out the same limit."""
    fallback: bool = False
    """Asked of the adapter's fallback model (the run had switched to it, and its price prices
    the request); False in turns recorded before it was (a re-drive then finds the switch from
    the failed request asked again)."""

    @classmethod
    def of(
        cls,
        *,
        run_id: str,
        ordinal: int,
        tool_choice: str,
        reply: ModelReply,
        started_at: float,
        ended_at: float,
        transcript_digest: str,
        model_state: dict[str, Any] | None,
        max_output_tokens: int | None = None,
        fallback: bool = False,
    ) -> RecordedTurn:
        return cls(
            run_id=run_id,
            ordinal=ordinal,
            tool_choice=tool_choice,
            text=reply.text,
            tool_calls=[_call_json(c) for c in reply.tool_calls],
            input_tokens=reply.usage.input_tokens,
            output_tokens=reply.usage.output_tokens,
            stop_reason=reply.stop_reason,
            usage_estimated=reply.usage.estimated,
            started_at=started_at,
            ended_at=ended_at,
            transcript_digest=transcript_digest,
            model_state=model_state,
            max_output_tokens=max_output_tokens,
            fallback=fallback,
        )

    def reply(self) -> ModelReply:
        return ModelReply(
            text=self.text,
            tool_calls=tuple(
                ToolCall(
                    id=c["id"],
                    name=c["name"],
                    arguments=c["arguments"],
                    arguments_error=c.get("arguments_error"),
                )
                for c in self.tool_calls
            ),
            usage=TokenUsage(
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                estimated=self.usage_estimated,
            ),
            stop_reason=self.stop_reason,
        )


@with_config(_DEFERRED)
@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedOutput:
    """One dispatched tool call's full raw outcome."""

    run_id: str
    ordinal: int
    """1 for the run's first dispatch, 2 for the second, ... (admission order)."""
    call_id: str
    tool: str
    operation_key: str | None
    outcome: RawOutcome
    started_at: float
    """Seconds since the run started when the call was dispatched."""
    ended_at: float
    """Seconds since the run started when the outcome arrived."""


RAW_OUTCOME_ADAPTER: TypeAdapter[Responded | Raised | Lost] = TypeAdapter(
    RawOutcome, config=_DEFERRED
)
Recorded = RecordedTurn | RecordedOutput
"""Any recorded input."""

TURN_ADAPTER: TypeAdapter[RecordedTurn] = TypeAdapter(RecordedTurn)
OUTPUT_ADAPTER: TypeAdapter[RecordedOutput] = TypeAdapter(RecordedOutput)
