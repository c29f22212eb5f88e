"""Which model drove a run, as recorded in its header: so a resumed run continues with the same one.

The identity names a provider, a model, the endpoint without secrets, and the fallback. Keys are
never part of it: a rebuilt live model reads its key from the environment, as the original run did.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from ..base.errors import ConfigError

LIVE_PROVIDERS = frozenset({"openai", "anthropic"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelIdentity:
    """The model a run was driven by (never a credential)."""

    provider: str
    """`openai`, `anthropic`, `scripted` (a fixture's script) or `custom` (any other adapter)."""
    name: str
    """The provider's model name; for `custom`, the adapter's class."""
    base_url: str | None = None
    """The endpoint, without user info, query or fragment (where tokens hide)."""
    fallback: str | None = None
    """The same-family model asked when the primary is unavailable."""

    @property
    def live(self) -> bool:
        return self.provider in LIVE_PROVIDERS

    def describe(self) -> str:
        parts = [f"{self.provider}:{self.name}"]
        if self.base_url:
            parts.append(f"at {self.base_url}")
        if self.fallback:
            parts.append(f"fallback {self.fallback}")
        return " ".join(parts)


SCRIPTED = ModelIdentity(provider="scripted", name="fixture-script")


def redact_url(url: str | None) -> str | None:
    """`url` without user info, query and fragment: what may be written to a header or a log."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"base URL is not a URL: {exc}") from exc
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def identity_of(model: object) -> ModelIdentity:
    """The identity an adapter declares (`identity`), or else its class."""
    declared = getattr(model, "identity", None)
    if isinstance(declared, ModelIdentity):
        return declared
    kind = type(model)
    return ModelIdentity(provider="custom", name=f"{kind.__module__}.{kind.__qualname__}")
