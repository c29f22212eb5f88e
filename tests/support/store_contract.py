"""One contract suite for every store, importable by any backend (as Burr's persister tests are).

A backend's test module subclasses `StoreContract` and gives it two fixtures: `store`, an
`AsyncStore` on an empty database (a synchronous store through `as_async`), and `another`, a second
handle on the same database (as a second worker's would be), for what only sharing can show.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from runner.base.errors import LeaseLost, StoreConflict, StoreError
from runner.models.base import ModelReply, TokenUsage, ToolCall
from runner.record.operations import Operation, OperationStatus
from runner.record.recording import RecordedOutput, RecordedTurn, Responded
from runner.record.trace import OperationSummary, RunHeader, RunSummary, TransitionRecord
from runner.store.base import AsyncStore, RunListing, UnreadableRun

T0 = datetime(2027, 3, 1, 9, tzinfo=UTC)


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


TTL = timedelta(seconds=30)


def _output(ordinal: int, run_id: str = "r1") -> RecordedOutput:
    return RecordedOutput(
        run_id=run_id,
        ordinal=ordinal,
        call_id=f"c{ordinal}",
        tool="search_flights",
        operation_key=None,
        outcome=Responded(payload={"status": "ok"}),
        started_at=0.5,
        ended_at=1.0 + ordinal,
    )


async def _inputs_alone(store: AsyncStore, outputs: list[RecordedOutput]) -> None:
    """`append_inputs`: not in the protocol (a user's store need not have it)."""
    await store.append_inputs(outputs[0].run_id, outputs)  # type: ignore[attr-defined]


class StoreContract:
    """What every store does the same. Subclass it with `store` and `another` fixtures."""

    pytestmark = pytest.mark.anyio

    async def test_a_run_round_trips(self, store: AsyncStore) -> None:
        await store.begin_run(header())
        await store.append(record(1))
        ended = replace(record(2), to_state="complete", trigger="answer", reason="model_final")
        await store.append(ended)  # a summary is listed only where the log's last move backs it
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
        await store.end_run(summary)
        assert await store.header("r1") == header()
        assert await store.transitions("r1") == [record(1), ended]
        assert await store.summary("r1") == summary
        [listing] = await store.runs()
        assert listing.header.run_id == "r1" and listing.summary == summary

    async def test_a_summary_the_log_does_not_back_is_listed_unreadable(
        self, store: AsyncStore
    ) -> None:
        """A run's listing says how it ended only where its last transition says so too."""
        for run_id, reason in (("r1", "model_final"), ("r2", "budget_exhausted")):
            await store.begin_run(header(run_id))
            ended = replace(record(1, run_id), to_state="abstain", trigger="give_up")
            await store.append(replace(ended, reason=reason))
            await store.end_run(
                RunSummary(
                    run_id=run_id,
                    terminal="abstain",
                    reason="budget_exhausted",
                    attempts=1,
                    model_steps=1,
                    tokens_in=10,
                    tokens_out=2,
                    elapsed_s=1.0,
                )
            )
        forged, whole = await store.runs()
        assert isinstance(forged, UnreadableRun) and forged.run_id == "r1"
        assert "its summary says abstain (budget_exhausted), but its last transition" in (
            forged.problem
        )
        assert isinstance(whole, RunListing) and whole.header.run_id == "r2"

    async def test_transitions_after_a_seq_read_only_what_follows_it(
        self, store: AsyncStore
    ) -> None:
        await store.begin_run(header())
        await store.begin_run(header("r2"))
        for seq in range(1, 8):
            await store.append(record(seq))
        await store.append(record(1, "r2"))
        assert await store.transitions_after("r1", 0, 100) == [record(n) for n in range(1, 8)]
        assert await store.transitions_after("r1", -1, 3) == [record(1), record(2), record(3)]
        assert await store.transitions_after("r1", 3, 2) == [record(4), record(5)]
        assert await store.transitions_after("r1", 6, 100) == [record(7)]
        assert await store.transitions_after("r1", 7, 100) == []
        assert await store.transitions_after("r1", 2, 0) == []
        assert await store.transitions_after("r2", 0, 100) == [record(1, "r2")]
        assert await store.transitions_after("nobody", 0, 100) == []

    async def test_inputs_round_trip(self, store: AsyncStore) -> None:
        await store.begin_run(header())
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
        await store.append(record(1), [turn, output])
        assert await store.turns("r1") == [turn]
        assert (await store.turns("r1"))[0].reply() == reply
        assert await store.outputs("r1") == [output]

    async def test_inputs_stored_alone_read_back_and_the_next_transition_follows(
        self, store: AsyncStore, another: AsyncStore
    ) -> None:
        """`append_inputs` (optional for a user's store; every built-in one has it): inputs
        before their transition, read with the others by ordinal, from this handle and another
        (a log may end in them: a crash before the next transition)."""
        await store.begin_run(header())
        await store.append(record(1), [_output(1)])
        await _inputs_alone(store, [_output(3)])
        assert await store.outputs("r1") == [_output(1), _output(3)]
        assert await another.outputs("r1") == [_output(1), _output(3)]
        assert await another.transitions("r1") == [record(1)]
        await store.append(record(2), [_output(2)])
        await another.append(record(3))  # a handle that did not append them reads the tail
        assert await store.transitions("r1") == [record(1), record(2), record(3)]
        assert await another.outputs("r1") == [_output(1), _output(2), _output(3)]
        with pytest.raises(StoreError):
            await _inputs_alone(store, [_output(1, "nobody")])

    async def test_a_taken_over_run_refuses_the_old_owners_inputs(
        self, store: AsyncStore, another: AsyncStore
    ) -> None:
        first = await store.acquire_lease("r1", "worker-a", T0, TTL)
        assert first is not None
        await store.begin_run(header())
        await store.append(record(1))
        await _inputs_alone(store, [_output(1)])
        taken = await another.acquire_lease("r1", "worker-b", T0 + TTL, TTL)
        assert taken is not None
        with pytest.raises(LeaseLost):
            await _inputs_alone(store, [_output(2)])
        await _inputs_alone(another, [_output(2)])
        assert await another.outputs("r1") == [_output(1), _output(2)]

    async def test_gaps_and_duplicates_are_refused_and_change_nothing(
        self, store: AsyncStore
    ) -> None:
        await store.begin_run(header())
        await store.append(record(1))
        with pytest.raises(StoreError, match="seq 3 after 1"):
            await store.append(record(3))
        with pytest.raises(StoreError):
            await store.begin_run(header())
        with pytest.raises(StoreError):
            await store.append(record(1, run_id="nobody"))
        assert await store.transitions("r1") == [record(1)]

    async def test_a_run_ends_once(self, store: AsyncStore) -> None:
        await store.begin_run(header())
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
        await store.end_run(summary)
        with pytest.raises(StoreError):
            await store.end_run(summary)

    async def test_claim_is_insert_or_same_intent(self, store: AsyncStore) -> None:
        first = await store.claim(operation())
        assert first.status is OperationStatus.PENDING
        await store.settle(first.key, OperationStatus.FAILED)
        again = await store.claim(operation(dispatch=3))  # the same intent, dispatched again
        assert again.status is OperationStatus.FAILED  # what it was before this claim
        [now] = await store.operations("r1")
        assert (now.status, now.dispatch) == (OperationStatus.PENDING, 3)

    async def test_a_key_never_carries_two_payloads(self, store: AsyncStore) -> None:
        await store.claim(operation())
        await store.settle("t:hold_room:1", OperationStatus.COMMITTED, {"hold_id": "HOLD-1"})
        with pytest.raises(StoreConflict, match="idempotency_mismatch"):
            await store.claim(operation(params="other"))
        [kept] = await store.operations("r1")
        assert (kept.params_hash, kept.status, kept.result) == (
            "h1",
            OperationStatus.COMMITTED,
            {"hold_id": "HOLD-1"},
        )

    async def test_an_expired_key_is_replaced(self, store: AsyncStore) -> None:
        await store.claim(operation())
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
        assert await store.claim(later) == later

    async def test_settle_keeps_an_earlier_result(self, store: AsyncStore) -> None:
        await store.claim(operation())
        await store.settle("t:hold_room:1", OperationStatus.COMMITTED, {"hold_id": "HOLD-1"})
        await store.settle("t:hold_room:1", OperationStatus.COMMITTED)
        assert (await store.operations("r1"))[0].result == {"hold_id": "HOLD-1"}
        with pytest.raises(StoreError):
            await store.settle("missing", OperationStatus.FAILED)

    async def test_operations_keep_claim_order(self, store: AsyncStore) -> None:
        for key in ("t:b", "t:a", "t:c"):
            await store.claim(operation(key=key))
        assert [op.key for op in await store.operations("r1")] == ["t:b", "t:a", "t:c"]

    async def test_a_lease_has_one_owner_until_it_expires(self, store: AsyncStore) -> None:
        held = await store.acquire_lease("r1", "worker-a", T0, TTL)
        assert held is not None and (held.owner, held.generation) == ("worker-a", 1)
        assert held.expires_at == T0 + TTL
        assert await store.acquire_lease("r1", "worker-b", T0 + TTL / 2, TTL) is None
        taken = await store.acquire_lease("r1", "worker-b", T0 + TTL, TTL)
        assert taken is not None and (taken.owner, taken.generation) == ("worker-b", 2)
        with pytest.raises(LeaseLost):
            await store.renew_lease(held, T0 + TTL, TTL)
        assert await store.acquire_lease("r1", "worker-a", T0 + TTL, TTL) is None

    async def test_renewing_keeps_the_generation(self, store: AsyncStore) -> None:
        held = await store.acquire_lease("r1", "worker-a", T0, TTL)
        assert held is not None
        renewed = await store.renew_lease(held, T0 + TTL / 2, TTL)
        assert (renewed.generation, renewed.expires_at) == (1, T0 + TTL * 1.5)
        # still held at the first expiry: the renewal moved it
        assert await store.acquire_lease("r1", "worker-b", T0 + TTL, TTL) is None
        again = await store.acquire_lease("r1", "worker-a", T0 + TTL, TTL)  # its owner: renewed
        assert again is not None and again.generation == 1

    async def test_a_released_lease_is_taken_at_once(self, store: AsyncStore) -> None:
        held = await store.acquire_lease("r1", "worker-a", T0, TTL)
        assert held is not None
        await store.release_lease(held)
        taken = await store.acquire_lease("r1", "worker-b", T0, TTL)
        assert taken is not None and taken.generation == 2
        await store.release_lease(held)  # a stale release changes nothing
        assert await store.acquire_lease("r1", "worker-c", T0, TTL) is None

    async def test_a_handed_back_run_refuses_a_straggling_write(
        self, store: AsyncStore, another: AsyncStore
    ) -> None:
        first = await store.acquire_lease("r1", "worker-a", T0, TTL)
        assert first is not None
        await store.begin_run(header())
        await store.release_lease(first)  # handed back while something still drives it
        await store.append(record(1))  # nobody took it yet: still the run's only writer
        taken = await another.acquire_lease("r1", "worker-b", T0, TTL)
        assert taken is not None
        with pytest.raises(LeaseLost):
            await store.append(record(2))
        await another.append(record(2))
        assert await another.transitions("r1") == [record(1), record(2)]

    async def test_a_taken_over_run_refuses_the_old_owners_writes(
        self, store: AsyncStore, another: AsyncStore
    ) -> None:
        first = await store.acquire_lease("r1", "worker-a", T0, TTL)
        assert first is not None
        await store.begin_run(header())
        await store.append(record(1))
        await store.claim(operation())
        taken = await another.acquire_lease("r1", "worker-b", T0 + TTL, TTL)
        assert taken is not None and taken.generation == 2
        with pytest.raises(LeaseLost):
            await store.append(record(2))
        with pytest.raises(LeaseLost):
            await store.claim(operation(dispatch=2))
        with pytest.raises(LeaseLost):
            await store.settle("t:hold_room:1", OperationStatus.COMMITTED)
        with pytest.raises(LeaseLost):
            await store.end_run(
                RunSummary(
                    run_id="r1",
                    terminal="abstain",
                    reason="attempts",
                    attempts=1,
                    model_steps=1,
                    tokens_in=1,
                    tokens_out=1,
                    elapsed_s=1.0,
                )
            )
        await another.append(record(2))  # the new owner goes on where the records stop
        assert await another.transitions("r1") == [record(1), record(2)]
        [kept] = await another.operations("r1")
        assert (kept.status, kept.dispatch) == (OperationStatus.PENDING, 1)
        assert await another.summary("r1") is None
