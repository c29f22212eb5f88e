"""Child runs on a shared budget: the parent's `research` tool is a sub-agent, a run of its own
with its own task, tools and model. Each child's limits are its own cut down to what the parent
has left, and what it spends (attempts, steps, tokens, money) is charged to the parent, so the
family never spends more than the parent was given.

    python examples/child_runs.py

The test suite runs it and type-checks it with `mypy --strict`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from runner import (
    DeclaredTools,
    Engine,
    FakeClock,
    FunctionTools,
    Limits,
    MemoryStore,
    Principal,
    RunSpec,
    ToolSpec,
    Transcript,
)
from runner.engine.children import ChildRun, child_contracts, children_of, lookup_name
from runner.models.transcript import ToolResultMessage
from runner.testing import FunctionModel, Reply, call

search = DeclaredTools()


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str


class Found(BaseModel):
    status: str = "ok"
    text: str


@search.tool(arguments=Query, result=Found, scope="research.read", timeout_s=5)
async def web_search(args: Query) -> Found:
    """Search the web; answers a snippet."""
    return Found(text=f"a snippet about {args.query}")


def searched(transcript: Transcript) -> int:
    return sum(isinstance(message, ToolResultMessage) for message in transcript.messages)


def researcher(transcript: Transcript, tools: tuple[ToolSpec, ...]) -> Reply:
    """The child's model: two searches, then an answer."""
    if searched(transcript) < 2 and tools:
        return call("web_search", query=f"page {searched(transcript) + 1}")
    return f"Researched ({searched(transcript)} searches)."


def planner(transcript: Transcript, tools: tuple[ToolSpec, ...]) -> Reply:
    """The parent's model: research flights, then hotels, then answer."""
    questions = ["accessible flights SFO to Tokyo", "accessible hotels in Tokyo"]
    if searched(transcript) < len(questions) and tools:
        return call("research", question=questions[searched(transcript)])
    return "Planned from what the research found."


def main() -> None:
    store, clock = MemoryStore(), FakeClock()  # parent and children share them
    children = Engine(contracts=search.contract_set(), toolbox=search, store=store, clock=clock)
    research = ChildRun(
        name="research",
        engine=children,
        task=lambda arguments: f"Research and answer: {arguments['question']}",
        tools=("web_search",),
        model=lambda: FunctionModel(researcher),  # a fresh model for each child
        limits=Limits(max_attempts=4),  # the most a child may have, before the cut
    )
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["question"],
        "properties": {"question": {"type": "string"}},
    }
    contracts = child_contracts(
        "research", "Research a question with a sub-agent.", schema, scope="research.read"
    )
    tools = FunctionTools({"research": research, lookup_name("research"): research.lookup})
    parent = Engine(
        contracts=search.contract_set(contracts), toolbox=tools, store=store, clock=clock
    )
    spec = RunSpec(
        task="Plan an accessible trip to Tokyo.",
        tenant="acme",
        principal=Principal(id="planner", scopes=frozenset({"research.read"})),
        tools=("research",),
        limits=Limits(max_attempts=5),
    )
    result = parent.run_sync(spec, FunctionModel(planner))
    for number, (_, child_id) in enumerate(children_of(store.outputs(result.run_id)), start=1):
        header, summary = store.header(child_id), store.summary(child_id)
        assert header is not None and summary is not None
        carved = header.limits["max_attempts"]
        print(
            f"child {number}: {summary.terminal} ({summary.reason}), carved to {carved} of its "
            f"own 4 attempts (what the parent had left), used {summary.attempts}"
        )
    print(
        f"parent: {result.terminal.value} ({result.reason}), {result.attempts} of its 5 attempts "
        "spent: its 2 calls and its children's 3 searches"
    )
    print(f"answer: {result.answer}")


if __name__ == "__main__":
    main()
