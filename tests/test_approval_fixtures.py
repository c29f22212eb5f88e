"""The approval fixtures end as declared: approve, deny, expire, forge, another run, another tenant,
another policy, parameters changed after approval; every refusal sends and stores nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.api import replay_run_sync
from runner.confirm import ApprovalSecret
from runner.contracts import ContractSet
from runner.errors import TokenReused
from runner.store import SqliteStore
from runner.travel.approval_play import holds_of, play_approval
from runner.travel.fixtures import load_fixture

from .conftest import FIXTURES

APPROVAL_FIXTURES = sorted((FIXTURES / "approval").glob("*.yaml"))
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
