"""The approval ledger: memory, SQLite and PostgreSQL behave the same (proposals, decisions,
token uses); on PostgreSQL, two processes using one token at once: exactly one wins."""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.base.errors import ApprovalRefused, ConfigError, TokenReused
from runner.core.confirm import ApprovalSecret, verify_token
from runner.engine.approvals import approve, deny, find_proposal, pending_approvals, summarize_write
from runner.store import JsonlLog, MemoryStore, SqliteStore
from runner.store.adapters import BlockingStore
from runner.store.approvals import ApprovalDecision, ApprovalLedger, Proposal
from runner.store.postgres import PostgresStore

T0 = datetime(2027, 3, 1, 9, tzinfo=UTC)
SECRET = ApprovalSecret("s" * 32)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.pg)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ApprovalLedger]:
    made: MemoryStore | SqliteStore | BlockingStore
    if request.param == "postgres":  # as the command line serves it
        url = request.getfixturevalue("pg_url")
        made = BlockingStore(lambda: PostgresStore.open(url))
    else:
        made = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.sqlite")
    yield made
    made.close()


def proposal(
    run_id: str = "run-a", key: str = "t:hold_room:1", tool: str = "hold_room"
) -> Proposal:
    params = {"hotel_id": "H-SHIBA", "guests": 4}
    return Proposal(
        run_id=run_id,
        operation_key=key,
        tenant="t",
        tool=tool,
        params=params,
        params_hash="h" * 64,
        summary=summarize_write(tool, params),
        policy_digest="p" * 64,
        created_at=T0,
        call_id="call_1",
        reasons=["contract"],
        provenance={"hotel_id": "tool:search_hotels:call_0", "guests": "task"},
    )


def test_a_proposal_round_trips_and_proposing_again_finds_it(ledger: ApprovalLedger) -> None:
    first = ledger.propose(proposal())
    again = ledger.propose(dataclasses.replace(proposal(), summary="other"))
    assert again == first
    assert ledger.proposals() == [first]
    assert ledger.proposals("run-a") == [first] and ledger.proposals("run-b") == []


def test_a_decision_is_made_once(ledger: ApprovalLedger) -> None:
    ledger.propose(proposal())
    decision = ApprovalDecision(verdict="denied", approver="bob", decided_at=T0, note="no")
    decided = ledger.decide("run-a", "t:hold_room:1", decision)
    assert decided.status == "denied" and decided.decision == decision
    assert ledger.proposals() == [decided]
    with pytest.raises(ApprovalRefused) as caught:
        ledger.decide("run-a", "t:hold_room:1", decision)
    assert caught.value.problem == "not_pending"
    with pytest.raises(ApprovalRefused):
        ledger.decide("run-a", "t:hold_room:missing", decision)


def test_a_token_is_used_by_one_run(ledger: ApprovalLedger) -> None:
    ledger.use_token("tok", "run-b", T0)
    ledger.use_token("tok", "run-b", T0)  # the same run again: a resume re-driving its use
    with pytest.raises(TokenReused):
        ledger.use_token("tok", "run-c", T0)


def test_approve_issues_a_token_bound_to_the_proposal(ledger: ApprovalLedger) -> None:
    ledger.propose(proposal())
    ledger.propose(proposal(run_id="run-z"))
    assert [p.run_id for p in pending_approvals(ledger)] == ["run-a", "run-z"]
    given = approve(ledger, "run-a", approver="alice", secret=SECRET, now=T0)
    assert given.proposal.status == "approved"
    assert given.proposal.decision is not None and given.proposal.decision.approver == "alice"
    claims = verify_token(
        SECRET,
        given.token,
        run_id="run-a",
        operation_key="t:hold_room:1",
        params_hash="h" * 64,
        tenant="t",
        policy_digest="p" * 64,
        now=T0 + timedelta(minutes=29),
    )
    assert claims.approver == "alice" and claims.expires_at == T0 + timedelta(minutes=30)
    assert [p.run_id for p in pending_approvals(ledger)] == ["run-z"]
    with pytest.raises(ApprovalRefused):  # decided already: nothing pending for run-a
        approve(ledger, "run-a", approver="alice", secret=SECRET, now=T0)


