"""A re-driven run on a real clock does not sleep through its recorded time (`clock.CatchUp`).

`Engine.resume` and `Engine.continue_approved` re-drive a run's recorded inputs, each served at
its recorded end. On a `SystemClock` the run used to wait in real time until it reached the point
where it stopped; now its recorded waits are skipped and only what comes after is lived. The
run's elapsed time is the recorded time plus the live time since the re-drive (the downtime
between is not on it), so every bound decides as before.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from runner.base import _failpoints
from runner.base.clock import CatchUp, Clock, FakeClock, SystemClock
from runner.base.errors import ResumeRefused
from runner.core.budget import Limits
from runner.core.confirm import ApprovalSecret
from runner.core.policy import ApprovalRules, Policy
from runner.core.states import State
from runner.engine.approvals import approve
from runner.engine.engine import Engine
from runner.models.base import ModelReply, ToolCall, ToolChoice, ToolSpec
from runner.models.transcript import ToolResultMessage, Transcript
from runner.proof.replay import Recording, replay
from runner.store import MemoryStore, SqliteStore
from runner.store.base import Store
from runner.tools.contracts import ContractSet
from tests.support.hostile_runs import START, answer, calls, spec
from tests.support.timed_supplier import SearchThenHold, Supplier
from tests.support.travel import FLIGHT_ARGS


class _Crash(BaseException):
    """The process dies here (as `RUNNER_KILL_AFTER_COMMITS` would kill it)."""


def _crash_once(path: Path, trigger: str, tool: str) -> Any:
    """A commit hook that dies once the store holds a `trigger` move on `tool`."""

    def committed() -> None:
        conn = sqlite3.connect(path)
        try:
            rows = conn.execute("SELECT record FROM transitions ORDER BY seq DESC LIMIT 1")
            last = rows.fetchall()
        finally:
            conn.close()
        record = json.loads(last[0][0]) if last else {}
        if (record.get("trigger"), record.get("tool")) == (trigger, tool):
            raise _Crash

    return committed


def _crashed_run(
    contracts: ContractSet,
    path: Path,
    clock: Clock,
    supplier: Supplier,
    at: tuple[str, str] = ("classify", "hold_room"),
    **changes: Any,
) -> str:
    """Run until the store holds the move `at` (by default the hold's outcome), and die there;
    the run's id."""
    store = SqliteStore(path)
    engine = Engine(contracts=contracts, toolbox=supplier.tools(), store=store, clock=clock)
    original = _failpoints.committed
    _failpoints.committed = _crash_once(path, *at)  # type: ignore[assignment]
    try:
        with pytest.raises(_Crash):
            engine.run_sync(spec(**changes), SearchThenHold())
    finally:
        _failpoints.committed = original  # type: ignore[assignment]
    (listing,) = store.runs()
    store.close()
    return listing.header.run_id


def _assert_replays(store: Store, contracts: ContractSet, run_id: str) -> None:
    outcome = replay(Recording.from_store(store, run_id), contracts)
    assert outcome.divergence is None, outcome.divergence
    assert outcome.identical


def _resume_timed(
    contracts: ContractSet,
    path: Path,
    run_id: str,
    supplier: Supplier,
    model: Any = None,
    **changes: Any,
) -> tuple[Any, float]:
    store = SqliteStore(path)
    engine = Engine(contracts=contracts, toolbox=supplier.tools(), store=store, clock=SystemClock())
    began = time.monotonic()
    try:
        result = asyncio.run(engine.resume(run_id, spec(**changes), model or SearchThenHold()))
        took = time.monotonic() - began
        _assert_replays(store, contracts, run_id)
    finally:
        store.close()
    return result, took


@pytest.mark.slow
def test_a_run_resumed_on_a_real_clock_skips_its_recorded_waits(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """Recorded on a real clock: a 0.5 s search rate limited with Retry-After 1, then a 0.5 s
    search and a hold (2 s recorded). Resumed on a real clock, it goes on at once, ends as the
    run never crashed does, and holds no room twice."""
    path = tmp_path / "real.sqlite"
    first = Supplier(SystemClock(), latency=0.5, limited="1")
    run_id = _crashed_run(contracts, path, SystemClock(), first)
    assert (first.searches, first.holds) == (2, 1)

    going_on = Supplier(SystemClock(), latency=0.5, limited="1")
    result, took = _resume_timed(contracts, path, run_id, going_on)
    assert took < 0.5, f"the resume took {took:.2f} s of a 2 s recording"
    assert (going_on.searches, going_on.holds) == (0, 0)  # nothing is done again
    assert result.terminal is State.COMPLETE, result.reason
    assert result.elapsed_s >= 2.0  # the recorded time is still the run's

    fake = FakeClock(START)
    uncrashed = Supplier(fake, latency=0.5, limited="1")
    engine = Engine(contracts=contracts, toolbox=uncrashed.tools(), store=MemoryStore(), clock=fake)
    whole = engine.run_sync(spec(), SearchThenHold())
    assert (whole.terminal, whole.reason) == (result.terminal, result.reason)
    assert whole.waits_s == result.waits_s == [1.0]


def test_a_long_recording_resumed_on_a_real_clock_takes_no_time(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """Forty seconds recorded (an 8 s search, Retry-After 24, an 8 s search): the resume on a
    real clock takes well under a second."""
    path = tmp_path / "long.sqlite"
    recorded, limits = FakeClock(START), Limits(max_seconds=120)
    supplier = Supplier(recorded, latency=8, limited="24")
    run_id = _crashed_run(contracts, path, recorded, supplier, limits=limits)
    going_on = Supplier(SystemClock(), latency=8, limited="24")
    result, took = _resume_timed(contracts, path, run_id, going_on, limits=limits)
    assert took < 1.0
    assert (going_on.searches, going_on.holds) == (0, 0)
    assert result.terminal is State.COMPLETE and result.elapsed_s >= 40.0


def test_a_retry_wait_stored_before_the_crash_is_not_waited_again(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """The run died after its retry's 24 s wait was stored, before the retried search answered:
    the recorded time reaches past the last input (8 s) to the wait's end (32 s), so the resume
    goes on at once with the retried search."""
    path = tmp_path / "retry.sqlite"
    recorded, limits = FakeClock(START), Limits(max_seconds=120)
    supplier = Supplier(recorded, latency=8, limited="24")
    run_id = _crashed_run(
        contracts, path, recorded, supplier, ("retry", "search_flights"), limits=limits
    )
    assert supplier.searches == 1
    going_on = Supplier(SystemClock(), latency=0.1)
    result, took = _resume_timed(contracts, path, run_id, going_on, limits=limits)
    assert took < 1.0, f"the resume took {took:.2f} s"
    assert (going_on.searches, going_on.holds) == (1, 1)
    assert result.terminal is State.COMPLETE and result.waits_s == [24.0]
    assert result.elapsed_s >= 32.0


@pytest.mark.slow
def test_the_deadline_counts_recorded_time_and_live_time_not_the_downtime(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """A run of at most 2 s stops after 1 s of recorded search; after 0.5 s down, it is resumed
    and its next search hangs: the deadline cuts it 1 s into the resume (recorded 1 s + live
    1 s), neither at once (as if the downtime counted) nor after the recorded time again."""
    path = tmp_path / "deadline.sqlite"
    store = SqliteStore(path)
    first, limits = Supplier(SystemClock(), latency=1.0), Limits(max_seconds=2.0)
    engine = Engine(contracts=contracts, toolbox=first.tools(), store=store, clock=SystemClock())
    original = _failpoints.committed
    _failpoints.committed = _crash_once(path, "classify", "search_flights")  # type: ignore[assignment]
    try:
        with pytest.raises(_Crash):
            engine.run_sync(spec(limits=limits), SearchAgain())
    finally:
        _failpoints.committed = original  # type: ignore[assignment]
    (listing,) = store.runs()
    store.close()
    time.sleep(0.5)  # down

    going_on = Supplier(SystemClock(), latency=30.0)
    result, took = _resume_timed(
        contracts, path, listing.header.run_id, going_on, SearchAgain(), limits=limits
    )
    assert result.reason == "deadline", result.reason
    assert 0.8 < took < 1.5, f"cut {took:.2f} s into the resume"
    assert 1.9 < result.elapsed_s < 2.5
    assert going_on.searches == 1


class SearchAgain:
    """Searches until the time is up (a second search after the first one's result)."""

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        if tool_choice == "none":
            return answer("Out of time.")
        n = sum(isinstance(m, ToolResultMessage) for m in transcript.messages)
        return calls(
            ToolCall(
                id=f"s{n + 1}",
                name="search_flights",
                arguments={**FLIGHT_ARGS, "max_results": n + 1},  # not a repeat
            )
        )


def test_continue_approved_on_a_real_clock_does_not_relive_the_waiting_run(
    contracts: ContractSet,
) -> None:
    """The waiting run searched for 36 s (rate limited once) before it proposed its hold: its
    continuation on a real clock re-drives that at once, then makes the approved write once."""
    store = MemoryStore()
    policy = Policy(approval=ApprovalRules(tools=("hold_room",)))
    recorded, limits = FakeClock(START), Limits(max_seconds=120)
    first = Supplier(recorded, latency=8, limited="20")
    engine = Engine(
        contracts=contracts, toolbox=first.tools(), store=store, clock=recorded, policy=policy
    )
    waiting = engine.run_sync(spec(limits=limits), SearchThenHold())
    assert (waiting.terminal, waiting.reason) == (State.ESCALATE, "approval_required")
    secret, now = ApprovalSecret("a test secret of at least 16 bytes"), datetime.now(UTC)
    approve(store, waiting.run_id, approver="alice", secret=secret, now=now)

    going_on = Supplier(SystemClock(), latency=8, limited="20")
    engine = Engine(
        contracts=contracts,
        toolbox=going_on.tools(),
        store=store,
        clock=SystemClock(),
        policy=policy,
    )
    other = spec(limits=Limits(max_seconds=60))  # not the waiting run's: refused, none stored
    with pytest.raises(ResumeRefused, match=r"max_seconds 120\.0 \(given 60\.0\)"):
        asyncio.run(
            engine.continue_approved(
                waiting.run_id, other, SearchThenHold(), secret=secret, now=now
            )
        )
    assert len(store.runs()) == 1
    began = time.monotonic()
    continued = asyncio.run(
        engine.continue_approved(
            waiting.run_id, spec(limits=limits), SearchThenHold(), secret=secret, now=now
        )
    )
    assert time.monotonic() - began < 1.0
    assert continued.terminal is State.COMPLETE, continued.reason
    assert (going_on.searches, going_on.holds) == (0, 1)
    assert continued.elapsed_s >= 36.0
    _assert_replays(store, contracts, continued.run_id)


def test_a_wait_past_the_horizon_is_real_and_one_across_it_sleeps_only_its_remainder() -> None:
    base = FakeClock(START)

    async def waits() -> list[float]:
        clock = CatchUp(base, horizon=5.0)
        await clock.sleep(3.0)  # recorded: skipped
        seen = [clock.monotonic() - clock.started]
        await clock.sleep(4.0)  # 2 s recorded, 2 s lived
        seen.append(clock.monotonic() - clock.started)
        await clock.sleep(1.0)  # past the horizon: lived
        seen.append(clock.monotonic() - clock.started)
        return seen

    with asyncio.Runner(loop_factory=base.loop_factory) as runner:
        seen = runner.run(waits())
    assert seen == [3.0, 7.0, 8.0]
    assert base.sleeps == [2.0, 1.0]

    async def across() -> float:  # on a real clock: 0.2 s recorded, 0.3 s lived
        clock = CatchUp(SystemClock(), horizon=0.2)
        began = time.monotonic()
        await clock.sleep(0.5)
        return time.monotonic() - began

    assert 0.28 < asyncio.run(across()) < 0.45


def test_skipped_waits_end_in_order_and_the_run_sees_each_end() -> None:
    """Two calls in flight at once, recorded to end at 3 s and 5 s: the run observes the first
    at 3 s, while the second is still waiting, as it did when it was recorded."""

    async def batch() -> list[tuple[str, float]]:
        clock = CatchUp(SystemClock(), horizon=10.0)
        seen: list[tuple[str, float]] = []

        async def call(name: str, ends: float) -> str:
            await clock.sleep(ends)
            seen.append((name, round(clock.monotonic() - clock.started, 1)))
            return name

        later = asyncio.ensure_future(call("later", 5.0))
        sooner = asyncio.ensure_future(call("sooner", 3.0))
        await sooner
        seen.append(("observed sooner", round(clock.monotonic() - clock.started, 1)))
        await clock.sleep(1.0)  # a retry's wait, while `later` is still in flight
        seen.append(("retried", round(clock.monotonic() - clock.started, 1)))
        await later
        seen.append(("observed later", round(clock.monotonic() - clock.started, 1)))
        return seen

    began = time.monotonic()
    seen = asyncio.run(batch())
    assert time.monotonic() - began < 0.5
    assert seen == [
        ("sooner", 3.0),
        ("observed sooner", 3.0),
        ("retried", 4.0),
        ("later", 5.0),
        ("observed later", 5.0),
    ]


def _date_in(seconds: float) -> str:
    from email.utils import formatdate  # noqa: PLC0415

    return formatdate(time.time() + seconds, usegmt=True)


@pytest.mark.slow
def test_a_retry_after_date_on_a_real_clock_replays_and_resumes_to_the_microsecond(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """A Retry-After in date form is read at the wall time the outcome came as the record has
    it (the run's recorded start plus the outcome's recorded end), not at the clock's now when
    the decision is made: microseconds later in the run, and hours later on a resume. So the
    recorded wait is derived again exactly: the log replays identical (it diverged by tens of
    microseconds in `wait_s`), and a run crashed after the retry resumes (it diverged at once).
    """
    path = tmp_path / "date.sqlite"
    first = Supplier(SystemClock(), latency=0.05, limited=_date_in(2))
    run_id = _crashed_run(contracts, path, SystemClock(), first, at=("retry", "search_flights"))
    store = SqliteStore(path)
    try:
        (retry,) = [r for r in store.transitions(run_id) if r.trigger == "retry"]
        assert retry.wait_s is not None and 0 < retry.wait_s <= 2
        _assert_replays(store, contracts, run_id)  # as far as it goes
    finally:
        store.close()
    time.sleep(0.3)  # the process is down a while: the date is read as the record has it
    going_on = Supplier(SystemClock(), latency=0.05)
    result, _took = _resume_timed(contracts, path, run_id, going_on)
    assert result.terminal is State.COMPLETE, result.reason
    assert result.waits_s == [retry.wait_s] and going_on.holds == 1
