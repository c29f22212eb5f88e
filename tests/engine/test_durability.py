"""Durability modes (issue 11): `transition` commits every transition, `step` the transitions of a
step together; in both, a write's intent (with its key) is committed before the write is
dispatched and its outcome before anything depends on it.

Each check looks at the SQLite file through a connection of its own, as another process would
after a crash: what is committed there is what survives.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runner.base import _failpoints
from runner.base.clock import FakeClock
from runner.base.errors import ConfigError, ResumeRefused
from runner.core.budget import Limits
from runner.engine.engine import Engine
from runner.models.base import ModelReply, ToolCall, ToolChoice, ToolSpec
from runner.models.transcript import Transcript
from runner.record.trace import Durability, RunHeader
from runner.store import SqliteStore
from runner.tools.contracts import ContractSet, compile_contract
from runner.tools.invocation import ToolImplementation, ToolInvocation, ToolResponse
from tests.support.hostile_runs import FLIGHTS_OK, HOLD_ARGS, START, answer, calls, spec
from tests.support.travel import FLIGHT_ARGS

OTHER_SEARCH = {**FLIGHT_ARGS, "max_results": 2}
HELD = {"status": "ok", "hold_id": "HX-1", "expires_at": "2027-03-02T09:00:00Z"}


class Committed:
    """What another connection sees in the store file right now."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.path)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def last_state(self) -> str | None:
        rows = self.rows("SELECT record FROM transitions ORDER BY seq DESC LIMIT 1")
        return None if not rows else str(json.loads(rows[0][0])["to_state"])

    def operation(self, key: str) -> tuple[str, str | None] | None:
        rows = self.rows("SELECT status, result FROM operations WHERE key = ?", key)
        return (rows[0][0], rows[0][1]) if rows else None


class Watching:
    """A model and tools that check, at each request and dispatch, what is committed."""

    def __init__(self, committed: Committed) -> None:
        self.committed = committed
        self.problems: list[str] = []
        self.requests = 0
        self.replies = [
            calls(ToolCall(id="s1", name="search_flights", arguments=dict(FLIGHT_ARGS))),
            calls(ToolCall(id="h1", name="hold_room", arguments=dict(HOLD_ARGS))),
            calls(
                ToolCall(
                    id="s2", name="search_flights", arguments={**FLIGHT_ARGS, "max_results": 2}
                )
            ),
        ]
        self.held_key: str | None = None

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        self.requests += 1
        if self.requests > 1 and self.committed.last_state() != "plan":
            self.problems.append(f"request {self.requests}: the step before is not committed")
        if self.held_key is not None:  # the hold's outcome, before the model reads it
            stored = self.committed.operation(self.held_key)
            if stored is None or stored[0] != "committed":
                self.problems.append(f"request {self.requests}: the hold's outcome is {stored}")
        return self.replies.pop(0) if self.replies else answer("held")

    def implementation(self, tool: str) -> ToolImplementation | None:
        async def respond(invocation: ToolInvocation) -> ToolResponse:
            if tool == "hold_room":
                assert invocation.operation_key is not None
                stored = self.committed.operation(invocation.operation_key)
                if stored is None or stored[0] != "pending":
                    self.problems.append(f"hold dispatched with its intent {stored}")
                self.held_key = invocation.operation_key
                return ToolResponse(
                    payload={
                        "status": "ok",
                        "hold_id": "HX-1",
                        "expires_at": "2027-03-02T09:00:00Z",
                    }
                )
            return ToolResponse(payload=FLIGHTS_OK)

        return respond


def _run(
    contracts: ContractSet, tmp_path: Path, durability: Durability
) -> tuple[Watching, Any, int]:
    committed = Committed(tmp_path / f"{durability}.sqlite")
    store = SqliteStore(committed.path)
    watching = Watching(committed)
    commits: list[int] = []
    engine = Engine(
        contracts=contracts,
        toolbox=watching,
        store=store,
        clock=FakeClock(START),
        durability=durability,
    )
    original = _failpoints.committed
    _failpoints.committed = lambda: commits.append(1)  # type: ignore[assignment]
    try:
        result = engine.run_sync(spec(), watching)
    finally:
        _failpoints.committed = original  # type: ignore[assignment]
        store.close()
    return watching, result, len(commits)


@pytest.mark.parametrize("durability", ["transition", "step"])
def test_intent_before_dispatch_and_outcome_before_the_next_request(
    durability: Durability, contracts: ContractSet, tmp_path: Path
) -> None:
    watching, result, _ = _run(contracts, tmp_path, durability)
    assert result.terminal.value == "complete", result.reason
    assert watching.requests == 4 and watching.held_key is not None
    assert watching.problems == []


