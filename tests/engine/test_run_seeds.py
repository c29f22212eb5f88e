"""Determinism per run: each run jitters from its own generator, seeded from its spec or drawn and
recorded, so any number of embedded runs on one engine replay identical from the store."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from runner.base.clock import FakeClock
from runner.engine.engine import Engine
from runner.models.scripted import ScriptedModel, ScriptedTurn
from runner.proof.replay import Recording, replay
from runner.record.spec import RunSpec
from runner.store import MemoryStore, SqliteStore
from runner.tools.contracts import ContractSet
from runner.tools.invocation import Principal, ToolInvocation, ToolResponse
from runner.tools.toolbox import FunctionTools
from tests.support.travel import FLIGHT_ARGS, FLIGHTS_OK

UNAVAILABLE = {"status": "error", "error_code": "service_unavailable", "retryable": True}


def _flaky_search() -> FunctionTools:
    """Unavailable on every other call: each run retries once, after a jittered backoff."""
    calls = 0

    async def search(invocation: ToolInvocation) -> ToolResponse:
        nonlocal calls
        calls += 1
        return ToolResponse(payload=UNAVAILABLE if calls % 2 else FLIGHTS_OK)

    tools = FunctionTools()
    tools.register("search_flights", search)
    return tools


def _spec(seed: int | None) -> RunSpec:
    return RunSpec(
        task="Find flights SFO to NRT.",
        tenant="acme",
        principal=Principal(id="svc", scopes=frozenset({"travel.read"})),
        tools=("search_flights",),
        seed=seed,
    )


def _model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedTurn.model_validate(
                {"tool_calls": [{"name": "search_flights", "args": FLIGHT_ARGS}]}
            ),
            ScriptedTurn.model_validate({"final": "NH7."}),
        ]
    )


def test_hundred_embedded_runs_on_one_engine_all_replay_identical(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """Half the runs give a seed, half do not (one is drawn and recorded); every run retries."""
    store = SqliteStore(tmp_path / "runs.sqlite")
    engine = Engine(contracts=contracts, toolbox=_flaky_search(), store=store, clock=FakeClock())

    async def drive() -> list[str]:
        results = [
            await engine.run(_spec(7 if index % 2 else None), _model()) for index in range(100)
        ]
        return [result.run_id for result in results]

    with asyncio.Runner(loop_factory=engine.clock.loop_factory) as runner:
        run_ids = runner.run(drive())
    waits = set()
    for run_id in run_ids:
        recording = Recording.from_store(store, run_id)
        assert recording.header.seed is not None  # drawn when not given, and recorded
        assert recording.summary is not None and len(recording.summary.waits_s) == 1
        waits.add(recording.summary.waits_s[0])
        replayed = replay(recording, contracts)
        assert replayed.identical, (run_id, replayed.divergence)
    assert len(waits) > 2  # drawn seeds differ: the jitter is not one engine-wide sequence


def test_hundred_concurrent_runs_started_with_handles_all_replay_identical(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """Interleaved on one loop, runs draw their jitter in whatever order they get to it: a
    shared generator would give each run draws that depend on the others' timing."""
    store = SqliteStore(tmp_path / "runs.sqlite")
    engine = Engine(contracts=contracts, toolbox=_flaky_search(), store=store, clock=FakeClock())

    async def drive() -> list[str]:
        handles = [
            engine.start(_spec(index if index % 2 else None), _model()) for index in range(100)
        ]
        return [(await handle.result()).run_id for handle in handles]

    with asyncio.Runner(loop_factory=engine.clock.loop_factory) as runner:
        run_ids = runner.run(drive())
    retried = 0
    for run_id in run_ids:
        recording = Recording.from_store(store, run_id)
        assert recording.summary is not None and recording.summary.terminal == "complete"
        retried += bool(recording.summary.waits_s)
        replayed = replay(recording, contracts)
        assert replayed.identical, (run_id, replayed.divergence)
    assert retried >= 40


def test_an_engine_wide_rng_is_refused_politely(contracts: ContractSet) -> None:
    """`Engine(rng=...)` still constructs (deprecated) but is ignored: runs seed their own."""
    with pytest.warns(DeprecationWarning, match="each run draws from its own"):
        Engine(
            contracts=contracts,
            toolbox=FunctionTools(),
            store=MemoryStore(),
            clock=FakeClock(),
            rng=random.Random(0),
        )
