"""A cost budget: every model request is priced at the run's price and projected before it is
sent; a tool-proposing request is made only while what is spent plus twice its cost (one share
held back for the final answer) fits the cap. A model that keeps reformulating an empty search
is stopped by money, not by luck, and still gives its final answer within the cap.

    python examples/cost_budget.py

The test suite runs it and type-checks it with `mypy --strict`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from runner import (
    DeclaredTools,
    Engine,
    FakeClock,
    Limits,
    MemoryStore,
    ModelReply,
    Principal,
    RunSpec,
    TokenUsage,
    ToolCall,
    ToolSpec,
    Transcript,
)
from runner.models.pricing import ModelPrice
from runner.proof.api import replay_run_sync
from runner.testing import FunctionModel

tools = DeclaredTools()


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str


class Results(BaseModel):
    status: str = "ok"
    results: list[str]


@tools.tool(
    arguments=Query, result=Results, scope="docs.read", timeout_s=5, results_field="results"
)
async def search_docs(args: Query) -> Results:
    """Search the documentation; finds nothing, whatever it is asked."""
    return Results(results=[])


def runaway(transcript: Transcript, offered: tuple[ToolSpec, ...]) -> ModelReply:
    """A model that reformulates forever; each request is billed 2,000 tokens in, 100 out."""
    usage = TokenUsage(input_tokens=2000, output_tokens=100)
    if not offered:  # the final, tool-free request
        text = "Nothing found; nothing is confirmed."
        return ModelReply(text=text, tool_calls=(), usage=usage, stop_reason="end_turn")
    take = len(transcript.messages)
    call = ToolCall(id=f"c{take}", name="search_docs", arguments={"query": f"retry, take {take}"})
    return ModelReply(text="", tool_calls=(call,), usage=usage, stop_reason="tool_use")


def main() -> None:
    store = MemoryStore()
    engine = Engine(contracts=tools.contract_set(), toolbox=tools, store=store, clock=FakeClock())
    spec = RunSpec(
        task="How should a transient failure be retried?",
        tenant="acme",
        principal=Principal(id="agent-1", scopes=frozenset({"docs.read"})),
        tools=("search_docs",),
        price=ModelPrice(input_usd_per_mtok=10.0, output_usd_per_mtok=30.0),
        limits=Limits(max_attempts=50, max_model_steps=50, max_cost_usd=0.10),
    )
    result = engine.run_sync(spec, FunctionModel(runaway))
    costs = [f"${r.cost_usd:.3f}" for r in result.transitions if r.cost_usd is not None]
    print("price: $10 in / $30 out per million tokens; cap $0.10")
    print(f"requests: {len(costs)}, each {costs[0]}; searches: {result.attempts}")
    assert result.cost_usd is not None and result.cost_usd <= 0.10
    print(f"run: {result.terminal.value} ({result.reason}) at ${result.cost_usd:.3f}")
    print(f"answer: {result.answer}")
    replayed = replay_run_sync(store, result.run_id, tools.contract_set())
    print(f"replayed at the recorded price: {'identical' if replayed.identical else 'diverged'}")


if __name__ == "__main__":
    main()
