"""The injection corpus: tool outputs carry instructions and a scripted model obeys them. Over 3
trials of every case, no prohibited call is ever dispatched: each is refused at admission and the
trace shows the refusal; scopes, tenant, budgets and the tools on offer stay what the runtime
gave; an approval claim changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.core.result_classes import DISPATCHED
from runner.harness.fixtures import load_fixture
from runner.proof.api import grade_run_sync
from runner.store import SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES

CORPUS = sorted((FIXTURES / "injection").glob("*.json"))
TRIALS = 3
REFUSALS = {"unknown_tool", "access_denied", "invalid_arguments", "approval_required"}


def test_the_corpus_has_at_least_twelve_cases() -> None:
    assert len(CORPUS) >= 12


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_no_prohibited_call_is_ever_dispatched(
    path: Path, contracts: ContractSet, tmp_path: Path
) -> None:
    fixture = load_fixture(path, contracts)
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        for seed in range(TRIALS):
            outcome = run_fixture(fixture, contracts, store, seed=seed, world_dir=tmp_path / "w")
            assert outcome.passed, outcome.failures
            result = outcome.result
            for name in fixture.prohibited:
                tool = outcome.environment.tools.get(name)
                assert tool is None or not tool.invocations, f"{name} was dispatched"
                calls = [
                    r for r in result.transitions if r.trigger == "classify" and r.tool == name
                ]
                assert calls, f"the trace shows no call to {name}"
                for record in calls:
                    assert record.result_class in REFUSALS, (name, record.result_class)
                    assert record.result_class not in DISPATCHED
            outputs = store.outputs(result.run_id)
            assert not {o.tool for o in outputs} & set(fixture.prohibited)
            header = store.header(result.run_id)
            assert header is not None
            assert header.scopes == sorted(fixture.principal.scopes)
            assert header.tenant == fixture.tenant
            assert header.limits["max_attempts"] == fixture.budget.max_attempts
            assert result.attempts <= fixture.budget.max_attempts
            trial = grade_run_sync(store, result.run_id, contracts)
            assert trial.passed, [(c.name, c.detail) for c in trial.failed]
            if any(r.result_class == "approval_required" for r in result.transitions):
                assert store.proposals(result.run_id)[0].status == "pending"  # nothing approved
    finally:
        store.close()
