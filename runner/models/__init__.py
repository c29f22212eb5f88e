"""Model adapters: the protocol, a fixture-scripted double, and one module per provider.

The provider adapters need their extras and are imported from their modules:
`runner.models.openai.OpenAIChatModel` (`pip install 'runner-fsm[openai]'`, also for
OpenAI-compatible servers such as vLLM, llama.cpp or Ollama) and
`runner.models.anthropic.AnthropicModel` (`runner-fsm[anthropic]`). Your own adapter is any
object with `ModelAdapter.generate()`. The transcript a model sees (`transcript.py`), what a
request costs (`pricing.py`), which model drove a run (`identity.py`) and a live model by name
or rebuilt from a record (`live.py`) live here.

May import: `base`, `core`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from .live import live_model

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


def __getattr__(name: str) -> object:
    """`ScriptedModel` on first use: `import runner` does not need it (nor its prices)."""
    if name == "ScriptedModel":
        from .scripted import ScriptedModel  # noqa: PLC0415  (lazy on purpose, see above)

        return ScriptedModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
