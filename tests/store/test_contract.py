"""One contract suite for every `Store`: memory and SQLite must behave the same."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runner.errors import StoreConflict, StoreError
from runner.models.base import ModelReply, TokenUsage, ToolCall
from runner.operations import Operation, OperationStatus
from runner.recording import RecordedOutput, RecordedTurn, Responded
from runner.store import MemoryStore, SqliteStore, Store
from runner.trace import OperationSummary, RunHeader, RunSummary, TransitionRecord

T0 = datetime(2027, 3, 1, 9, tzinfo=UTC)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.sqlite")
    yield made
    made.close()


def header(run_id: str = "r1") -> RunHeader:
    return RunHeader(
        run_id=run_id,
        name="fixture",
        tenant="optiverse",
        principal="agent-7",
        started_at=T0,
        task="Find flights.",
        tools=["search_flights"],
        scopes=["travel.read"],
        context={"task": {"earliest": "2027-03-25"}},
        limits={"max_attempts": 8},
        policy={"name": "default"},
        seed=0,
        annotations={"fixture": {"name": "fixture"}, "world": {"supplier_db": "/tmp/x"}},
    )


def record(seq: int, run_id: str = "r1") -> TransitionRecord:
    return TransitionRecord(
        run_id=run_id,
        seq=seq,
        time=T0 + timedelta(seconds=seq),
        from_state="plan",
        to_state="call",
        trigger="propose",
        tool="search_flights",
        args={"origin": "SFO"},
        attempt=seq,
        latency_ms=1.5,
        tokens_in=10,
        tokens_out=2,
    )


def operation(key: str = "t:hold_room:1", params: str = "h1", dispatch: int = 1) -> Operation:
    return Operation(
        key=key,
        tenant="t",
        tool="hold_room",
        run_id="r1",
        params_hash=params,
        status=OperationStatus.PENDING,
        created_at=T0,
        expires_at=T0 + timedelta(hours=1),
        dispatch=dispatch,
    )


def test_a_run_round_trips(store: Store) -> None:
    store.begin_run(header())
    store.append(record(1))
    store.append(record(2))
    summary = RunSummary(
        run_id="r1",
        terminal="complete",
        reason="model_final",
        attempts=2,
        model_steps=2,
        tokens_in=20,
        tokens_out=4,
        elapsed_s=1.25,
        waits_s=[2.0],
        answer="done",
        operations=[OperationSummary(key="k", tool="hold_room", status="committed")],
    )
    store.end_run(summary)
    assert store.header("r1") == header()
    assert store.transitions("r1") == [record(1), record(2)]
    assert store.summary("r1") == summary
    [listing] = store.runs()
    assert listing.header.run_id == "r1" and listing.summary == summary


def test_inputs_round_trip(store: Store) -> None:
    store.begin_run(header())
    reply = ModelReply(
        text="",
        tool_calls=(ToolCall(id="c1", name="search_flights", arguments={"a": 1}),),
        usage=TokenUsage(input_tokens=5, output_tokens=3),
        stop_reason="tool_use",
    )
    turn = RecordedTurn.of(
        run_id="r1",
        ordinal=1,
        tool_choice="auto",
        reply=reply,
        started_at=0.25,
        ended_at=0.5,
        transcript_digest="abc",
        model_state={"cursor": 1},
    )
    output = RecordedOutput(
        run_id="r1",
        ordinal=1,
        call_id="c1",
        tool="search_flights",
        operation_key=None,
        outcome=Responded(payload={"status": "ok"}, retry_after="2"),
        started_at=0.5,
        ended_at=1.0,
    )
    store.append(record(1), [turn, output])
    assert store.turns("r1") == [turn]
    assert store.turns("r1")[0].reply() == reply
    assert store.outputs("r1") == [output]


def test_gaps_and_duplicates_are_refused_and_change_nothing(store: Store) -> None:
    store.begin_run(header())
    store.append(record(1))
    with pytest.raises(StoreError, match="seq 3 after 1"):
        store.append(record(3))
    with pytest.raises(StoreError):
        store.begin_run(header())
    with pytest.raises(StoreError):
        store.append(record(1, run_id="nobody"))
    assert store.transitions("r1") == [record(1)]


def test_a_run_ends_once(store: Store) -> None:
    store.begin_run(header())
    summary = RunSummary(
        run_id="r1",
        terminal="abstain",
        reason="attempts",
        attempts=8,
        model_steps=9,
        tokens_in=1,
        tokens_out=1,
        elapsed_s=3.0,
    )
    store.end_run(summary)
    with pytest.raises(StoreError):
        store.end_run(summary)


def test_claim_is_insert_or_same_intent(store: Store) -> None:
    first = store.claim(operation())
    assert first.status is OperationStatus.PENDING
    store.settle(first.key, OperationStatus.FAILED)
    again = store.claim(operation(dispatch=3))  # the same intent, dispatched again
    assert again.status is OperationStatus.FAILED  # what it was before this claim
    [now] = store.operations("r1")
    assert (now.status, now.dispatch) == (OperationStatus.PENDING, 3)


def test_a_key_never_carries_two_payloads(store: Store) -> None:
    store.claim(operation())
    store.settle("t:hold_room:1", OperationStatus.COMMITTED, {"hold_id": "HOLD-1"})
    with pytest.raises(StoreConflict, match="idempotency_mismatch"):
        store.claim(operation(params="other"))
    [kept] = store.operations("r1")
    assert (kept.params_hash, kept.status, kept.result) == (
        "h1",
        OperationStatus.COMMITTED,
        {"hold_id": "HOLD-1"},
    )


def test_an_expired_key_is_replaced(store: Store) -> None:
    store.claim(operation())
    later = Operation(
        key="t:hold_room:1",
        tenant="t",
        tool="hold_room",
        run_id="r1",
        params_hash="other",
        status=OperationStatus.PENDING,
        created_at=T0 + timedelta(hours=2),
        expires_at=T0 + timedelta(hours=3),
        dispatch=9,
    )
    assert store.claim(later) == later


def test_settle_keeps_an_earlier_result(store: Store) -> None:
    store.claim(operation())
    store.settle("t:hold_room:1", OperationStatus.COMMITTED, {"hold_id": "HOLD-1"})
    store.settle("t:hold_room:1", OperationStatus.COMMITTED)
    assert store.operations("r1")[0].result == {"hold_id": "HOLD-1"}
    with pytest.raises(StoreError):
        store.settle("missing", OperationStatus.FAILED)


def test_operations_keep_claim_order(store: Store) -> None:
    for key in ("t:b", "t:a", "t:c"):
        store.claim(operation(key=key))
    assert [op.key for op in store.operations("r1")] == ["t:b", "t:a", "t:c"]
