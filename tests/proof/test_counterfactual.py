"""Counterfactual replay predicts what a real run under another budget or policy does, or says it
cannot tell; it never predicts confidently what the real run would not do."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from runner.cli import main
from runner.core.budget import Limits
from runner.core.policy import Backoff, Policy
from runner.harness.fixtures import Fixture, collect_fixture_paths, load_fixture
from runner.harness.scenario import ScenarioRun
from runner.proof.replay import Recording, Replay, describe, replay
from runner.record.spec import RunResult
from runner.record.trace import states_visited
from runner.store.memory import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES

PATHS = collect_fixture_paths([FIXTURES])


def _recorded(fixture: Fixture, contracts: ContractSet, world: Path) -> Recording:
    """The fixture's run under its own budget and the default policy, as stored."""
    store = MemoryStore()
    outcome = run_fixture(fixture, contracts, store, world_dir=world)
    return Recording.from_store(store, outcome.result.run_id)


def _real(
    fixture: Fixture, contracts: ContractSet, world: Path, limits: Limits, policy: Policy
) -> ScenarioRun:
    """The fixture run for real under `limits` and `policy` (same seed as the recording)."""
    changed = fixture.model_copy(update={"budget": limits})
    return run_fixture(changed, contracts, MemoryStore(), policy=policy, world_dir=world)


def _counterfactual(
    recording: Recording, contracts: ContractSet, limits: Limits, policy: Policy
) -> Replay:
    recorded_limits = Limits.model_validate(recording.header.limits)
    return replay(
        recording,
        contracts,
        policy=None if policy == Policy() else policy,
        limits=None if limits == recorded_limits else limits,
    )


def _ending(result: RunResult) -> tuple[object, ...]:
    """What a prediction must get right: terminal, reason, writes' fates, states visited."""
    writes = sorted(Counter((op.tool, op.status) for op in result.operations).items())
    return result.terminal.value, result.reason, writes, states_visited(result.transitions)


