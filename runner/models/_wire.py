"""Shared pieces of the provider adapters: argument parsing and status mapping."""

from __future__ import annotations

import json
from typing import Any

from .base import ModelRejected, ModelUnavailable

# Statuses worth asking again later (the runner's policy decides when); everything else is final.
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """A provider's tool arguments as an object, or ({}, why not)."""
    if isinstance(raw, dict):
        return raw, None
    if not isinstance(raw, str):
        return {}, f"expected a JSON object, got {type(raw).__name__}"
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return {}, f"{exc.msg} at column {exc.colno}"
    if not isinstance(parsed, dict):
        return {}, f"expected a JSON object, got {type(parsed).__name__}"
    return parsed, None


def status_error(status: int | None, message: str, retry_after: str | None) -> Exception:
    """The runner's view of a provider's HTTP failure."""
    if status is None or status in RETRYABLE_STATUSES:
        return ModelUnavailable(message, status=status, retry_after=retry_after)
    return ModelRejected(message, status=status)
