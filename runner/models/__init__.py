"""Model adapters: the protocol, a fixture-scripted double, and one module per provider.

The provider adapters need their extras and are imported from their modules:
`runner.models.openai.OpenAIChatModel` (`pip install runner[openai]`, also for OpenAI-compatible
servers such as vLLM, llama.cpp or Ollama) and `runner.models.anthropic.AnthropicModel`
(`runner[anthropic]`). Your own adapter is any object with `ModelAdapter.generate()`. The
transcript a model sees (`transcript.py`) and what a request costs (`pricing.py`) live here.

May import: `base`, `core`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.errors import ConfigError
from .base import (
    ModelAdapter,
    ModelRejected,
    ModelReply,
    ModelUnavailable,
    TokenUsage,
    ToolCall,
    ToolChoice,
    ToolSpec,
)

if TYPE_CHECKING:
    from .scripted import ScriptedModel

__all__ = [
    "ModelAdapter",
    "ModelRejected",
    "ModelReply",
    "ModelUnavailable",
    "ScriptedModel",
    "TokenUsage",
    "ToolCall",
    "ToolChoice",
    "ToolSpec",
    "live_model",
]


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


def __getattr__(name: str) -> object:
    """`ScriptedModel` on first use: importing it eagerly would close an import cycle
    (`runner.transcript` needs `runner.models.base`; the scripted model needs the transcript)."""
    if name == "ScriptedModel":
        from .scripted import ScriptedModel  # noqa: PLC0415  (lazy on purpose, see above)

        return ScriptedModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