def test_a_write_the_shorter_deadline_cuts_ends_unknown_as_the_real_run_does(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """The hold takes 3 s; under a 2 s deadline its call is cut at 2 s before it commits."""
    fixture = load_fixture(FIXTURES / "hold_slow_commit.yaml", contracts)
    recording = _recorded(fixture, contracts, tmp_path)
    limits = fixture.budget.model_copy(update={"max_seconds": 2.0})
    real = _real(fixture, contracts, tmp_path, limits, Policy())
    assert (real.result.terminal.value, real.result.reason, real.holds) == (
        "unknown",
        "deadline",
        0,
    )
    predicted = _counterfactual(recording, contracts, limits, Policy())
    result = predicted.replayed.result
    assert result is not None, describe(predicted)
    assert _ending(result) == _ending(real.result)
    assert predicted.committed_writes() == 0
    assert "unknown (deadline), 0 committed writes" in describe(predicted)


def test_cli_replay_with_a_shorter_deadline_cuts_the_slow_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, log = str(tmp_path / "r.db"), tmp_path / "r.jsonl"
    assert (
        main(["run", str(FIXTURES / "hold_slow_commit.yaml"), "--db", db, "--log", str(log)]) == 0
    )
    run_id = json.loads(log.read_text().splitlines()[0])["run_id"]
    capsys.readouterr()
    assert main(["replay", run_id, "--db", db, "--max-seconds", "2", "--json"]) == 0
    predicted = json.loads(capsys.readouterr().out)
    assert (predicted["terminal"], predicted["reason"]) == ("unknown", "deadline")
    assert predicted["committed_writes"] == 0


def test_a_model_reply_slower_than_the_time_left_is_cut_at_the_deadline(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """A reply that took 3 s is never served under a 2 s deadline: the request times out, no tool
    is proposed, and the run abstains with no time left for a final answer."""
    fixture = load_fixture(FIXTURES / "read_only_success.yaml", contracts)
    recording = _recorded(fixture, contracts, tmp_path)
    first = recording.turns[0]
    recording.turns[0] = dataclasses.replace(first, ended_at=first.started_at + 3.0)
    limits = fixture.budget.model_copy(update={"max_seconds": 2.0})
    predicted = _counterfactual(recording, contracts, limits, Policy())
    result = predicted.replayed.result
    assert result is not None, describe(predicted)
    assert (result.terminal.value, result.reason) == ("abstain", "deadline")
    assert states_visited(result.transitions) == ["plan", "abstain"]
    assert result.attempts == 0 and result.answer is None


def test_a_recorded_timeout_the_new_budget_would_have_waited_out_cannot_be_told(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """Recorded under a 2 s deadline, the hold was cut at 2 s; with 30 s it would have had its
    contract's 10 s, and what it would have answered is not in the recording."""
    fixture = load_fixture(FIXTURES / "hold_slow_commit.yaml", contracts)
    short = fixture.model_copy(
        update={"budget": fixture.budget.model_copy(update={"max_seconds": 2.0})}
    )
    recording = _recorded(short, contracts, tmp_path)
    assert recording.summary is not None and recording.summary.terminal == "unknown"
    predicted = replay(recording, contracts, limits=fixture.budget)
    assert predicted.replayed.result is None, describe(predicted)
    assert predicted.replayed.outside is not None and "hold_room" in predicted.replayed.outside
    assert "outside_recording" in describe(predicted)


def test_a_recorded_model_timeout_the_new_budget_would_have_waited_out_cannot_be_told(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """Recorded under a 2 s deadline, the second request timed out at the deadline: with 30 s it
    might have been answered. A timeout of the adapter's own (before the deadline) comes again."""
    fixture = load_fixture(FIXTURES / "read_only_success.yaml", contracts)
    short = fixture.model_copy(
        update={"budget": fixture.budget.model_copy(update={"max_seconds": 2.0})}
    )
    recording = _recorded(short, contracts, tmp_path)
    second = recording.turns[1]
    for ended_at, outside in ((2.0, True), (1.5, False)):
        recording.turns[1] = dataclasses.replace(
            second, ended_at=ended_at, stop_reason="failed:TimeoutError", tool_calls=[], text=""
        )
        predicted = replay(recording, contracts, limits=fixture.budget)
        if outside:
            assert predicted.replayed.result is None, describe(predicted)
            assert predicted.replayed.outside == "model request 2"
        else:
            result = predicted.replayed.result
            assert result is not None, describe(predicted)
            assert (result.terminal.value, result.reason) == ("abstain", "deadline")


def test_the_token_estimate_does_not_depend_on_the_attempts_left_annotation(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """With max_attempts 12 the results say `"attempts_left":11` (one character more than under
    8); at a token bound one over a recorded step's total the replay and the real run agree."""
    fixture = load_fixture(FIXTURES / "budget_exhausted.yaml", contracts)
    recording = _recorded(fixture, contracts, tmp_path)
    totals = list(itertools.accumulate(t.input_tokens + t.output_tokens for t in recording.turns))
    for total in totals[3:7]:
        limits = fixture.budget.model_copy(update={"max_attempts": 12, "max_tokens": total + 1})
        real = _real(fixture, contracts, tmp_path, limits, Policy())
        predicted = _counterfactual(recording, contracts, limits, Policy())
        assert predicted.replayed.result is not None, describe(predicted)
        assert _ending(predicted.replayed.result) == _ending(real.result), total


POLICIES = (
    Policy(),
    Policy(name="no_retries", max_retries=0),
    Policy(name="patient", max_retries=4, backoff=Backoff(initial_s=2.0, multiplier=3.0, max_s=20)),
    Policy(name="no_corrections", corrections_per_tool=0),
)


def _budgets(fixture: Fixture, recording: Recording) -> list[Limits]:
    """The fixture's budget with one bound reduced at a time, token bounds at each step's total
    (and one over), and a wider attempts cap with those token bounds (the annotation's width)."""
    base = fixture.budget
    totals = list(itertools.accumulate(t.input_tokens + t.output_tokens for t in recording.turns))
    changes: list[dict[str, float]] = [{}]
    changes += [{"max_seconds": s} for s in (1, 2, 3, 5, 12)]
    changes += [{"max_attempts": a} for a in (1, 2, 3, 5, 12)]
    changes += [{"max_model_steps": m} for m in (1, 2, 3)]
    changes += [{"max_tokens": t + d} for t in totals for d in (0, 1)]
    changes += [{"max_attempts": 12, "max_tokens": t + 1} for t in totals]
    return [base.model_copy(update=change) for change in changes]


def _disagreement(predicted: Replay, real: ScenarioRun) -> str | None:
    """How a confident prediction differs from the real run (None: it does not). Holds are
    compared where the prediction says every write settled (an unknown write may have landed)."""
    result = predicted.replayed.result
    assert result is not None
    settled = all(op.status in ("committed", "failed") for op in result.operations)
    holds = predicted.committed_writes() if settled and real.holds is not None else None
    if _ending(result) == _ending(real.result) and holds in (None, real.holds):
        return None
    return (
        f"predicted {_ending(result)} ({holds} holds), "
        f"real {_ending(real.result)} ({real.holds} holds)"
    )


@pytest.mark.slow
def test_counterfactual_replay_agrees_with_real_runs_wherever_it_is_confident(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """Every fixture, under budgets and policies it was not recorded with: each replay either
    says it cannot tell (outside the recording) or predicts what the real run does. (1,880
    pairs, of which 1,754 confident, all matching, when this was written.)"""
    pairs = confident = 0
    mismatches: list[str] = []
    for path in PATHS:
        fixture = load_fixture(path, contracts)
        recording = _recorded(fixture, contracts, tmp_path)
        for limits, policy in itertools.product(_budgets(fixture, recording), POLICIES):
            pairs += 1
            predicted = _counterfactual(recording, contracts, limits, policy)
            if predicted.replayed.result is None:
                continue  # the replay said it cannot tell
            confident += 1
            real = _real(fixture, contracts, tmp_path, limits, policy)
            wrong = _disagreement(predicted, real)
            if wrong is not None:
                mismatches.append(f"{fixture.name} {policy.name} {limits.model_dump()}: {wrong}")
    assert not mismatches, "\n".join(mismatches)
    assert pairs > 1500 and confident > 0.9 * pairs, (pairs, confident)


@pytest.mark.slow
def test_runs_recorded_under_a_tighter_budget_replay_under_the_fixtures_own_as_it_really_runs(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """The other way round: recorded under less time (or fewer attempts or steps), replayed
    under the fixture's budget. What the tighter deadline cut is not in the recording, and the
    replay must say so rather than serve the cut. (528 pairs, 271 confident, all matching.)"""
    changes = [{"max_seconds": s} for s in (0.5, 1, 2, 5)]
    changes += [{"max_attempts": 2}, {"max_model_steps": 1}]
    pairs = confident = 0
    mismatches: list[str] = []
    for path in PATHS:
        fixture = load_fixture(path, contracts)
        tighter = [
            _recorded(
                fixture.model_copy(update={"budget": fixture.budget.model_copy(update=change)}),
                contracts,
                tmp_path,
            )
            for change in changes
        ]
        for policy in POLICIES:
            real = _real(fixture, contracts, tmp_path, fixture.budget, policy)
            for change, recording in zip(changes, tighter, strict=True):
                pairs += 1
                predicted = _counterfactual(recording, contracts, fixture.budget, policy)
                if predicted.replayed.result is None:
                    continue
                confident += 1
                wrong = _disagreement(predicted, real)
                if wrong is not None:
                    mismatches.append(f"{fixture.name} {policy.name} recorded {change}: {wrong}")
    assert not mismatches, "\n".join(mismatches)
    assert confident > 0.4 * pairs, (pairs, confident)
