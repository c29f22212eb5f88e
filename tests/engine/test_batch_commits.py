"""A parallel batch's outcomes are committed as they arrive: an outcome that comes back while the
run still waits on an earlier call of the same model reply is stored at once (a store that takes
inputs without a transition: SQLite, memory, JSONL, PostgreSQL), so a crash before the earlier
call answers loses nothing. On resume that dispatch is served its recorded outcome (a write is
neither looked up nor sent again, a read not run again), and the run ends as the uncrashed one
does: same terminal, same holds, same attempts, same transitions.

A crash is the process dying right after a commit (`_failpoints.committed` raising, as in
`test_durability.py`: the first commit after the fast call answered, which must come before the
slow call answers), the run's task cancelled at a chosen moment (nothing more is written in
`transition` mode, as in `test_postgres.py`), or a real subprocess SIGKILLed after its
n-th commit (`RUNNER_KILL_AFTER_COMMITS`, as in `test_crash_sweep.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import sqlite3
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from runner.base import _failpoints
from runner.base.clock import FakeClock, SystemClock
from runner.base.errors import LeaseLost
from runner.cli import main
from runner.engine.engine import Engine
from runner.models.base import ModelReply, TokenUsage, ToolCall, ToolChoice, ToolSpec
from runner.models.transcript import ToolResultMessage, Transcript
from runner.proof.grading import grade
from runner.proof.replay import Recording, replay
from runner.record.spec import RunResult
from runner.store import JsonlLog, SqliteStore
from runner.store.base import RunListing, Store
from runner.store.fanout import FanoutStore
from runner.store.postgres import PostgresStore
from runner.tools.contracts import ContractSet
from runner.tools.invocation import ToolImplementation, ToolInvocation, ToolResponse
from tests.support.crash_sweep import runner_process
from tests.support.hostile_runs import FLIGHTS_OK, HOLD_ARGS, START, spec
from tests.support.paths import FIXTURES
from tests.support.travel import FLIGHT_ARGS

SLOW_S = 3.0
FAST_ARGS = {**FLIGHT_ARGS, "max_results": 2}
SLOW = ToolCall(id="slow", name="search_flights", arguments=dict(FLIGHT_ARGS))
FAST_WRITE = ToolCall(id="fast", name="hold_room", arguments=dict(HOLD_ARGS))
FAST_READ = ToolCall(id="fast", name="search_flights", arguments=FAST_ARGS)


class _Crash(BaseException):
    """The process dying right after a commit: nothing of the runner's catches it."""


class World:
    """The suppliers behind the tools, which outlive a crashed runner: holds by key, and how
    often each tool was asked (across the crashed run and its resume)."""

    def __init__(self) -> None:
        self.holds: dict[str, str] = {}
        self.asked: Counter[str] = Counter()
        self.slow_answered = False
        self.fast_answered = False
        self.at_slow_answer: Callable[[], None] | None = None
        """Called as the slow call is about to answer (to look at what is committed then)."""


class Tools:
    """`search_flights` takes `SLOW_S` seconds unless asked for at most 2 results; `hold_room`
    holds at once; `lookup_hold` finds a hold by its key."""

    def __init__(self, world: World) -> None:
        self.world = world

    def implementation(self, tool: str) -> ToolImplementation | None:
        world = self.world

        async def respond(invocation: ToolInvocation) -> ToolResponse:
            world.asked[tool] += 1
            if tool == "search_flights" and invocation.arguments.get("max_results") != 2:
                await asyncio.sleep(SLOW_S)  # virtual time: the run's FakeClock loop
                if world.at_slow_answer is not None:
                    world.at_slow_answer()
                world.slow_answered = True
                return ToolResponse(payload=FLIGHTS_OK)
            world.fast_answered = True
            if tool == "search_flights":
                return ToolResponse(payload=FLIGHTS_OK)
            key = invocation.operation_key or ""
            if tool == "lookup_hold":
                held = world.holds.get(key)
                found = {"hold_id": held} if held is not None else {}
                return ToolResponse(payload={"status": "ok", "found": held is not None, **found})
            world.holds[key] = hold_id = f"HX-{len(world.holds) + 1}"
            return ToolResponse(
                payload={"status": "ok", "hold_id": hold_id, "expires_at": "2027-03-02T09:00:00Z"}
            )

        return respond


