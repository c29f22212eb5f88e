"""`runner.api`: status and listing from the store; replay and grading as async functions that a
service calls from inside its own running loop (and their sync wrappers)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import pytest

from runner.base.clock import FakeClock, SystemClock
from runner.base.errors import ConfigError, LoadError
from runner.core.states import State
from runner.engine.engine import Engine
from runner.proof import api as api_module
from runner.proof.api import (
    RunStatus,
    grade_run,
    grade_run_sync,
    list_runs,
    replay_run,
    replay_run_sync,
    run_status,
)
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from tests.support.hold_doubles import SPEC, HoldThenAnswer, SlowHotel


def test_status_running_then_ended_and_listed_and_replayed_inside_the_loop(
    contracts: ContractSet,
) -> None:
    hotel = SlowHotel()
    store = MemoryStore()
    engine = Engine(contracts=contracts, toolbox=hotel.tools(), store=store, clock=SystemClock())

    async def service() -> tuple[RunStatus, RunStatus, RunStatus, list[object]]:
        handle = engine.start(SPEC, HoldThenAnswer())
        before = run_status(store, handle.run_id)
        await hotel.entered.wait()
        during = run_status(store, handle.run_id)
        hotel.release.set()
        await handle.result()
        after = run_status(store, handle.run_id)
        replayed = await replay_run(store, handle.run_id, contracts)  # from inside the loop
        trial = await grade_run(store, handle.run_id, contracts)
        return before, during, after, [replayed.identical, trial.passed]

    before, during, after, proofs = asyncio.run(service())
    assert (before.status, before.state, before.transitions) == ("running", State.PLAN, 0)
    assert (during.status, during.state, during.reason) == ("running", State.CALL, None)
    assert (after.status, after.state, after.reason) == ("ended", State.COMPLETE, "model_final")
    assert after.terminal and not during.terminal
    assert proofs == [True, True]
    assert list_runs(store) == [after]
    assert replay_run_sync(store, after.run_id, contracts).identical
    assert grade_run_sync(store, after.run_id, contracts).passed


def test_replaying_and_grading_leave_the_event_loop_serving(
    contracts: ContractSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`replay_run` and `grade_run` do their CPU work (a replay, the grading checks) off the
    loop's thread: a service awaiting them goes on answering other requests meanwhile."""
    hotel = SlowHotel()
    store = MemoryStore()
    engine = Engine(contracts=contracts, toolbox=hotel.tools(), store=store, clock=SystemClock())
    threads: dict[str, int] = {}

    def on_its_thread(name: str, work: Callable[..., Any]) -> Callable[..., Any]:
        def watched(*args: Any, **kwargs: Any) -> Any:
            threads[name] = threading.get_ident()
            return work(*args, **kwargs)

        return watched

    monkeypatch.setattr(api_module, "replay", on_its_thread("replay", api_module.replay))
    monkeypatch.setattr(api_module, "grade", on_its_thread("grade", api_module.grade))

    async def service() -> tuple[int, bool, bool]:
        handle = engine.start(SPEC, HoldThenAnswer())
        hotel.release.set()
        await handle.result()
        replayed = await replay_run(store, handle.run_id, contracts)
        trial = await grade_run(store, handle.run_id, contracts)
        return threading.get_ident(), replayed.identical, trial.passed

    loop_thread, identical, passed = asyncio.run(service())
    assert identical and passed
    assert set(threads) == {"replay", "grade"} and loop_thread not in threads.values()


def test_status_of_a_run_the_store_does_not_have_is_a_load_error() -> None:
    with pytest.raises(LoadError, match="no run nope"):
        run_status(MemoryStore(), "nope")


def test_sync_wrappers_called_inside_a_running_loop_are_a_config_error_and_print_nothing(
    contracts: ContractSet, recwarn: pytest.WarningsRecorder
) -> None:
    """A service that calls `replay_run_sync`, `grade_run_sync` or `run_sync` from its loop gets
    a typed error naming the async call, not asyncio's RuntimeError and a 'never awaited'
    warning (nor a good run graded as failing)."""
    hotel = SlowHotel()
    hotel.release.set()
    store = MemoryStore()
    engine = Engine(contracts=contracts, toolbox=hotel.tools(), store=store, clock=SystemClock())
    run_id = engine.run_sync(SPEC, HoldThenAnswer()).run_id

    async def service() -> None:
        with pytest.raises(ConfigError, match=r"await runner\.replay_run"):
            replay_run_sync(store, run_id, contracts)
        # it graded a good run as failing (`replays_as_recorded` caught the replay's refusal)
        with pytest.raises(ConfigError, match=r"await runner\.proof\.api\.grade_run"):
            grade_run_sync(store, run_id, contracts)
        with pytest.raises(ConfigError, match=r"await engine\.run"):
            engine.run_sync(SPEC, HoldThenAnswer())

    asyncio.run(service())
    assert [run.run_id for run in list_runs(store)] == [run_id]  # the refused run never began
    assert [str(w.message) for w in recwarn.list if "never awaited" in str(w.message)] == []


def test_a_spec_naming_a_tool_without_a_contract_is_refused_before_it_is_stored(
    contracts: ContractSet,
) -> None:
    """A typo in `RunSpec.tools` used to drop the tool silently: the model was offered nothing
    and the run 'completed'. Now `start` and `run` refuse it, and nothing is stored."""
    store = MemoryStore()
    engine = Engine(
        contracts=contracts, toolbox=SlowHotel().tools(), store=store, clock=SystemClock()
    )
    typo = dataclasses.replace(SPEC, tools=(*SPEC.tools, "serch_hotels"))

    async def service() -> None:
        with pytest.raises(ConfigError, match="with no contract: serch_hotels"):
            engine.start(typo, HoldThenAnswer())
        with pytest.raises(ConfigError, match="with no contract: serch_hotels"):
            await engine.run(typo, HoldThenAnswer())

    asyncio.run(service())
    assert list_runs(store) == []


def test_a_fake_clock_engine_started_on_a_foreign_loop_is_refused_before_it_is_stored(
    contracts: ContractSet,
) -> None:
    """A `FakeClock` only works on its own loop; on `asyncio.run`'s loop the run used to be
    stored, then fail at its first wait and stay `running` in the store for ever."""
    hotel = SlowHotel()
    hotel.release.set()
    store = MemoryStore()
    engine = Engine(contracts=contracts, toolbox=hotel.tools(), store=store, clock=FakeClock())

    async def service() -> None:
        with pytest.raises(ConfigError, match="clock's own loop"):
            engine.start(SPEC, HoldThenAnswer())
        with pytest.raises(ConfigError, match="clock's own loop"):
            await engine.run(SPEC, HoldThenAnswer())

    asyncio.run(service())
    assert list_runs(store) == []
    assert engine.run_sync(SPEC, HoldThenAnswer()).terminal == State.COMPLETE  # its own loop
