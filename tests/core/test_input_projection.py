"""How a run projects its next request's input (`budget.INPUT_PROJECTION`), which sets the output
limit each request is sent and whether the money left pays for it. A provider bills the tools'
manifest beside the transcript; under projection 1 the first request's projection left it out,
and a later one missed what the transcript grew by while the last bill was the larger, so a
`max_cost_usd` was passed by up to a fifth. Projection 2 holds it. A run keeps its projection
in its header: one stored under 1 replays and resumes under 1."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from runner import Engine, FakeClock, Limits, MemoryStore, RunSpec
from runner.base.errors import ConfigError
from runner.core.budget import INPUT_PROJECTION
from runner.models.base import ModelReply, TokenUsage, ToolCall, ToolChoice, ToolSpec
from runner.models.pricing import ModelPrice
from runner.models.scripted import estimate_tokens, within_limit
from runner.models.transcript import Transcript
from runner.proof.replay import Recording, describe, replay
from runner.record.spec import Principal
from runner.store import FanoutStore, JsonlLog
from runner.testing import FunctionModel, ToolDouble, latest_results
from runner.tools.contracts import ContractSet
from runner.tools.declare import DeclaredTools
from runner.tools.retrieval import ToolRetrieval, manifest_tokens
from runner.tools.toolbox import FunctionTools
from tests.support.travel import FLIGHT_ARGS

OPTIONS = [
    {"flight_id": f"NH{i}", "assistance_status": "reported_available",
     "departs_at": "2027-04-01T10:00:00Z", "price_usd": 900 + i}
    for i in range(10)
]  # fmt: skip
FLIGHTS = {"status": "ok", "options": OPTIONS, "source_timestamp": "2027-03-01T09:00:00Z"}


class BillsTheManifest:
    """A provider that bills the transcript and the tools it was sent (as real ones do), and
    answers at length once it is asked for the final answer."""

    price = ModelPrice(input_usd_per_mtok=10, output_usd_per_mtok=30)

    def __init__(self) -> None:
        self.asked = 0

    async def generate(
        self,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        choice: ToolChoice,
        *,
        max_output_tokens: int | None = None,
    ) -> ModelReply:
        self.asked += 1
        billed = TokenUsage(
            input_tokens=estimate_tokens(transcript.chars) + manifest_tokens(tools),
            output_tokens=30 if choice != "none" and self.asked < 6 else 1000,
        )
        if billed.output_tokens == 30:
            arguments = {**FLIGHT_ARGS, "date_end": f"2027-04-0{2 + self.asked}"}
            search = ToolCall(id=f"c{self.asked}", name="search_flights", arguments=arguments)
            reply = ModelReply(text="", tool_calls=(search,), usage=billed, stop_reason="tool_use")
        else:
            reply = ModelReply(text="x" * 4000, tool_calls=(), usage=billed, stop_reason="end_turn")
        return within_limit(reply, max_output_tokens)


def _run(contracts: ContractSet, cap: float, store: Any, **spec: Any) -> Any:
    tools = FunctionTools({"search_flights": ToolDouble(FLIGHTS)})
    engine = Engine(contracts=contracts, toolbox=tools, store=store, clock=FakeClock())
    run = RunSpec(
        task="Find flights SFO to NRT.",
        tenant="optiverse",
        principal=Principal(id="agent-7", scopes=frozenset({"travel.read", "travel.book"})),
        tools=("search_flights", "search_hotels", "hold_room", "lookup_hold"),
        limits=Limits(max_cost_usd=cap),
        seed=1,
        **spec,
    )
    return engine.run_sync(run, BillsTheManifest())


@pytest.mark.parametrize("cap", [0.02, 0.05, 0.1])
def test_the_money_cap_holds_against_a_provider_that_bills_the_manifest(
    contracts: ContractSet, cap: float
) -> None:
    result = _run(contracts, cap, MemoryStore())
    assert (result.terminal.value, result.reason) == ("abstain", "cost")
    assert result.cost_usd is not None and result.cost_usd <= cap
    assert result.answer  # the final answer was still asked for, cut at what the money left


def test_projection_1_passed_the_same_cap(contracts: ContractSet) -> None:
    """The run stored before: the same provider, the cap passed by the input it missed."""
    result = _run(contracts, 0.02, MemoryStore(), input_projection=1)
    assert result.cost_usd is not None and result.cost_usd > 0.02 * 1.1


def test_a_run_replays_under_the_projection_its_header_names(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """A new run's header says 2; a header stored before the field (absent: 1) replays under 1,
    as it ran; the same log claiming 2 diverges at the first output limit it changes."""
    log = tmp_path / "runs.jsonl"
    newer = _run(contracts, 0.05, FanoutStore(MemoryStore(), JsonlLog(log)))
    (recording,) = Recording.from_log(log)
    assert recording.header.input_projection == INPUT_PROJECTION == 2
    assert replay(recording, contracts).identical
    older = tmp_path / "older.jsonl"
    _run(contracts, 0.05, FanoutStore(MemoryStore(), JsonlLog(older)), input_projection=1)
    lines = [json.loads(line) for line in older.read_text().splitlines()]
    assert lines[0]["input_projection"] == 1
    for header, identical in (({k: v for k, v in lines[0].items() if k != "input_projection"},
                               True), ({**lines[0], "input_projection": 2}, False)):  # fmt: skip
        older.write_text("".join(json.dumps(line) + "\n" for line in [header, *lines[1:]]))
        (recording,) = Recording.from_log(older)
        again = replay(recording, contracts)
        assert again.identical is identical, describe(again)
    assert newer.cost_usd is not None and newer.cost_usd <= 0.05


@pytest.mark.parametrize("value", [0, 3, True, "2"])
def test_a_projection_no_runner_made_is_refused(value: Any) -> None:
    with pytest.raises(ConfigError, match="input_projection"):
        RunSpec(
            task="t",
            tenant="t",
            principal=Principal(id="a", scopes=frozenset()),
            tools=(),
            input_projection=value,
        )


# -- tool retrieval: each request may offer other tools, and is billed for their manifest -----


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")
    q: str


class Found(BaseModel):
    status: Literal["ok"]
    data: str


def _catalogue(small: int, wide: int) -> DeclaredTools:
    """`small` tools of a line each and `wide` ones of 8,000 characters of description."""
    tools = DeclaredTools()

    async def lookup(args: Query) -> Found:
        return Found(status="ok", data="r" * 200)

    described = [(f"small_{i}", f"Small tool {i}: look up alpha things.") for i in range(small)]
    described += [(f"wide_{i}", f"Wide tool {i} for beta work. " + "Documentation. " * 530)
                  for i in range(wide)]  # fmt: skip
    for name, description in described:
        tools.tool(arguments=Query, result=Found, scope="s.read", timeout_s=10, name=name,
                   description=description)(lookup)  # fmt: skip
    return tools


class ByKeyword:
    """A retriever that offers the wide tools when the query says "beta", else the small."""

    def __init__(self, catalogue: tuple[ToolSpec, ...]) -> None:
        self.names = [tool.name for tool in catalogue]

    def scores(self, query: str) -> list[float]:
        beta = "beta" in query.lower()
        return [1.0 if name.startswith("wide") == beta else 0.0 for name in self.names]


class BillsWhatItIsSent:
    """Bills the transcript and the manifest of the tools each request sends; its text steers
    the next request's retrieval by `pattern` (True: "beta", the wide tools)."""

    price = ModelPrice(input_usd_per_mtok=10, output_usd_per_mtok=30)

    def __init__(self, pattern: list[bool]) -> None:
        self.pattern, self.asked = pattern, 0

    async def generate(
        self,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        choice: ToolChoice,
        *,
        max_output_tokens: int | None = None,
    ) -> ModelReply:
        self.asked += 1
        billed = estimate_tokens(transcript.chars) + manifest_tokens(tools)
        if choice == "none" or self.asked > 40:
            usage = TokenUsage(input_tokens=billed, output_tokens=60)
            reply = ModelReply(
                text="final " * 40, tool_calls=(), usage=usage, stop_reason="end_turn"
            )
        else:
            beta = self.pattern[(self.asked - 1) % len(self.pattern)]
            call = ToolCall(id=f"c{self.asked}", name=tools[0].name, arguments={"q": "x"})
            usage = TokenUsage(input_tokens=billed, output_tokens=30)
            text = "beta next" if beta else "alpha next"
            reply = ModelReply(text=text, tool_calls=(call,), usage=usage, stop_reason="tool_use")
        return within_limit(reply, max_output_tokens)


