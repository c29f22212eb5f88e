"""`Engine.start`: a handle at once (the header is stored), its result, and cancel: the run ends
`abstain` with reason `cancelled`, one terminal record, every write in flight settled first."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from runner.base.clock import FakeClock
from runner.base.errors import ConfigError
from runner.core import machine
from runner.core.states import State
from runner.engine.engine import Engine
from runner.models.base import ModelReply, ToolCall, ToolChoice, ToolSpec
from runner.models.transcript import Transcript
from runner.proof.grading import grade
from runner.proof.replay import Recording, replay
from runner.record.spec import RunResult, RunSpec
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.tools.invocation import Principal, ToolInvocation, ToolResponse
from runner.tools.toolbox import FunctionTools
from tests.support.hold_doubles import SPEC, HoldThenAnswer, SlowHotel, reply


class Stuck:
    """A model whose request never comes back (until it is abandoned)."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        self.asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def _drive(
    contracts: ContractSet,
    tools: FunctionTools,
    scenario: Callable[[Engine], Awaitable[RunResult]],
) -> tuple[RunResult, MemoryStore]:
    clock = FakeClock()
    store = MemoryStore()
    engine = Engine(contracts=contracts, toolbox=tools, store=store, clock=clock)
    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        result = runner.run(scenario(engine))
    return result, store


def _ends_once_cancelled(result: RunResult, store: MemoryStore, contracts: ContractSet) -> None:
    assert result.terminal is State.ABSTAIN and result.reason == "cancelled"
    terminal = [r for r in result.transitions if r.to_state in {s.value for s in machine.TERMINAL}]
    assert len(terminal) == 1 and terminal[0] is result.transitions[-1]
    assert terminal[0].trigger == "give_up" and terminal[0].reason == "cancelled"
    summary = store.summary(result.run_id)
    assert summary is not None and summary.reason == "cancelled"
    recording = Recording.from_store(store, result.run_id)
    replayed = replay(recording, contracts)
    assert replayed.identical, replayed.divergence
    trial = grade(recording, contracts, None, None)
    assert trial.passed, trial.failed


def test_start_stores_the_header_and_gives_the_run_id_at_once(contracts: ContractSet) -> None:
    hotel = SlowHotel()
    hotel.release.set()
    store_seen: list[bool] = []

    async def scenario(engine: Engine) -> RunResult:
        handle = engine.start(SPEC, HoldThenAnswer())
        store_seen.append(engine.runtime.store.header(handle.run_id) is not None)
        assert not handle.done()
        result = await handle.result()
        assert result.run_id == handle.run_id and handle.done()
        return result

    result, _ = _drive(contracts, hotel.tools(), scenario)
    assert store_seen == [True]
    assert result.terminal is State.COMPLETE


def test_cancel_abandons_a_model_request_at_once(contracts: ContractSet) -> None:
    attached = machine.attached_count()
    model = Stuck()

    async def scenario(engine: Engine) -> RunResult:
        handle = engine.start(SPEC, model)
        await model.asked.wait()
        handle.cancel()
        handle.cancel()  # idempotent
        return await handle.result()

    result, store = _drive(contracts, SlowHotel().tools(), scenario)
    _ends_once_cancelled(result, store, contracts)
    assert [r.trigger for r in result.transitions] == ["give_up"]
    assert machine.attached_count() == attached


@pytest.mark.parametrize("lose_response", [False, True], ids=["answered", "response_lost"])
def test_cancel_lets_a_write_in_flight_finish_and_settles_it_first(
    contracts: ContractSet, lose_response: bool
) -> None:
    """The hold is dispatched and unanswered when the cancel comes: it finishes (or, its
    response lost, is looked up by key), is recorded committed, and the model is not asked again."""
    hotel = SlowHotel(lose_response=lose_response)
    model = HoldThenAnswer()

    async def scenario(engine: Engine) -> RunResult:
        handle = engine.start(SPEC, model)
        await hotel.entered.wait()
        handle.cancel()
        await asyncio.sleep(0.5)
        assert not handle.done()  # a tool is never interrupted
        hotel.release.set()
        return await handle.result()

    result, store = _drive(contracts, hotel.tools(), scenario)
    _ends_once_cancelled(result, store, contracts)
    assert model.requests == 1
    assert [op.status for op in result.operations] == ["committed"]
    assert hotel.lookups == (1 if lose_response else 0)
    triggers = [r.trigger for r in result.transitions]
    expected = ["propose", "classify", "reconcile", "classify", "resume", "give_up"]
    assert triggers == (expected if lose_response else ["propose", "classify", "resume", "give_up"])


