"""The approval fixtures end as declared: approve, deny, expire, forge, another run, another tenant,
another policy, parameters changed after approval; every refusal sends and stores nothing."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner.base.clock import FakeClock
from runner.base.errors import ConfigError, TokenReused
from runner.core.confirm import ApprovalSecret
from runner.core.policy import ApprovalRules, Policy
from runner.engine.engine import Engine
from runner.harness.fixtures import load_fixture
from runner.models.scripted import ScriptedModel
from runner.proof.api import replay_run_sync
from runner.store import MemoryStore, SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.approval_play import holds_of, play_approval
from runner.travel.environment import ScriptedEnvironment
from runner.travel.scenario import run_fixture, spec_for
from tests.support.paths import FIXTURES

APPROVAL_FIXTURES = sorted((FIXTURES / "approval").glob("*.yaml"))
T0 = datetime(2027, 3, 1, 9, tzinfo=UTC)
SECRET = ApprovalSecret("the-runtime-secret-for-the-tests-0001")


@pytest.mark.parametrize("path", APPROVAL_FIXTURES, ids=lambda p: p.stem)
def test_every_approval_fixture_ends_as_declared(
    path: Path, contracts: ContractSet, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        fixture = load_fixture(path, contracts)
        play = play_approval(fixture, contracts, store, secret=SECRET, world_dir=tmp_path / "world")
        assert play.first.passed, play.first.failures
        assert not play.failures, play.failures
        if play.continued is not None:
            assert play.continued.passed, play.continued.failures
        for listing in store.runs():  # every run, waiting or continued, replays identical
            replayed = replay_run_sync(store, listing.header.run_id, contracts)  # type: ignore[union-attr]
            assert replayed.identical, replayed.divergence
    finally:
        store.close()


def test_an_approved_hold_commits_once_under_the_proposed_key(
    contracts: ContractSet, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        fixture = load_fixture(FIXTURES / "approval" / "hold_approved.yaml", contracts)
        play = play_approval(fixture, contracts, store, secret=SECRET, world_dir=tmp_path / "w")
        assert play.continued is not None
        waiting, continued = play.first.result, play.continued.result
        proposal = store.proposals(waiting.run_id)[0]
        proposed = [r for r in waiting.transitions if r.result_class == "approval_required"]
        assert [r.operation_key for r in proposed] == [proposal.operation_key]
        sent = [
            r for r in continued.transitions if r.tool == "hold_room" and r.trigger == "classify"
        ]
        assert [(r.result_class, r.operation_key) for r in sent] == [("ok", proposal.operation_key)]
        assert sent[0].approval is not None and sent[0].approval["approver"] == "alice"
        assert holds_of(store, continued.run_id) == 1
        header = store.header(continued.run_id)
        assert header is not None and header.continues is not None
        assert header.continues["run_id"] == waiting.run_id
        token_id = header.continues["grants"][0]["token_id"]
        assert "rct1" not in str(header)  # the header keeps the token's id, never the token
        with pytest.raises(TokenReused):  # the token was used by the continuation, once
            store.use_token(token_id, "someone-else", proposal.created_at)
    finally:
        store.close()


def test_the_model_never_sees_a_token_or_a_proposal_id(
    contracts: ContractSet, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        fixture = load_fixture(FIXTURES / "approval" / "hold_approved.yaml", contracts)
        play = play_approval(fixture, contracts, store, secret=SECRET, world_dir=tmp_path / "w")
        assert play.continued is not None
        shown = [turn for run in store.runs() for turn in store.turns(run.header.run_id)]  # type: ignore[union-attr]
        proposal = store.proposals()[0]
        assert proposal.decision is not None and proposal.decision.token is not None
        for turn in shown:
            assert proposal.decision.token not in repr(turn)
            assert proposal.decision.token_id not in repr(turn)
    finally:
        store.close()


def test_a_denial_is_recorded_with_its_approver(contracts: ContractSet, tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        fixture = load_fixture(FIXTURES / "approval" / "hold_denied.yaml", contracts)
        play = play_approval(fixture, contracts, store, secret=SECRET, world_dir=tmp_path / "w")
        assert play.continued is not None
        denied = [
            r for r in play.continued.result.transitions if r.result_class == "approval_denied"
        ]
        assert len(denied) == 1 and denied[0].decision == "abstain"
        assert denied[0].approval == {"verdict": "denied", "approver": "bob"}
        assert denied[0].reason == "denied by bob"
        decision = store.proposals(play.first.result.run_id)[0].decision
        assert decision is not None and decision.note == "over budget" and decision.token is None
        assert not play.continued.environment.tools["hold_room"].invocations
    finally:
        store.close()


def test_an_id_first_seen_in_a_tool_result_is_recorded_as_such(
    contracts: ContractSet, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        fixture = load_fixture(FIXTURES / "injection" / "instruction_in_hotel_name.json", contracts)
        run = run_fixture(fixture, contracts, store, world_dir=tmp_path / "w")
        proposal = store.proposals(run.result.run_id)[0]
        assert proposal.reasons == ["provenance:hotel_id"]
        assert proposal.provenance["hotel_id"] == "tool:search_hotels:call_1_0"
        assert proposal.provenance["check_in"] == "task"
        record = next(r for r in run.result.transitions if r.result_class == "approval_required")
        assert record.provenance == proposal.provenance
    finally:
        store.close()


def test_approval_never_grants_a_missing_scope(contracts: ContractSet, tmp_path: Path) -> None:
    """A caller cannot hand a run grants (they come from verified tokens only), and a write
    outside the principal's scopes is refused before any approval is even looked at."""
    fixture = load_fixture(
        FIXTURES / "injection" / "ignore_instructions_cancel_all.json", contracts
    )
    spec = dataclasses.replace(
        spec_for(fixture, 0),
        continuation={"run_id": "x", "key_scope": "x", "grants": [{"operation_key": "k"}]},
    )
    engine = Engine(
        contracts=contracts,
        toolbox=ScriptedEnvironment({}, fixture.tools, FakeClock(T0)),
        store=MemoryStore(),
        clock=FakeClock(T0),
    )
    with pytest.raises(ConfigError, match="continue_approved"):
        engine.run_sync(spec, ScriptedModel(fixture.model))
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        run = run_fixture(fixture, contracts, store, world_dir=tmp_path / "w")
        refused = [r for r in run.result.transitions if r.tool == "cancel_all_holds"]
        assert [r.result_class for r in refused] == ["access_denied"]
        assert store.proposals() == []  # refused for scope before any proposal is made
    finally:
        store.close()


class _NoLedger:
    """A store that keeps runs but no approvals (as a third-party `Store` may)."""

    def __init__(self) -> None:
        self._inner = MemoryStore()

    def __getattr__(self, name: str) -> object:
        if name in {"propose", "proposals", "decide", "use_token"}:
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_store_without_a_ledger_is_refused_before_a_run_that_may_need_approval(
    contracts: ContractSet,
) -> None:
    fixture = load_fixture(FIXTURES / "approval" / "hold_approved.yaml", contracts)
    store = _NoLedger()
    engine = Engine(
        contracts=contracts,
        toolbox=ScriptedEnvironment({}, fixture.tools, FakeClock(T0)),
        store=store,  # type: ignore[arg-type]
        clock=FakeClock(T0),
        policy=Policy(approval=ApprovalRules(tools=("hold_room",))),
    )
    with pytest.raises(ConfigError, match="keeps no approvals"):
        engine.run_sync(spec_for(fixture, 0), ScriptedModel(fixture.model))
    assert store.runs() == []  # refused before anything was stored