class Batch:
    """Proposes `calls` in one reply until the transcript holds a tool result, then answers (a
    resumed run, whose first turn is re-driven, asks it only for what comes next)."""

    def __init__(self, *calls: ToolCall) -> None:
        self.calls = calls

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        answered = any(isinstance(m, ToolResultMessage) for m in transcript.messages)
        return ModelReply(
            text="Done." if answered else "",
            tool_calls=() if answered else self.calls,
            usage=TokenUsage(input_tokens=10, output_tokens=5),
            stop_reason="end_turn" if answered else "tool_use",
        )


def _engine(contracts: ContractSet, world: World, store: Store, clock: FakeClock) -> Engine:
    return Engine(contracts=contracts, toolbox=Tools(world), store=store, clock=clock)


def _crash_once_the_fast_call_answered(world: World, late: list[str]) -> Callable[[], None]:
    """A failpoint: die at the first commit after the fast call answered. That commit must come
    before the slow call answers (else the fast outcome waited in memory: noted in `late`)."""

    def committed() -> None:
        if not world.fast_answered:
            return
        if world.slow_answered:
            late.append("nothing was committed between the fast answer and the slow one")
        raise _Crash

    return committed


VARYING = frozenset({"time", "latency_ms", "run_id", "operation_key"})
"""What differs between two runs of the same batch (a key is minted per run)."""


def _untimed(result: RunResult) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.to_json().items() if k not in VARYING} for r in result.transitions]


def _crash_and_resume(
    contracts: ContractSet, path: Path, calls: tuple[ToolCall, ...]
) -> tuple[str, RunResult, World]:
    """Run the batch on a new store at `path`, crash it once the fast call answered, resume it
    from the file in a new engine (as the next process would); the run id, result and world."""
    world, late = World(), list[str]()
    store = SqliteStore(path)
    original = _failpoints.committed
    _failpoints.committed = _crash_once_the_fast_call_answered(world, late)  # type: ignore[assignment]
    try:
        with pytest.raises(_Crash):
            _engine(contracts, world, store, FakeClock(START)).run_sync(spec(), Batch(*calls))
    finally:
        _failpoints.committed = original  # type: ignore[assignment]
    store.close()
    assert late == []
    assert world.asked == Counter(call.name for call in calls)  # both dispatched, once
    store = SqliteStore(path)
    (listing,) = store.runs()
    run_id = listing.header.run_id
    clock = FakeClock(START)
    try:
        with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
            resumed = runner.run(
                _engine(contracts, world, store, clock).resume(run_id, spec(), Batch(*calls))
            )
    finally:
        store.close()
    return run_id, resumed, world


def _uncrashed(
    contracts: ContractSet, path: Path, calls: tuple[ToolCall, ...]
) -> tuple[RunResult, World]:
    world = World()
    store = SqliteStore(path)
    try:
        result = _engine(contracts, world, store, FakeClock(START)).run_sync(spec(), Batch(*calls))
    finally:
        store.close()
    return result, world


def test_a_write_answered_while_an_earlier_call_runs_is_not_looked_up_after_a_crash(
    contracts: ContractSet, tmp_path: Path
) -> None:
    calls = (SLOW, FAST_WRITE)
    expected, _ = _uncrashed(contracts, tmp_path / "whole.sqlite", calls)
    assert expected.terminal.value == "complete" and expected.attempts == 2
    run_id, resumed, world = _crash_and_resume(contracts, tmp_path / "crashed.sqlite", calls)
    assert world.asked["lookup_hold"] == 0  # its recorded outcome served: not looked up
    assert world.asked["hold_room"] == 1 and len(world.holds) == 1  # nor sent again
    assert world.asked["search_flights"] == 2  # the slow read, in flight at the crash, ran again
    assert (resumed.terminal, resumed.reason) == (expected.terminal, expected.reason)
    assert resumed.attempts == expected.attempts
    assert [op.status for op in resumed.operations] == ["committed"]
    assert _untimed(resumed) == _untimed(expected)
    # The resumed run's record replays as it is, and holds each dispatch's outcome once.
    store = SqliteStore(tmp_path / "crashed.sqlite")
    recording = Recording.from_store(store, run_id)
    store.close()
    assert replay(recording, contracts).identical
    assert sorted(o.ordinal for o in recording.outputs) == [1, 2]


