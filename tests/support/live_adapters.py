"""The OpenAI and Anthropic adapters pointed at the loopback model server (`llm_server`)."""

from __future__ import annotations

from typing import Any

from runner.models.anthropic import AnthropicModel
from runner.models.openai import OpenAIChatModel
from tests.support.llm_server import RecordedLLMServer

PROTOCOLS = ["openai", "anthropic"]


def adapter(protocol: str, url: str, model: str, fallback: str | None = None) -> Any:
    if protocol == "openai":
        return OpenAIChatModel(model, base_url=f"{url}/v1", api_key="test-key",
                               fallback_model=fallback)  # fmt: skip
    return AnthropicModel(model, base_url=url, api_key="test-key", fallback_model=fallback)


def sent(server: RecordedLLMServer, protocol: str, model: str) -> list[dict[str, Any]]:
    return server.requests[(protocol, model)]
