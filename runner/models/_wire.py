"""Shared pieces of the provider adapters: reading replies, argument parsing, failure mapping,
and the HTTP client they send through."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from types import ModuleType
from typing import Any, TypeVar

from .base import ModelRejected, ModelUnavailable

T = TypeVar("T")

# Statuses worth asking again later (the runner's policy decides when); everything else is final.
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def member(value: Any, name: str) -> Any:
    """`value[name]` or `value.name`, None when absent: the SDKs build unknown shapes as plain
    dicts and known ones as objects, and nothing a provider sends is trusted to be either."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def output_limit(own: int | None, asked: int | None) -> int | None:
    """A request's output-token limit: the least of the adapter's own and the run's (`asked`,
    `max_output_tokens`), at least 1 (the APIs take no less); None when neither sets one."""
    limits = [n for n in (own, asked) if n is not None]
    return max(1, min(limits)) if limits else None


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
    except ValueError:  # after JSONDecodeError, its subclass: an integer past int's digit limit
        return {}, "a number too long to read"
    if not isinstance(parsed, dict):
        return {}, f"expected a JSON object, got {type(parsed).__name__}"
    return parsed, None


def http_client(sdk: ModuleType) -> Any:
    """The SDK's own HTTP client, but one that follows no redirect: a redirect from a model
    endpoint would re-send the whole transcript (and the key) to wherever it points. A 3xx is
    then a failed request like any other (`ModelRejected`)."""
    return sdk.DefaultAsyncHttpxClient(follow_redirects=False)


def status_error(status: int | None, message: str, retry_after: str | None) -> Exception:
    """The runner's view of a provider's HTTP failure."""
    if status is None or status in RETRYABLE_STATUSES:
        return ModelUnavailable(message, status=status, retry_after=retry_after)
    return ModelRejected(message, status=status)


async def provider_call(sdk: ModuleType, request: Awaitable[T]) -> T:
    """Await one SDK request, turning its failures into the runner's two kinds.

    Both official SDKs name their failures alike: `APIStatusError` (with the response, hence
    Retry-After), `APITimeoutError`, `APIConnectionError`.
    """
    try:
        return await request
    except sdk.APIStatusError as exc:
        headers = exc.response.headers if exc.response is not None else {}
        raise status_error(exc.status_code, str(exc), headers.get("retry-after")) from exc
    except (sdk.APITimeoutError, sdk.APIConnectionError) as exc:
        raise ModelUnavailable(f"{type(exc).__name__}: {exc}") from exc
