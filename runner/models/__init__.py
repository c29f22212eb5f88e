"""Model adapters: the protocol, a fixture-scripted double, and one module per provider."""

from __future__ import annotations

from ..errors import ConfigError
from .base import ModelAdapter


def live_model(
    spec: str, *, base_url: str | None = None, fallback_model: str | None = None
) -> ModelAdapter:
    """`openai:MODEL` or `anthropic:MODEL` as an adapter (keys from the environment)."""
    provider, _, name = spec.partition(":")
    if not name:
        raise ConfigError(f"--model {spec!r}: use openai:MODEL or anthropic:MODEL")
    if provider == "openai":
        from .openai import OpenAIChatModel  # noqa: PLC0415  # optional extra

        return OpenAIChatModel(name, base_url=base_url, fallback_model=fallback_model)
    if provider == "anthropic":
        from .anthropic import AnthropicModel  # noqa: PLC0415  # optional extra

        return AnthropicModel(name, base_url=base_url, fallback_model=fallback_model)
    raise ConfigError(f"--model {spec!r}: unknown provider {provider!r} (openai or anthropic)")
