"""pydantic-ai: an `Agent` over a `FunctionModel` playing the script, the lookup as a typed tool
(its ten arguments validated by pydantic, as pydantic-ai does with every tool call). In memory
only: pydantic-ai's durable execution needs an external engine (Temporal, DBOS, Prefect)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from .common import RESULT, replies

SCRIPT = replies()


def noop_lookup(  # noqa: PLR0917  # the contract's ten arguments, as pydantic-ai reads them
    origin: str,
    destination: str,
    date_start: str,
    date_end: str,
    accessibility: Literal["wheelchair", "none"],
    max_results: int,
    page: int,
    currency: Literal["USD", "EUR", "JPY"],
    cabin: Literal["economy", "premium", "business"],
    flexible: bool,
) -> dict[str, Any]:
    """A no-op lookup: ten records back."""
    return RESULT


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = sum(isinstance(m, ModelResponse) for m in messages)
    arguments = SCRIPT[step]
    if arguments is None:
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart("noop_lookup", arguments, f"c{step}")])


def make(durability: str | None, folder: Path) -> Callable[[], Awaitable[None]]:
    assert durability is None, "pydantic-ai has no durable store of its own"
    agent = Agent(FunctionModel(scripted), tools=[noop_lookup])

    async def one_run() -> None:
        result = await agent.run("benchmark")
        assert result.output == "done"

    return one_run