def test_deny_and_naming_the_operation(ledger: ApprovalLedger) -> None:
    ledger.propose(proposal(key="t:hold_room:1"))
    ledger.propose(proposal(key="t:charge:2", tool="charge"))
    with pytest.raises(ApprovalRefused) as caught:
        find_proposal(ledger, "run-a")
    assert caught.value.problem == "ambiguous"
    denied = deny(ledger, "run-a", "charge", approver="bob", now=T0, note="too dear")
    assert denied.operation_key == "t:charge:2" and denied.status == "denied"
    assert find_proposal(ledger, "run-a").operation_key == "t:hold_room:1"
    with pytest.raises(ConfigError):
        deny(ledger, "run-a", approver="", now=T0)


def test_sqlite_keeps_approvals_across_connections(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path)
    store.propose(proposal())
    approve(store, "run-a", approver="alice", secret=SECRET, now=T0)
    store.use_token("tok", "run-b", T0)
    store.close()
    again = SqliteStore(path, read_only=True)
    assert again.proposals()[0].status == "approved"
    again.close()
    writer = SqliteStore(path)
    with pytest.raises(TokenReused):
        writer.use_token("tok", "run-c", T0)
    writer.close()


def test_a_store_without_a_ledger_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="keeps no approvals"):
        pending_approvals(JsonlLog(tmp_path / "log.jsonl"))


def test_the_summary_is_one_printable_line() -> None:
    text = summarize_write("hold_room", {"hotel_id": "H\nX\x1b[31m", "guests": 4})
    assert text.isprintable() and text.startswith("hold_room: guests=4, hotel_id=H?X?[31m")
    assert len(summarize_write("t", {"x": "y" * 1000})) == 300


_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
_VALUES = st.one_of(_TEXT, st.integers(-(2**62), 2**62), st.booleans(), st.none())


@settings(max_examples=40, deadline=None)
@given(params=st.dictionaries(_TEXT.filter(bool), _VALUES, max_size=5), approver=_TEXT)
def test_any_parameters_round_trip_and_print_on_one_line(
    params: dict[str, object], approver: str
) -> None:
    """Hostile parameters (control characters, bidi overrides, long numbers) are kept exactly
    in SQLite and summarized on one printable line; a hostile approver id is refused or kept."""
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "s.sqlite")
        try:
            made = dataclasses.replace(
                proposal(), params=params, summary=summarize_write("hold_room", params)
            )
            store.propose(made)
            assert store.proposals() == [made]
            assert made.summary.isprintable()
            try:
                decided = deny(store, "run-a", approver=approver, now=T0)
            except ConfigError:
                assert not approver or not approver.isprintable()
            else:
                assert decided.decision is not None and decided.decision.approver == approver
        finally:
            store.close()


def _token_racer(url: str, number: int, start: Barrier, won: Queue[tuple[int, str]]) -> None:
    """Use the shared token once everyone is ready; report whether this process's use won."""

    async def race() -> None:
        store = await PostgresStore.open(url)
        try:
            start.wait()
            try:
                await store.use_token("tok-race", f"run-{number}", T0)
                won.put((number, "won"))
            except TokenReused:
                won.put((number, "refused"))
        finally:
            await store.close()

    asyncio.run(race())


@pytest.mark.parametrize("racers", [2, 8])
def test_processes_using_one_token_at_once_exactly_one_wins(pg_url: str, racers: int) -> None:
    context = multiprocessing.get_context("spawn")
    start, won = context.Barrier(racers), context.Queue()
    processes = [
        context.Process(target=_token_racer, args=(pg_url, n, start, won)) for n in range(racers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    outcomes = dict(won.get(timeout=5) for _ in range(racers))
    winners = [n for n, outcome in outcomes.items() if outcome == "won"]
    assert len(winners) == 1 and len(outcomes) == racers
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute("SELECT token_id, run_id FROM runner_token_uses").fetchall()
    assert rows == [("tok-race", f"run-{winners[0]}")]


def test_the_postgres_ledger_is_shared_by_every_connection(pg_url: str) -> None:
    first = BlockingStore(lambda: PostgresStore.open(pg_url))
    first.propose(proposal())
    approve(first, "run-a", approver="alice", secret=SECRET, now=T0)
    first.close()
    second = BlockingStore(lambda: PostgresStore.open(pg_url))
    try:
        (decided,) = second.proposals("run-a")
        assert decided.status == "approved" and decided.decision is not None
        assert decided.decision.approver == "alice"
        assert pending_approvals(second) == []
    finally:
        second.close()
