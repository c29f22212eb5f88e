"""`StepCommits` (durability="step"): a held run's transitions wait for the end of their step,
but never past a claim, a settle, the summary or a read of that run; SQLite writes a step's
transitions in one transaction, all or nothing."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.base import _failpoints
from runner.base.errors import StoreError
from runner.core.states import State
from runner.record.operations import OperationStatus
from runner.record.trace import RunSummary, TransitionRecord
from runner.store import MemoryStore, SqliteStore, Store
from runner.store.step_commits import StepCommits
from tests.support.store_contract import header, operation, record


def to(seq: int, state: State, run_id: str = "r1") -> TransitionRecord:
    return dataclasses.replace(record(seq, run_id), to_state=state)


def summary(run_id: str = "r1") -> RunSummary:
    return RunSummary(
        run_id=run_id,
        terminal="complete",
        reason="answered",
        attempts=1,
        model_steps=1,
        tokens_in=1,
        tokens_out=1,
        elapsed_s=0.1,
    )


@pytest.fixture(params=["memory", "sqlite"])
def inner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.sqlite")
    yield made
    made.close()


def stored(store: Store, run_id: str = "r1") -> list[int]:
    inner = store.inner if isinstance(store, StepCommits) else store
    return [r.seq for r in inner.transitions(run_id)]


def test_a_held_run_commits_when_its_step_ends(inner: Store) -> None:
    store = StepCommits(inner)
    store.begin_run(header())
    store.hold("r1")
    store.append(to(1, State.CALL))
    store.append(to(2, State.OBSERVE))
    assert stored(inner) == []  # the step is in flight
    store.append(to(3, State.PLAN))
    assert stored(inner) == [1, 2, 3]
    store.append(to(4, State.COMPLETE))  # a terminal state ends a step too
    assert stored(inner) == [1, 2, 3, 4]


def test_a_run_not_held_passes_straight_through(inner: Store) -> None:
    store = StepCommits(inner)
    store.begin_run(header())
    store.append(to(1, State.CALL))
    assert stored(inner) == [1]


def test_a_claim_commits_what_the_run_holds_first(inner: Store) -> None:
    """The intent's transitions (and the calls before it) are durable before the intent is."""
    store = StepCommits(inner)
    store.begin_run(header())
    store.hold("r1")
    store.append(to(1, State.CALL))
    store.claim(operation())
    assert stored(inner) == [1]
    assert [op.key for op in inner.operations("r1")] == [operation().key]


def test_a_settle_and_the_summary_commit_what_is_held_first(inner: Store) -> None:
    store = StepCommits(inner)
    store.begin_run(header())
    store.hold("r1")
    store.claim(operation())
    store.append(to(1, State.CALL))
    store.settle(operation().key, OperationStatus.COMMITTED, {"hold_id": "H-1"})
    assert stored(inner) == [1]
    store.append(to(2, State.OBSERVE))
    store.end_run(summary())
    assert stored(inner) == [1, 2]
    assert inner.summary("r1") is not None


def test_reading_a_held_run_commits_it_first(inner: Store) -> None:
    store = StepCommits(inner)
    store.begin_run(header())
    store.hold("r1")
    store.append(to(1, State.CALL))
    assert [r.seq for r in store.transitions("r1")] == [1]


def test_releasing_a_run_commits_it_and_stops_holding(inner: Store) -> None:
    store = StepCommits(inner)
    store.begin_run(header())
    store.hold("r1")
    store.append(to(1, State.CALL))
    store.release("r1")
    assert stored(inner) == [1]
    store.append(to(2, State.OBSERVE))
    assert stored(inner) == [1, 2]


def test_sqlite_commits_a_step_in_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commits: list[int] = []
    monkeypatch.setattr(_failpoints, "committed", lambda: commits.append(1))
    inner = SqliteStore(tmp_path / "s.sqlite")
    store = StepCommits(inner)
    store.begin_run(header())
    store.hold("r1")
    before = len(commits)
    for seq, state in enumerate((State.CALL, State.OBSERVE, State.PLAN), start=1):
        store.append(to(seq, state))
    assert len(commits) - before == 1
    store.close()
    conn = sqlite3.connect(tmp_path / "s.sqlite")
    assert conn.execute("SELECT COUNT(*) FROM transitions").fetchone() == (3,)
    conn.close()


def test_sqlite_append_all_is_all_or_nothing(tmp_path: Path) -> None:
    inner = SqliteStore(tmp_path / "s.sqlite")
    inner.begin_run(header())
    with pytest.raises(StoreError, match="seq 3 after 1"):
        inner.append_all([(to(1, State.CALL), ()), (to(3, State.OBSERVE), ())])
    assert stored(inner) == []
    inner.append_all([(to(1, State.CALL), ()), (to(2, State.OBSERVE), ())])
    assert stored(inner) == [1, 2]
    inner.close()
