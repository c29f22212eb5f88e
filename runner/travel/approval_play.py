"""Play an approval fixture: run it, decide its proposal as the fixture says, continue, check.

The fixture's `approval` section scripts the person outside the model: the decision, who makes it,
the token's lifetime, when the continuation is asked for, and what is presented with it (the token
issued, a forged one, or one issued for another run). A continuation the fixture declares
`refused` must raise `ApprovalRefused` with that problem and leave everything as it was: no run
stored, no token used, no hold placed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from ..base.errors import ApprovalRefused
from ..core.confirm import ApprovalSecret, issue_token, read_token
from ..core.policy import Policy
from ..engine.approvals import approve, deny, pending_approvals
from ..harness.fixtures import Fixture
from ..harness.scenario import ScenarioRun, stored_world
from ..store.base import Store
from ..tools.contracts import ContractSet
from .scenario import continue_fixture, run_fixture
from .supplier import recorded_holds

FORGER = ApprovalSecret("not-the-runtime-secret-0123456789")


@dataclass(slots=True, kw_only=True)
class ApprovalPlay:
    first: ScenarioRun
    continued: ScenarioRun | None = None
    refused: ApprovalRefused | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return (
            self.first.passed
            and not self.failures
            and (self.continued is None or self.continued.passed)
        )


def play_approval(
    fixture: Fixture,
    contracts: ContractSet,
    store: Store,
    *,
    secret: ApprovalSecret,
    world_dir: Path,
    seed: int = 0,
) -> ApprovalPlay:
    script = fixture.approval
    first = run_fixture(fixture, contracts, store, seed=seed, world_dir=world_dir)
    play = ApprovalPlay(first=first)
    if script is None or script.decision is None:
        return play
    run_id = first.result.run_id
    decided_at = fixture.clock.start + timedelta(seconds=first.result.elapsed_s + 1)
    token: str | None = None
    if script.decision == "approve":
        given = approve(
            store,
            run_id,
            approver=script.approver,
            secret=secret,
            now=decided_at,
            ttl=timedelta(seconds=script.ttl_s),
            note=script.note,
        )
        token = _presented(
            script.present,
            given.token,
            fixture=fixture,
            contracts=contracts,
            store=store,
            secret=secret,
            world_dir=world_dir,
        )
    else:
        deny(store, run_id, approver=script.approver, now=decided_at, note=script.note)
    before = len(store.runs())
    policy = None
    if script.policy is not None:
        header = store.header(run_id)
        assert header is not None
        policy = Policy.model_validate({**header.policy, **script.policy})
    try:
        play.continued = continue_fixture(
            run_id,
            contracts,
            store,
            secret=secret,
            now=decided_at + timedelta(seconds=script.continue_after_s),
            token=token,
            tenant=script.tenant,
            policy=policy,
        )
    except ApprovalRefused as exc:
        play.refused = exc
    _check(play, script.refused, before, store)
    return play


def _presented(
    present: str,
    issued: str,
    *,
    fixture: Fixture,
    contracts: ContractSet,
    store: Store,
    secret: ApprovalSecret,
    world_dir: Path,
) -> str:
    claims = read_token(secret, issued)
    if present == "forged":  # the same claims, a longer life, signed without the secret
        longer = dataclasses.replace(claims, expires_at=claims.expires_at + timedelta(days=30))
        return issue_token(FORGER, longer)
    if present == "other_run":  # a genuine approval of the same write in another run
        other = run_fixture(fixture, contracts, store, world_dir=world_dir)
        proposal = pending_approvals(store, other.result.run_id)[0]
        return approve(
            store,
            proposal.run_id,
            approver=claims.approver,
            secret=secret,
            now=claims.expires_at - timedelta(minutes=1),
        ).token
    return issued


def _check(play: ApprovalPlay, refused: str | None, runs_before: int, store: Store) -> None:
    got = play.refused.problem if play.refused is not None else None
    if refused != got:
        play.failures.append(f"refused: expected {refused!r}, got {got!r} ({play.refused})")
    if play.refused is None:
        return
    if len(store.runs()) != runs_before:
        play.failures.append("a refused continuation stored a run")
    holds = holds_of(store, play.first.result.run_id)
    if holds != play.first.holds:
        play.failures.append(f"a refused continuation changed the holds: {holds}")


def holds_of(store: Store, run_id: str) -> int | None:
    """Active holds in the supplier database a stored fixture run names (None: it has none)."""
    header = store.header(run_id)
    return recorded_holds(stored_world(header).get("supplier_db"), None) if header else None
