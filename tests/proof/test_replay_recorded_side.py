"""A counterfactual replay compares its prediction with what the run recorded: the recorded side
comes from the transitions, never from the run's summary, which anyone can edit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from runner.core.budget import Limits
from runner.harness.fixtures import load_fixture
from runner.proof.replay import Recording, describe, replay
from runner.record.trace import OperationSummary
from runner.store.memory import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES


def _recorded(name: str, contracts: ContractSet, world: Path) -> Recording:
    store = MemoryStore()
    outcome = run_fixture(load_fixture(FIXTURES / f"{name}.yaml", contracts), contracts, store,
                          world_dir=world)  # fmt: skip
    return Recording.from_store(store, outcome.result.run_id)


def test_an_edited_summary_is_not_reported_as_what_the_run_did(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """The run ended `unknown` with its hold unsettled; its summary is edited to say `complete`
    with the hold committed. Replayed under another budget, the recorded side still says what
    the transitions say, and the edit is named."""
    recording = _recorded("hold_reconcile_inconclusive", contracts, tmp_path)
    summary = recording.summary
    assert summary is not None and summary.terminal == "unknown"
    recording.summary = dataclasses.replace(
        summary,
        terminal="complete",
        reason="model_final",
        operations=[OperationSummary(key=op.key, tool=op.tool, status="committed")
                    for op in summary.operations],
    )  # fmt: skip
    limits = Limits.model_validate({**recording.header.limits, "max_attempts": 1})
    said = describe(replay(recording, contracts, limits=limits))
    assert "recorded: seq 5, unknown (unknown_outcome), 0 committed writes" in said, said
    assert "complete (model_final), 1 committed writes" in said  # named as the summary's claim
    assert "summary" in said


def test_the_recorded_side_of_an_honest_run_is_unchanged(
    tmp_path: Path, contracts: ContractSet
) -> None:
    recording = _recorded("hold_timeout_after_commit", contracts, tmp_path)
    limits = Limits.model_validate({**recording.header.limits, "max_attempts": 1})
    said = describe(replay(recording, contracts, limits=limits))
    assert said.endswith("recorded: seq 9, complete (model_final), 1 committed writes"), said
