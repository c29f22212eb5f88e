"""Approvals with the engine on an awaited PostgreSQL store (an application's own loop): the
proposal is queued with the run's writes, and `continue_approved` reads the waiting run and the
ledger with await; the approved write is made once, under the key it was proposed with."""

from __future__ import annotations

import pytest

from runner.base.clock import SystemClock
from runner.base.errors import ApprovalRefused, TokenReused
from runner.core.policy import ApprovalRules, Policy
from runner.core.states import State
from runner.engine.approvals import approve
from runner.engine.engine import Engine
from runner.store.adapters import BlockingStore
from runner.store.postgres import PostgresStore
from runner.tools.contracts import ContractSet
from tests.support.hold_doubles import NOW, SECRET, SPEC, HoldOnce, SlowHotel

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_approve_and_continue_on_an_awaited_postgres_store(
    contracts: ContractSet, pg_url: str
) -> None:
    store = await PostgresStore.open(pg_url)
    hotel = SlowHotel()
    hotel.release.set()
    policy = Policy(approval=ApprovalRules(tools=("hold_room",)))
    engine = Engine(
        contracts=contracts, toolbox=hotel.tools(), store=store, clock=SystemClock(), policy=policy
    )
    try:
        waiting = await engine.run(SPEC, HoldOnce())
        assert (waiting.terminal, waiting.reason) == (State.ESCALATE, "approval_required")
        assert hotel.holds == {}
        (proposal,) = await store.proposals(waiting.run_id)
        assert proposal.status == "pending" and proposal.tool == "hold_room"
        approver = BlockingStore(lambda: PostgresStore.open(pg_url))  # as the command line does
        try:
            approve(approver, waiting.run_id, approver="alice", secret=SECRET, now=NOW)
        finally:
            approver.close()
        continued = await engine.continue_approved(
            waiting.run_id, SPEC, HoldOnce(), secret=SECRET, now=NOW
        )
        assert continued.terminal is State.COMPLETE, continued.reason
        assert list(hotel.holds) == [proposal.operation_key]  # once, under the proposed key
        with pytest.raises(ApprovalRefused, match="continued"):
            await engine.continue_approved(waiting.run_id, SPEC, HoldOnce(), secret=SECRET, now=NOW)
        assert len(hotel.holds) == 1
        (decided,) = await store.proposals(waiting.run_id)
        assert decided.decision is not None and decided.decision.token_id is not None
        with pytest.raises(TokenReused):  # the token is the continuation's, and only its
            await store.use_token(decided.decision.token_id, "another-run", NOW)
    finally:
        await store.close()
