"""The system prompt is the caller's: the engine's (a neutral default), or a run's own; recorded in
the run's header so replay re-drives the very transcript the model saw."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from runner import (
    Engine,
    FakeClock,
    FunctionTools,
    MemoryStore,
    Principal,
    RunSpec,
    ScriptedModel,
    ToolInvocation,
    ToolResponse,
)
from runner.models.base import ModelReply, ToolChoice, ToolSpec
from runner.models.scripted import ScriptedCall, ScriptedTurn
from runner.models.transcript import SystemMessage, Transcript
from runner.proof.replay import Recording, replay
from runner.record.spec import DEFAULT_SYSTEM_PROMPT
from runner.tools.contracts import ContractSet
from tests.support.travel import FLIGHT_ARGS, FLIGHTS_OK

START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)


class Answers:
    """Answers at once and keeps the first message of every request."""

    def __init__(self) -> None:
        self.told: list[object] = []

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        self.told.append(transcript.messages[0])
        return ModelReply(text="done")


def _run(
    contracts: ContractSet, engine_prompt: str | None, spec_prompt: str | None
) -> tuple[str, MemoryStore, str]:
    store = MemoryStore()
    options = {} if engine_prompt is None else {"system_prompt": engine_prompt}
    engine = Engine(
        contracts=contracts,
        toolbox=FunctionTools(),
        store=store,
        clock=FakeClock(START),
        **options,  # type: ignore[arg-type]
    )
    model = Answers()
    spec = RunSpec(
        task="Say done.",
        tenant="acme",
        principal=Principal(id="svc", scopes=frozenset()),
        tools=(),
        system_prompt=spec_prompt,
    )
    result = engine.run_sync(spec, model)
    (first,) = model.told
    assert isinstance(first, SystemMessage)
    return first.text, store, result.run_id


def test_the_default_prompt_is_neutral(contracts: ContractSet) -> None:
    told, store, run_id = _run(contracts, None, None)
    assert told == DEFAULT_SYSTEM_PROMPT
    assert "travel" not in told.lower()
    header = store.header(run_id)
    assert header is not None and header.system_prompt == DEFAULT_SYSTEM_PROMPT


def test_the_engine_prompt_then_the_spec_prompt_win(contracts: ContractSet) -> None:
    assert _run(contracts, "Engine says.", None)[0] == "Engine says."
    told, store, run_id = _run(contracts, "Engine says.", "Spec says.")
    assert told == "Spec says."
    header = store.header(run_id)
    assert header is not None and header.system_prompt == "Spec says."


def test_a_run_with_its_own_prompt_replays_identical(contracts: ContractSet) -> None:
    """The replay engine has the default prompt; the header's recorded one is what counts."""
    _, store, run_id = _run(contracts, "Engine says.", "Spec says.")
    assert replay(Recording.from_store(store, run_id), contracts).identical


def test_a_resumed_run_keeps_the_prompt_it_began_with(contracts: ContractSet) -> None:
    """Killed mid-call, resumed by an engine with another prompt and a spec giving none: the run
    goes on with the recorded prompt (its recorded transcript says so), not the engine's."""
    store = MemoryStore()
    spec = RunSpec(
        task="Find flights.",
        tenant="acme",
        principal=Principal(id="svc", scopes=frozenset({"travel.read"})),
        tools=("search_flights",),
    )
    turns = [
        ScriptedTurn(tool_calls=[ScriptedCall(name="search_flights", args=FLIGHT_ARGS)]),
        ScriptedTurn(final="NH7."),
    ]
    dying = True

    async def search(invocation: ToolInvocation) -> ToolResponse:
        if dying:  # stands in for the process dying: the run's own cancellation
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await asyncio.sleep(0)
        return ToolResponse(payload=FLIGHTS_OK)

    tools = FunctionTools()
    tools.register("search_flights", search)

    def engine(prompt: str) -> Engine:
        return Engine(
            contracts=contracts,
            toolbox=tools,
            store=store,
            clock=FakeClock(START),
            system_prompt=prompt,
        )

    with pytest.raises(asyncio.CancelledError):
        engine("Began with this.").run_sync(spec, ScriptedModel(turns))
    (listing,) = store.runs()
    dying = False
    later = engine("Another prompt now.")
    with asyncio.Runner(loop_factory=later.clock.loop_factory) as runner:
        result = runner.run(later.resume(listing.header.run_id, spec, ScriptedModel(turns)))
    assert result.terminal.value == "complete"
