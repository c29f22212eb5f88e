"""A fixture driven through an `Engine` in this process on the fake clock, and a model wrapper that
keeps what each request was asked with."""

from __future__ import annotations

from typing import Any

from runner.base.clock import FakeClock
from runner.engine.engine import Engine
from runner.models.base import ModelReply, ToolChoice, ToolSpec
from runner.models.scripted import ScriptedModel
from runner.models.transcript import Transcript
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.environment import ScriptedEnvironment
from runner.travel.scenario import spec_for


class RecordingModel:
    """Wraps the scripted model and keeps what each request was asked with."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.requests: list[tuple[tuple[str, ...], ToolChoice]] = []
        self.transcripts: list[list[Any]] = []

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        self.requests.append((tuple(t.name for t in tools), tool_choice))
        self.transcripts.append(list(transcript.messages))
        return await self.inner.generate(transcript, tools, tool_choice)


def drive(
    fixture: Any, contracts: ContractSet, model: Any = None, **engine_options: Any
) -> tuple[Any, FakeClock, Any, Any]:
    clock = FakeClock(fixture.clock.start)
    environment = ScriptedEnvironment(fixture.environment, fixture.tools, clock)
    store = MemoryStore()
    engine = Engine(
        contracts=contracts,
        toolbox=environment,
        store=store,
        clock=clock,
        **engine_options,
    )
    model = model or ScriptedModel(fixture.model)
    result = engine.run_sync(spec_for(fixture, 0), model)
    return result, clock, environment, store