def test_a_read_answered_while_an_earlier_call_runs_is_not_run_again_after_a_crash(
    contracts: ContractSet, tmp_path: Path
) -> None:
    calls = (SLOW, FAST_READ)
    expected, _ = _uncrashed(contracts, tmp_path / "whole.sqlite", calls)
    assert expected.terminal.value == "complete" and expected.attempts == 2
    _, resumed, world = _crash_and_resume(contracts, tmp_path / "crashed.sqlite", calls)
    assert world.asked == Counter({"search_flights": 3})  # the fast read once, the slow twice
    assert (resumed.terminal, resumed.reason) == (expected.terminal, expected.reason)
    assert resumed.attempts == expected.attempts


def test_what_a_crashed_batch_left_reads_back_everywhere(
    contracts: ContractSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log that ends in an input without its transition: the store's readers, a replay and a
    grade of the unfinished run (every check holding but `run_ended`; `grade --stored` names
    it), and the file seen from another connection."""
    path = tmp_path / "crashed.sqlite"
    world, late = World(), list[str]()
    store = SqliteStore(path)
    original = _failpoints.committed
    _failpoints.committed = _crash_once_the_fast_call_answered(world, late)  # type: ignore[assignment]
    try:
        with pytest.raises(_Crash):
            _engine(contracts, world, store, FakeClock(START)).run_sync(
                spec(), Batch(SLOW, FAST_WRITE)
            )
    finally:
        _failpoints.committed = original  # type: ignore[assignment]
    store.close()
    assert late == []
    conn = sqlite3.connect(path)
    kinds = [kind for (kind,) in conn.execute("SELECT kind FROM run_log ORDER BY entry")]
    conn.close()
    assert kinds == [1, 0, 2]  # the model turn, its transition, then the hold's outcome alone
    store = SqliteStore(path, read_only=True)
    (listing,) = store.runs()
    run_id = listing.header.run_id
    recording = Recording.from_store(store, run_id)
    store.close()
    assert [o.tool for o in recording.outputs] == ["hold_room"]
    assert len(recording.transitions) == 1 and recording.summary is None
    assert replay(recording, contracts).identical  # as far as it went: the slow call's end
    trial = grade(recording, contracts, None, None)  # every check holds, but it has not ended
    assert [check.name for check in trial.failed] == ["run_ended"]
    for command in (["show", run_id], ["replay", run_id], ["runs"]):
        assert main([*command, "--db", str(path)]) == 0, command
    assert main(["grade", "--stored", "--db", str(path)]) == 2  # named, not graded
    captured = capsys.readouterr()
    assert "not finished" in captured.out and "identical as far as it goes" in captured.out
    assert f"error: run {run_id}: it has not ended" in captured.err


def _rows(path: Path) -> list[int]:
    """The kinds of the log's rows, in order, as another connection sees them now."""
    conn = sqlite3.connect(path)
    try:
        return [kind for (kind,) in conn.execute("SELECT kind FROM run_log ORDER BY entry")]
    finally:
        conn.close()


def test_a_jsonl_copy_takes_the_early_outcome_too_and_reads_back(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """`runner run --db ... --log ...`: the JSONL copy takes the outcome alone as well (a
    tool_output line with no transition after it, until the slow call answers), and the whole
    log reads back and replays identical."""
    world, seen = World(), list[list[str]]()
    log = tmp_path / "run.jsonl"
    world.at_slow_answer = lambda: seen.append(
        [json.loads(line)["type"] for line in log.read_text().splitlines()]
    )
    store = FanoutStore(SqliteStore(tmp_path / "s.sqlite"), JsonlLog(log))
    result = _engine(contracts, world, store, FakeClock(START)).run_sync(
        spec(), Batch(SLOW, FAST_WRITE)
    )
    store.close()
    assert result.terminal.value == "complete"
    assert seen == [["run_started", "model_turn", "transition", "tool_output"]]
    (logged,) = Recording.from_log(log)
    assert sorted(o.tool for o in logged.outputs) == ["hold_room", "search_flights"]
    assert replay(logged, contracts).identical


def test_step_durability_keeps_the_early_outcome_with_its_step(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """`durability="step"` commits a step at a time: an outcome that comes early is held with
    the step's transitions (nothing more is committed while the slow call runs); in
    `transition` mode it is in the file before the slow call answers."""
    committed: dict[str, list[int]] = {}
    for durability in ("step", "transition"):
        path = tmp_path / f"{durability}.sqlite"
        world = World()
        world.at_slow_answer = lambda p=path, d=durability: committed.setdefault(d, _rows(p))
        store = SqliteStore(path)
        result = _engine(contracts, world, store, FakeClock(START)).run_sync(
            spec(durability=durability), Batch(SLOW, FAST_READ)
        )
        store.close()
        assert result.terminal.value == "complete" and result.attempts == 2
    assert committed == {"step": [], "transition": [1, 0, 2]}


class FlakyFirst(Tools):
    """The first `search_flights` fails over a dropped connection after 1 s (retried, it answers
    at once); `hold_room` holds after `hold_s` seconds."""

    def __init__(self, world: World, hold_s: float) -> None:
        super().__init__(world)
        self.hold_s = hold_s

    def implementation(self, tool: str) -> ToolImplementation | None:
        plain = super().implementation(tool)
        assert plain is not None
        world, hold_s = self.world, self.hold_s

        async def respond(invocation: ToolInvocation) -> ToolResponse:
            if tool == "search_flights":
                world.asked[tool] += 1
                if world.asked[tool] == 1:
                    await asyncio.sleep(1.0)
                    raise ConnectionResetError("dropped")
                return ToolResponse(payload=FLIGHTS_OK)
            if tool == "hold_room":
                await asyncio.sleep(hold_s)
            return await plain(invocation)

        return respond


def _flaky_run(
    contracts: ContractSet, world: World, store: Store, hold_s: float, *, stop_at: float | None
) -> RunResult | str:
    """The batch (flaky read, then a hold) to its end, or cut at `stop_at` seconds (the run's
    task cancelled there, which in `transition` mode writes nothing more: a crash); the result,
    or the cut run's id."""
    clock = FakeClock(START)
    engine = Engine(
        contracts=contracts, toolbox=FlakyFirst(world, hold_s), store=store, clock=clock
    )

    async def go() -> RunResult | str:
        handle = engine.start(spec(), Batch(SLOW, FAST_WRITE))
        if stop_at is None:
            return await handle.result()
        await asyncio.sleep(stop_at)
        [task] = [t for t in asyncio.all_tasks() if t.get_name() == f"runner run {handle.run_id}"]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return handle.run_id

    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        return runner.run(go())


def test_a_write_answered_while_an_earlier_call_waits_to_be_retried_survives_a_crash(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """The first call failed and waits out its backoff before its retry; the hold answers
    meanwhile, and the run is cut before the retry: the hold's outcome is stored all the same."""
    learned = _flaky_run(contracts, World(), SqliteStore(tmp_path / "a.sqlite"), 1.0, stop_at=None)
    assert isinstance(learned, RunResult) and len(learned.waits_s) == 1
    wait = learned.waits_s[0]  # the seeded backoff: the same in every run of this spec
    hold_s = 1.0 + wait / 2  # the hold answers halfway through the retry's wait
    expected = _flaky_run(
        contracts, World(), SqliteStore(tmp_path / "b.sqlite"), hold_s, stop_at=None
    )
    assert isinstance(expected, RunResult) and expected.terminal.value == "complete"
    assert expected.attempts == 3 and expected.waits_s == [wait]

    world, path = World(), tmp_path / "crashed.sqlite"
    store = SqliteStore(path)
    run_id = _flaky_run(contracts, world, store, hold_s, stop_at=1.0 + wait * 0.75)
    store.close()
    assert isinstance(run_id, str) and world.asked == Counter(search_flights=1, hold_room=1)
    assert [kind for kind in _rows(path)][-1] == 2  # the hold's outcome, after the last move

    store = SqliteStore(path)
    clock = FakeClock(START)
    engine = Engine(
        contracts=contracts, toolbox=FlakyFirst(world, hold_s), store=store, clock=clock
    )
    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        resumed = runner.run(engine.resume(run_id, spec(), Batch(SLOW, FAST_WRITE)))
    store.close()
    assert world.asked["lookup_hold"] == 0 and world.asked["hold_room"] == 1
    assert len(world.holds) == 1
    assert (resumed.terminal, resumed.attempts) == (expected.terminal, expected.attempts)
    assert _untimed(resumed) == _untimed(expected)


class Gated(Tools):
    """As `Tools`, but the slow read waits for `gate` (real time: a PostgreSQL run's clock)."""

    def __init__(self, world: World, gate: asyncio.Event) -> None:
        super().__init__(world)
        self.gate = gate

    def implementation(self, tool: str) -> ToolImplementation | None:
        plain = super().implementation(tool)
        assert plain is not None
        world, gate = self.world, self.gate

        async def respond(invocation: ToolInvocation) -> ToolResponse:
            if tool == "search_flights" and invocation.arguments.get("max_results") != 2:
                world.asked[tool] += 1
                await gate.wait()
                return ToolResponse(payload=FLIGHTS_OK)
            return await plain(invocation)

        return respond


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_on_postgres_the_early_outcome_is_stored_under_the_lease_and_served_on_resume(
    contracts: ContractSet, pg_url: str, anyio_backend: str
) -> None:
    """A worker's run on PostgreSQL: the hold's outcome is in the database while the slow read
    still runs; the worker dies; another takes the run over (a new lease generation, which
    fences the first out of writing inputs too) and resumes it: no lookup, no second hold."""
    ttl, clock, world, gate = timedelta(seconds=30), SystemClock(), World(), asyncio.Event()
    first = await PostgresStore.open(pg_url)
    engine = Engine(contracts=contracts, toolbox=Gated(world, gate), store=first, clock=clock)
    run_id = str(uuid.uuid4())
    assert await first.acquire_lease(run_id, "worker-a", clock.now(), ttl) is not None
    handle = engine.start(spec(), Batch(SLOW, FAST_WRITE), run_id=run_id)
    for _ in range(500):
        if [o.tool for o in await first.outputs(run_id)] == ["hold_room"]:
            break
        await asyncio.sleep(0.01)
    assert [o.tool for o in await first.outputs(run_id)] == ["hold_room"]
    assert world.asked == Counter(search_flights=1, hold_room=1) and not gate.is_set()
    [task] = [t for t in asyncio.all_tasks() if t.get_name() == f"runner run {handle.run_id}"]
    task.cancel()  # the worker is gone: nothing more of it is written
    with pytest.raises(asyncio.CancelledError):
        await task

    second = await PostgresStore.open(pg_url)
    taken = await second.acquire_lease(run_id, "worker-b", clock.now() + ttl, ttl)
    assert taken is not None and taken.generation == 2
    [early] = await second.outputs(run_id)
    with pytest.raises(LeaseLost):  # the first worker, were it alive, can no longer write them
        await first.append_inputs(run_id, [dataclasses.replace(early, ordinal=9)])
    gate.set()
    engine_b = Engine(contracts=contracts, toolbox=Gated(world, gate), store=second, clock=clock)
    result = await engine_b.resume(run_id, spec(), Batch(SLOW, FAST_WRITE))
    assert result.terminal.value == "complete" and result.attempts == 2
    assert world.asked == Counter(search_flights=2, hold_room=1)  # no lookup, no second hold
    assert sorted(o.ordinal for o in await second.outputs(run_id)) == [1, 2]
    await first.close()
    await second.close()


@pytest.mark.parametrize(
    ("calls", "alone"), [((FAST_READ, SLOW), 0), ((SLOW, FAST_READ), 1)], ids=["in order", "out"]
)
def test_only_an_outcome_that_comes_before_an_earlier_one_is_committed_alone(
    contracts: ContractSet, tmp_path: Path, calls: tuple[ToolCall, ...], alone: int
) -> None:
    """Calls that answer in the order they were proposed commit as a single call does: one
    commit a transition (with the run's lease, the header and the summary); one that
    overtakes, one more."""
    made: list[int] = []
    store = SqliteStore(tmp_path / "s.sqlite")
    original = _failpoints.committed
    _failpoints.committed = lambda: made.append(1)  # type: ignore[assignment]
    try:
        result = _engine(contracts, World(), store, FakeClock(START)).run_sync(
            spec(), Batch(*calls)
        )
    finally:
        _failpoints.committed = original  # type: ignore[assignment]
        store.close()
    assert result.terminal.value == "complete"
    assert len(made) == 2 + len(result.transitions) + 1 + alone


SAME_TOOL_OVERTAKES = """
name: same_tool_overtakes
description: Two flight searches in one reply; the second answers first, the first after 3 s.
task: Find flights.
tenant: optiverse
principal: {id: agent-7, scopes: [travel.read]}
tools: [search_flights]
environment:
  search_flights:
    - latency_s: 3
      respond: {status: ok, options: [{flight_id: NH7, assistance_status: reported_available}],
                source_timestamp: "2027-03-01T09:00:00Z"}
    - latency_s: 1
      respond: {status: ok, options: [], source_timestamp: "2027-03-01T09:00:00Z"}
model:
  - tool_calls:
      - {id: c-a, name: search_flights, args: {origin: SFO, destination: NRT,
         date_start: "2027-04-01", date_end: "2027-04-03", accessibility: wheelchair}}
      - {id: c-b, name: search_flights, args: {origin: SFO, destination: KIX,
         date_start: "2027-04-01", date_end: "2027-04-03", accessibility: wheelchair}}
  - final: "NH7."
expect:
  terminal: complete
  reason: model_final
  attempts: 2
  transitions: [plan, call, observe, call, observe, plan, complete]
"""


def _comparable(reported: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in t.items() if k not in VARYING | {"cost_usd"}}
        for t in reported["transitions"]
    ]


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["parallel_calls", "same_tool_overtakes"])
def test_killed_at_every_commit_a_batch_resumes_as_it_ran_uncrashed(
    fixture: str, tmp_path: Path
) -> None:
    """A fixture as a real subprocess, SIGKILLed after each of its durable commits and resumed:
    every point ends as the uncrashed run did, transition for transition (each call's recorded
    observation included). `parallel_calls`: 3 s, 2 s and 1 s reads in one reply, the 1 s one
    failing and retried. `same_tool_overtakes`: one tool twice, the second answering first, so
    the scripted world must give the first, re-run after the crash, its own outcome. Some points
    fall after an outcome committed alone (the log then ends in an input after its last
    transition): the new commits' points."""
    path = FIXTURES / "parallel_calls.yaml"
    if fixture == "same_tool_overtakes":
        path = tmp_path / "same_tool_overtakes.yaml"
        path.write_text(SAME_TOOL_OVERTAKES)
    whole = runner_process(
        ["run", str(path), "--db", str(tmp_path / "whole.sqlite"), "--json"], tmp_path
    )
    assert whole.returncode == 0, whole.stderr
    expected = json.loads(whole.stdout)
    assert expected["terminal"] == "complete"
    ending_in_inputs, point = 0, 0
    while True:
        point += 1
        folder = tmp_path / str(point)
        folder.mkdir()
        db = folder / "runs.sqlite"
        done = runner_process(
            ["run", str(path), "--db", str(db), "--json"], folder, kill_after=point
        )
        if done.returncode == 0:
            break
        assert done.returncode == -signal.SIGKILL, done.stderr
        if not db.exists() or not _has_run(db):
            continue  # died before the run began
        rows = _rows(db)
        ending_in_inputs += bool(rows) and rows[-1] != 0
        resumed = runner_process(["resume", _run_id(db), "--db", str(db), "--json"], folder)
        assert resumed.returncode == 0, (point, resumed.stderr)
        reported = json.loads(resumed.stdout)
        assert reported["attempts"] == expected["attempts"], point
        assert _comparable(reported) == _comparable(expected), point
    assert ending_in_inputs >= 1


def _has_run(db: Path) -> bool:
    store = SqliteStore(db)
    try:
        return bool(store.runs())
    finally:
        store.close()


def _run_id(db: Path) -> str:
    store = SqliteStore(db)
    try:
        (listing,) = store.runs()
        assert isinstance(listing, RunListing)
        return listing.header.run_id
    finally:
        store.close()


class PlainLog:
    """A `RunLog` of a user's own, written before `append_inputs` existed: it has none."""

    def __init__(self) -> None:
        self.appended: list[tuple[int, list[str]]] = []

    def begin_run(self, header: Any) -> None:
        pass

    def append(self, record: Any, inputs: Any = ()) -> None:
        self.appended.append((record.seq, [f"{type(i).__name__} {i.ordinal}" for i in inputs]))

    def end_run(self, summary: Any) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_log_without_append_inputs_gets_the_early_outcome_with_the_next_transition(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """Beside a store that takes it at once, a log of one's own without the optional method
    is given the outcome with the run's next transition, as before: nothing lost, nothing
    twice, in the order the inputs came."""
    world, plain = World(), PlainLog()
    path = tmp_path / "s.sqlite"
    world.at_slow_answer = lambda: plain.appended.append((0, _kinds(path)))
    store = FanoutStore(SqliteStore(path), plain)
    result = _engine(contracts, world, store, FakeClock(START)).run_sync(
        spec(), Batch(SLOW, FAST_READ)
    )
    store.close()
    assert result.terminal.value == "complete"
    assert plain.appended[:3] == [
        (1, ["RecordedTurn 1"]),
        (0, ["1", "0", "2"]),  # the SQLite file as the slow call answers: the fast outcome in it
        (2, ["RecordedOutput 2", "RecordedOutput 1"]),  # the plain log: both, as they came
    ]


def _kinds(path: Path) -> list[str]:
    return [str(kind) for kind in _rows(path)]
