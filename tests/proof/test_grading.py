"""Grading reads the record alone; each trajectory check catches the violation it names."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from pathlib import Path

import pytest

from runner.cli import main
from runner.harness.fixtures import load_fixture
from runner.proof.grading import TRAJECTORY_CHECKS, grade
from runner.proof.replay import Recording
from runner.store import SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES


def recorded(name: str, tmp_path: Path, contracts: ContractSet) -> tuple[Recording, int | None]:
    store = SqliteStore(tmp_path / f"{name}.sqlite")
    fixture = load_fixture(FIXTURES / f"{name}.yaml", contracts)
    outcome = run_fixture(fixture, contracts, store, world_dir=tmp_path / name)
    recording = Recording.from_store(store, outcome.result.run_id)
    store.close()
    return recording, outcome.holds


def failed_names(recording: Recording, contracts: ContractSet) -> set[str]:
    """The checks of the record's claims that fail, each on its own: the replay refutes every
    edited record here too (`replays_as_recorded`, tests/proof/test_grade_replays.py)."""
    return {check.name for check in grade(recording, contracts, None, None, replayed=False).failed}


@pytest.mark.parametrize(
    "name", ["hold_not_committed", "parallel_calls", "access_denied", "rate_limited"]
)
def test_a_sound_run_passes_every_trajectory_check(
    name: str, tmp_path: Path, contracts: ContractSet
) -> None:
    recording, holds = recorded(name, tmp_path, contracts)
    fixture = load_fixture(FIXTURES / f"{name}.yaml", contracts)
    trial = grade(recording, contracts, fixture.expect, holds)
    assert trial.passed, trial.failed
    assert len(trial.checks) >= len(TRAJECTORY_CHECKS) + 1


def test_a_retry_after_access_denied_is_caught(tmp_path: Path, contracts: ContractSet) -> None:
    recording, _ = recorded("access_denied", tmp_path, contracts)
    denial = recording.transitions[1]
    retried = dataclasses.replace(
        denial, seq=3, trigger="retry", from_state="observe", to_state="call", result_class=None
    )
    recording.transitions.insert(2, retried)
    assert "no_retry_after_access_denied" in failed_names(recording, contracts)


def test_a_write_without_a_key_is_caught(tmp_path: Path, contracts: ContractSet) -> None:
    recording, _ = recorded("hold_not_committed", tmp_path, contracts)
    recording.outputs[0] = dataclasses.replace(recording.outputs[0], operation_key=None)
    assert failed_names(recording, contracts) == {"every_write_has_an_operation_key"}


def test_a_wait_past_the_deadline_is_caught(tmp_path: Path, contracts: ContractSet) -> None:
    recording, _ = recorded("rate_limited", tmp_path, contracts)
    index = next(i for i, r in enumerate(recording.transitions) if r.wait_s is not None)
    late = recording.header.started_at + timedelta(seconds=45)
    recording.transitions[index] = dataclasses.replace(recording.transitions[index], time=late)
    assert failed_names(recording, contracts) == {"no_wait_outlasts_the_deadline"}


def test_attempts_over_the_cap_are_caught(tmp_path: Path, contracts: ContractSet) -> None:
    recording, _ = recorded("rate_limited", tmp_path, contracts)
    last = recording.transitions[-1]
    recording.transitions[-1] = dataclasses.replace(last, attempt=9)
    assert recording.summary is not None  # a consistent edit: the summary says 9 too
    recording.summary = dataclasses.replace(recording.summary, attempts=9)
    assert failed_names(recording, contracts) == {"attempts_within_cap"}


def test_results_out_of_call_order_are_caught(tmp_path: Path, contracts: ContractSet) -> None:
    recording, _ = recorded("parallel_calls", tmp_path, contracts)
    first, second = recording.transitions[1], recording.transitions[3]
    recording.transitions[1] = dataclasses.replace(first, call_id=second.call_id)
    recording.transitions[3] = dataclasses.replace(second, call_id=first.call_id)
    assert "every_call_answered_in_order" in failed_names(recording, contracts)


def test_a_call_outside_the_scopes_is_caught(tmp_path: Path, contracts: ContractSet) -> None:
    recording, _ = recorded("hold_not_committed", tmp_path, contracts)
    recording.header = dataclasses.replace(recording.header, scopes=["travel.read"])
    assert failed_names(recording, contracts) == {"no_call_outside_scopes"}


def test_grade_passes_every_fixture_three_times_and_fails_the_naive_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "g.sqlite")
    assert main(["grade", str(FIXTURES), "--trials", "3", "--db", db, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pass_k"] is True and report["trials"] == 3
    assert all(len(f["trials"]) == 3 for f in report["fixtures"])
    naive = ["grade", str(FIXTURES / "hold_timeout_after_commit.yaml"), "--trials", "2"]
    assert main([*naive, "--db", str(tmp_path / "n.sqlite"), "--policy", "naive"]) == 1
    text = capsys.readouterr().out
    assert "FAIL" in text and "no_second_intent_after_unknown_outcome (2/2)" in text
    assert "holds_as_declared: 2 holds, declared 1" in text
    assert "overall: 0/1 fixtures pass^2" in text


def test_grade_stored_runs_reads_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "s.sqlite")
    assert (
        main(["run", str(FIXTURES / "hold_not_committed.yaml"), "--db", db, "--repeat", "2"]) == 0
    )
    capsys.readouterr()
    assert main(["grade", "--stored", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "hold_not_committed" in out and "2/2" in out and "overall: 1/1 fixtures pass^2" in out


def test_cost_over_the_cap_and_a_summary_cost_that_disagrees_are_caught(
    tmp_path: Path, contracts: ContractSet
) -> None:
    recording, holds = recorded("cost_exhausted", tmp_path, contracts)
    fixture = load_fixture(FIXTURES / "cost_exhausted.yaml", contracts)
    assert grade(recording, contracts, fixture.expect, holds).passed
    index = next(i for i, r in enumerate(recording.transitions) if r.cost_usd is not None)
    first = recording.transitions[index]
    recording.transitions[index] = dataclasses.replace(first, cost_usd=0.5)
    assert failed_names(recording, contracts) == {"cost_within_cap", "summary_matches_record"}