def test_cancelling_the_task_keeps_the_records_and_leaves_the_run_unfinished(
    contracts: ContractSet,
) -> None:
    """The loop shutting down is not a cancel of the run: nothing is lost, nothing is ended."""
    hotel = SlowHotel()
    store = MemoryStore()
    clock = FakeClock()
    engine = Engine(contracts=contracts, toolbox=hotel.tools(), store=store, clock=clock)
    run_ids: list[str] = []

    async def scenario() -> None:
        handle = engine.start(SPEC, HoldThenAnswer())
        run_ids.append(handle.run_id)
        await hotel.entered.wait()  # the runner closes the loop with the run still going

    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        runner.run(scenario())
    (run_id,) = run_ids
    assert store.summary(run_id) is None
    assert [r.trigger for r in store.transitions(run_id)] == ["propose"]
    assert [op.status.value for op in store.operations(run_id)] == ["pending"]


def test_start_outside_a_running_loop_is_a_config_error(contracts: ContractSet) -> None:
    attached = machine.attached_count()
    engine = Engine(
        contracts=contracts, toolbox=FunctionTools(), store=MemoryStore(), clock=FakeClock()
    )
    with pytest.raises(ConfigError, match="running event loop"):
        engine.start(SPEC, HoldThenAnswer())
    assert machine.attached_count() == attached and engine.runtime.store.runs() == []


def test_a_cancel_during_a_retry_wait_carries_the_decided_retry_out_first(
    contracts: ContractSet,
) -> None:
    """As the README says: a retry already decided for a call of the batch is carried out, its
    wait included (a cancel does not cut a Retry-After short), then the run ends `cancelled`."""
    stay = {"city": "Tokyo", "check_in": "2027-04-02", "check_out": "2027-04-06", "guests": 2}
    stay["accessibility"] = "wheelchair"
    found = {
        "status": "ok",
        "source_timestamp": "2027-03-01T09:00:00Z",
        "options": [{"hotel_id": "H-1", "name": "Ueno", "accessible_room_status": "unknown"}],
    }
    limited = {"status": "error", "error_code": "rate_limited", "retryable": True}
    answered = asyncio.Event()
    calls: list[float] = []

    async def search_hotels(invocation: ToolInvocation) -> ToolResponse:
        calls.append(asyncio.get_running_loop().time())
        if len(calls) == 1:
            answered.set()
            return ToolResponse(payload=limited, retry_after="5")
        return ToolResponse(payload=found)

    class SearchThenAnswer(HoldThenAnswer):
        async def generate(
            self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
        ) -> ModelReply:
            self.requests += 1
            if self.requests == 1:
                return reply(ToolCall(id="s1", name="search_hotels", arguments=stay))
            return reply(text="Found H-1.")

    model = SearchThenAnswer()
    reader = Principal(id="svc", scopes=frozenset({"travel.read"}))
    spec = RunSpec(task="Find a hotel.", tenant="acme", principal=reader, tools=("search_hotels",))

    async def scenario(engine: Engine) -> RunResult:
        handle = engine.start(spec, model)
        await asyncio.wait_for(answered.wait(), 60)  # virtual time: fails, never hangs
        handle.cancel()
        return await handle.result()

    result, store = _drive(contracts, FunctionTools({"search_hotels": search_hotels}), scenario)
    _ends_once_cancelled(result, store, contracts)
    assert model.requests == 1 and len(calls) == 2 and calls[1] - calls[0] == pytest.approx(5)
    assert result.waits_s == [5.0]
    triggers = [r.trigger for r in result.transitions]
    assert triggers == ["propose", "classify", "retry", "classify", "resume", "give_up"]


def test_a_cancel_given_to_resumes_started_ends_the_run_where_its_record_ends(
    contracts: ContractSet,
) -> None:
    """`Engine.resume(..., started=handle.cancel)` re-drives the recorded step as it was and
    ends the run `abstain (cancelled)` at the first live request: a RunResult, not a
    divergence of the re-drive from its own record, and the hold made once."""
    hotel = SlowHotel()
    hotel.release.set()
    store = MemoryStore()
    clock = FakeClock()
    engine = Engine(contracts=contracts, toolbox=hotel.tools(), store=store, clock=clock)
    first = HoldThenAnswer(hang=True)
    run_ids: list[str] = []

    async def cut() -> None:
        run_ids.append(engine.start(SPEC, first).run_id)
        await first.asked_again.wait()  # the loop closes here, the run still going

    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        runner.run(cut())
    (run_id,) = run_ids
    assert store.summary(run_id) is None and len(hotel.holds) == 1
    again = Engine(contracts=contracts, toolbox=hotel.tools(), store=store, clock=clock)
    model = HoldThenAnswer()

    async def resume() -> RunResult:
        return await again.resume(run_id, SPEC, model, started=lambda handle: handle.cancel())

    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        result = runner.run(resume())
    _ends_once_cancelled(result, store, contracts)
    assert model.requests == 0 and len(hotel.holds) == 1
    assert [r.trigger for r in result.transitions] == ["propose", "classify", "resume", "give_up"]