def _retrieving(tools: DeclaredTools, limits: Limits) -> tuple[Engine, RunSpec]:
    engine = Engine(contracts=tools.contract_set(), toolbox=tools, store=MemoryStore(),
                    clock=FakeClock(), retrievers={"kw": ByKeyword})  # fmt: skip
    spec = RunSpec(
        task="Find alpha things.",
        tenant="t",
        principal=Principal(id="a", scopes=frozenset({"s.read"})),
        tools=tuple(c.name for c in tools.contracts),
        limits=limits,
        seed=1,
        tool_retrieval=ToolRetrieval(max_offered=4, top_k=3, retriever="kw"),
    )
    return engine, spec


@pytest.mark.parametrize("pattern", [[False] * 5 + [True] + [False] * 40, [True, False]])
@pytest.mark.parametrize("cap", [0.15, 0.2, 0.3])
def test_the_cap_holds_when_retrieval_offers_wider_tools_than_the_last_request(
    pattern: list[bool], cap: float
) -> None:
    """Projected from the last bill alone, a request offering the wide tools after one that
    offered the small ones passed the cap by up to 40%; its own tools' manifest is projected."""
    engine, spec = _retrieving(_catalogue(3, 3), Limits(max_cost_usd=cap, max_model_steps=100,
                                                        max_attempts=100))  # fmt: skip
    result = engine.run_sync(spec, BillsWhatItIsSent(pattern))
    assert result.reason == "cost" and result.cost_usd is not None and result.cost_usd <= cap
    assert result.answer  # the final request, offered the tools it sends, was affordable


def test_a_large_catalogue_offered_a_few_tools_at_a_time_is_not_projected_whole() -> None:
    """300 tools, 5 offered a request: the first request counts the 5 it sends (about 1,000
    tokens), not the 64,000 of the whole catalogue, which left it one output token."""
    tools = _catalogue(300, 0)
    _, spec = _retrieving(tools, Limits())
    spec = dataclasses.replace(spec, tool_retrieval=ToolRetrieval(max_offered=16, top_k=5))
    engine = Engine(contracts=tools.contract_set(), toolbox=tools, store=MemoryStore(),
                    clock=FakeClock())  # fmt: skip
    model = FunctionModel(
        lambda transcript, offered: (
            "All found."
            if latest_results(transcript)
            else ToolCall(id="", name=offered[0].name, arguments={"q": "x"})
        )
    )
    result = engine.run_sync(spec, model)
    assert (result.terminal.value, result.reason) == ("complete", "model_final")
    assert model.output_limits[0] is not None and model.output_limits[0] > 40_000
