"""Redact the runtime's credentials by value from everything a run takes in.

A credential (a `RunSpec.credentials` value) reaches a tool through `ToolInvocation` only. Should
it come back in from outside (a model that learned it puts it in an argument or its answer, a tool
echoes it in a payload or an error message), it is replaced by `[redacted]` where the run takes
the input in, before the engine acts on it or records it. So the store, the JSONL log, structlog
events and spans never hold it, a model argument can never carry it out to another tool, and an
exact replay re-drives the very (redacted) inputs the run acted on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Final

from ..base._jsonsafe import safe_str
from ..base.tracing import REDACTED
from ..models.base import ModelRejected, ModelReply, ModelUnavailable
from ..tools._outcomes import exception_name
from ..tools.invocation import ToolResponse
from .recording import Raised, rebuild_outcome

MIN_LENGTH: Final = 4
"""Shorter values are not redacted: replacing every `ab` would garble all text, and a secret that
short protects nothing anyway."""


class Redactor:
    """Replaces every occurrence of each credential value in strings, keys and nested values."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        unique = {secret for secret in secrets if len(secret) >= MIN_LENGTH}
        self._secrets = tuple(sorted(unique, key=len, reverse=True))

    @property
    def active(self) -> bool:
        return bool(self._secrets)

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def value(self, value: Any) -> Any:
        """`value` with every string redacted; the same object when nothing needed it."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            items = [(self.value(k), self.value(v)) for k, v in value.items()]
            changed = any(
                nk is not k or nv is not v
                for (nk, nv), (k, v) in zip(items, value.items(), strict=True)
            )
            return dict(items) if changed else value
        if isinstance(value, list | tuple):
            redacted = [self.value(item) for item in value]
            changed = any(new is not old for new, old in zip(redacted, value, strict=True))
            return redacted if changed else value
        return value

    def reply(self, reply: ModelReply) -> ModelReply:
        if not self._secrets:
            return reply
        calls = tuple(
            dataclasses.replace(
                call,
                id=self.text(call.id),
                name=self.text(call.name),
                arguments=self.value(call.arguments),
                arguments_error=None
                if call.arguments_error is None
                else self.text(call.arguments_error),
            )
            for call in reply.tool_calls
        )
        return dataclasses.replace(
            reply, text=self.text(reply.text), tool_calls=calls, stop_reason=reply.stop_reason
        )

    def outcome(self, outcome: ToolResponse | BaseException) -> ToolResponse | BaseException:
        """A tool's outcome as the run takes it in; an exception whose message held a secret is
        rebuilt as a replay rebuilds it (same class name, redacted message)."""
        if not self._secrets:
            return outcome
        if isinstance(outcome, ToolResponse):
            payload = self.value(outcome.payload)
            retry_after = None if outcome.retry_after is None else self.text(outcome.retry_after)
            if payload is outcome.payload and retry_after == outcome.retry_after:
                return outcome
            return ToolResponse(payload=payload, retry_after=retry_after)
        message = safe_str(outcome)
        redacted = self.text(message)
        if redacted == message:
            return outcome
        return rebuild_outcome(Raised(type=exception_name(outcome), message=redacted))

    def model_error(self, exc: Exception) -> Exception:
        """A failed model request's exception with a redacted message (itself if it had none)."""
        message = safe_str(exc)
        redacted = self.text(message)
        if redacted == message:
            return exc
        if isinstance(exc, ModelUnavailable):
            return ModelUnavailable(redacted, status=exc.status, retry_after=exc.retry_after)
        if isinstance(exc, ModelRejected):
            return ModelRejected(redacted, status=exc.status)
        rebuilt = rebuild_outcome(Raised(type=exception_name(exc), message=redacted))
        return rebuilt if isinstance(rebuilt, Exception) else exc


def model_secrets(model: object) -> tuple[str, ...]:
    """A live model's own credentials (its API key: `secrets` on the adapter), which a provider
    may echo back in a reply or an error message; none for an adapter that declares none."""
    try:
        found = getattr(model, "secrets", ())
    except Exception:  # a hostile adapter's attribute lookup: it declares nothing then
        return ()
    return tuple(item for item in found if isinstance(item, str)) if type(found) is tuple else ()