def test_both_modes_store_the_same_run_and_step_commits_less(
    contracts: ContractSet, tmp_path: Path
) -> None:
    _, by_transition, transition_commits = _run(contracts, tmp_path, "transition")
    _, by_step, step_commits = _run(contracts, tmp_path, "step")

    def stored(name: str, run_id: str) -> list[str]:
        conn = sqlite3.connect(tmp_path / f"{name}.sqlite")
        rows = conn.execute(
            "SELECT record FROM transitions WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
        conn.close()
        # The run's id, and the operation key minted within it, differ from run to run.
        return [
            re.sub(r"hold_room:[0-9a-f]+", "KEY", row[0].replace(run_id, "RUN")) for row in rows
        ]

    assert stored("step", by_step.run_id) == stored("transition", by_transition.run_id)
    assert by_step.terminal == by_transition.terminal
    # 10 transitions: one commit each, or one a step (4) and one before the intent; and the
    # header, the intent, the outcome and the summary in both; the run's lease taken (an ended
    # run's is left as it is).
    assert len(by_step.transitions) == 10
    assert (transition_commits, step_commits) == (10 + 4 + 1, 5 + 4 + 1)


def test_an_unknown_durability_is_refused_before_anything_is_stored(
    contracts: ContractSet, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="one of transition, step"):
        Engine(
            contracts=contracts,
            toolbox=Watching(Committed(tmp_path / "x")),
            store=SqliteStore(tmp_path / "x.sqlite"),
            clock=FakeClock(START),
            durability="sometimes",  # type: ignore[arg-type]
        )
    store = SqliteStore(tmp_path / "y.sqlite")
    engine = Engine(
        contracts=contracts,
        toolbox=Watching(Committed(tmp_path / "y")),
        store=store,
        clock=FakeClock(START),
    )
    with pytest.raises(ConfigError, match=r"RunSpec\.durability"):
        engine.run_sync(spec(durability="never"), Watching(Committed(tmp_path / "y")))
    assert store.runs() == []
    store.close()


class _Crash(BaseException):
    """The process dying right after a commit: nothing of the runner's catches it."""


def _crash_after(commits: int) -> Any:
    made = []

    def committed() -> None:
        made.append(1)
        if len(made) == commits:
            raise _Crash

    return committed


def _crashed(contracts: ContractSet, path: Path, commits: int, **engine: Any) -> RunHeader:
    """A run in a new store at `path` that dies right after its `commits`-th commit (`engine`:
    the engine's own settings); the header it left."""
    store = SqliteStore(path)
    first = Watching(Committed(path))
    running = Engine(
        contracts=contracts, toolbox=first, store=store, clock=FakeClock(START), **engine
    )
    original = _failpoints.committed
    _failpoints.committed = _crash_after(commits)  # type: ignore[assignment]
    try:
        with pytest.raises(_Crash):
            running.run_sync(spec(), first)
    finally:
        _failpoints.committed = original  # type: ignore[assignment]
    (listing,) = store.runs()
    store.close()
    return listing.header


def _resumed_commits(
    contracts: ContractSet, tmp_path: Path, began: Durability, resumed: Durability | None
) -> tuple[Durability | None, int]:
    """A run begun in `began` and killed after its third commit (its lease, its header, then its
    first transition or its first step), then resumed by an engine whose own default is the other
    mode, with `resumed` in the resume's spec. Returns the mode the header records and the
    commits the resumed run made."""
    path = tmp_path / f"{began}-{resumed}.sqlite"
    header = _crashed(contracts, path, 3, durability=began)
    run_id, recorded = header.run_id, header.durability
    original = _failpoints.committed

    store = SqliteStore(path)
    going_on = Watching(Committed(path))
    going_on.replies = going_on.replies[1:]  # the first request is re-driven from the store
    going_on.requests = 1
    other: Durability = "transition" if began == "step" else "step"
    clock = FakeClock(START)
    engine = Engine(
        contracts=contracts, toolbox=going_on, store=store, clock=clock, durability=other
    )
    commits: list[int] = []
    _failpoints.committed = lambda: commits.append(1)  # type: ignore[assignment]
    try:
        with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
            result = runner.run(engine.resume(run_id, spec(durability=resumed), going_on))
    finally:
        _failpoints.committed = original  # type: ignore[assignment]
        store.close()
    assert result.terminal.value == "complete", result.reason
    assert going_on.problems == []
    return recorded, len(commits)


@pytest.mark.parametrize("began", ["transition", "step"])
def test_a_resumed_run_commits_as_it_began_unless_its_spec_says_otherwise(
    began: Durability, contracts: ContractSet, tmp_path: Path
) -> None:
    """The header records the mode; a resume goes on in it, over the resuming engine's default
    (`runner resume` needs no `--durability`), and a mode the resume's spec names wins."""
    other: Durability = "transition" if began == "step" else "step"
    recorded, by_default = _resumed_commits(contracts, tmp_path, began, None)
    _, told_same = _resumed_commits(contracts, tmp_path, began, began)
    _, told_other = _resumed_commits(contracts, tmp_path, began, other)
    assert recorded == began
    assert by_default == told_same != told_other
    # What is left after the crash: 9 transitions (begun by transition: its first one is
    # stored) or 7 (begun by step: its first step is), committed one by one or a step at a
    # time (a step cut at the intent's claim counts twice); the intent, the outcome and the
    # summary in every case; the run's lease taken over (and left as it is once the run ended).
    left = {
        ("transition", "transition"): 9 + 3 + 1,
        ("transition", "step"): 5 + 3 + 1,
        ("step", "step"): 4 + 3 + 1,
        ("step", "transition"): 7 + 3 + 1,
    }
    assert (by_default, told_other) == (left[began, began], left[began, other])


def test_a_resume_under_other_limits_is_refused_before_anything_is_re_driven(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """A run's recorded decisions were taken under its limits: a resume given other ones is
    refused at once, naming each limit that differs (it used to stop with a divergence at the
    first decision they changed), and the run resumes as it was with its own."""
    path = tmp_path / "r.sqlite"
    run_id = _crashed(contracts, path, 3).run_id
    store = SqliteStore(path)  # the process died: the next one opens the file afresh
    stored = len(store.transitions(run_id))
    going_on = Watching(Committed(path))
    going_on.replies = going_on.replies[1:]
    going_on.requests = 1
    clock = FakeClock(START)
    engine = Engine(contracts=contracts, toolbox=going_on, store=store, clock=clock)
    other = Limits(max_attempts=3, max_seconds=45)
    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        with pytest.raises(ResumeRefused) as refused:
            runner.run(engine.resume(run_id, spec(limits=other), going_on))
        assert "max_attempts 50 (given 3), max_seconds 300.0 (given 45.0)" in str(refused.value)
        assert len(store.transitions(run_id)) == stored and going_on.requests == 1
        result = runner.run(engine.resume(run_id, spec(), going_on))
    store.close()
    assert result.terminal.value == "complete", result.reason


def _with_changed(contracts: ContractSet, name: str, **changes: Any) -> ContractSet:
    """`contracts` with `name`'s contract changed as given (compiled as a file's would be)."""
    changed = contracts[name].contract.model_copy(update=changes)
    compiled = compile_contract(changed, f"changed {name}")
    return ContractSet([compiled if c.name == name else c for c in contracts.values()])


def test_a_resume_under_a_contract_that_decides_otherwise_is_refused(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """A run resumed under another contract for one of its tools (a tighter schema, another
    timeout) took a call it had sent, or a result it had taken, otherwise: the record then
    replayed identical under neither set. It is refused before anything is re-driven, naming
    the tool, whether the tool is the run's or a write's lookup, and so is one reworded only
    (its description is the manifest); under its own contracts it resumes as it was."""
    path = tmp_path / "r.sqlite"
    run_id = _crashed(contracts, path, 3).run_id
    store = SqliteStore(path)
    stored = len(store.transitions(run_id))
    going_on = Watching(Committed(path))
    going_on.replies = going_on.replies[1:]
    going_on.requests = 1
    clock = FakeClock(START)
    hold = contracts["hold_room"].contract
    tighter = {**hold.input_schema, "maxProperties": 1}
    for name, other in (
        ("hold_room", _with_changed(contracts, "hold_room", input_schema=tighter)),
        ("lookup_hold", _with_changed(contracts, "lookup_hold", timeout_s=1.0)),
    ):
        engine = Engine(contracts=other, toolbox=going_on, store=store, clock=clock)
        with (
            asyncio.Runner(loop_factory=clock.loop_factory) as runner,
            pytest.raises(ResumeRefused, match=f"another contract for {name} "),
        ):
            runner.run(engine.resume(run_id, spec(), going_on))
        assert len(store.transitions(run_id)) == stored and going_on.requests == 1
    # reworded only: the description is the manifest, which sets each request's output limit
    reworded = _with_changed(contracts, "hold_room", description=hold.description + " Reworded.")
    engine = Engine(contracts=reworded, toolbox=going_on, store=store, clock=clock)
    with (
        asyncio.Runner(loop_factory=clock.loop_factory) as runner,
        pytest.raises(ResumeRefused, match="another contract for hold_room "),
    ):
        runner.run(engine.resume(run_id, spec(), going_on))
    engine = Engine(contracts=contracts, toolbox=going_on, store=store, clock=clock)
    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        result = runner.run(engine.resume(run_id, spec(), going_on))
    store.close()
    assert result.terminal.value == "complete", result.reason
