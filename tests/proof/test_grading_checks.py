"""Grading checks the record, never trusts it: what it needs comes from the transitions, the
summary is checked against them, and each check accuses only what really happened."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runner.cli import main
from runner.core.machine import Decision
from runner.core.policy import DEFAULT_DECISIONS, Policy
from runner.engine import _acting
from runner.harness.fixtures import Expect, Fixture, collect_fixture_paths, load_fixture
from runner.proof.grading import grade
from runner.proof.replay import Recording
from runner.record.operations import mint_key, parameter_hash
from runner.store import SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES
from tests.support.travel import stored_run_with_a_forged_summary

PATHS = collect_fixture_paths([FIXTURES])
HOLD: dict[str, Any] = {
    "hotel_id": "H-SHIBA",
    "check_in": "2027-04-02",
    "check_out": "2027-04-06",
    "guests": 4,
    "room_type": "accessible",
}
DENIED: dict[str, Any] = {
    "respond": {
        "status": "error",
        "error_code": "access_denied",
        "retryable": True,
        "message": "tenant may not book this property",
    }
}


def _policy(**decisions: Decision) -> Policy:
    """A policy the production validation may forbid: built without it, as a broken runner."""
    return Policy.model_construct(name="test-broken", decisions={**DEFAULT_DECISIONS, **decisions})


def _hold_fixture(environment: dict[str, Any], model: list[dict[str, Any]]) -> Fixture:
    return Fixture.model_validate(
        {
            "name": "inline_hold",
            "description": "built by a test",
            "task": "Hold an accessible room at Shiba Park Hotel.",
            "tenant": "optiverse",
            "principal": {"id": "agent-7", "scopes": ["travel.read", "travel.book"]},
            "tools": ["hold_room", "lookup_hold"],
            "environment": environment,
            "model": model,
        }
    )


def _run(
    fixture: Fixture, tmp_path: Path, contracts: ContractSet, policy: Policy | None = None
) -> tuple[Recording, int | None]:
    store = SqliteStore(tmp_path / "runs.sqlite")
    outcome = run_fixture(fixture, contracts, store, policy=policy, world_dir=tmp_path / "world")
    recording = Recording.from_store(store, outcome.result.run_id)
    store.close()
    return recording, outcome.holds


def _failed(
    recording: Recording,
    contracts: ContractSet,
    expect: Expect | None = None,
    *,
    replayed: bool = True,
) -> set[str]:
    trial = grade(recording, contracts, expect, None, replayed=replayed)
    return {check.name for check in trial.failed}


def test_an_edited_summary_does_not_pass_grading(tmp_path: Path, contracts: ContractSet) -> None:
    fixture = load_fixture(FIXTURES / "hold_reconcile_inconclusive.yaml", contracts)
    recording, holds = _run(fixture, tmp_path, contracts)
    assert recording.summary is not None
    recording.summary = dataclasses.replace(
        recording.summary, terminal="complete", reason="model_final"
    )
    claimed = Expect.model_validate({"terminal": "complete", "reason": "model_final"})
    failed = _failed(recording, contracts, claimed)
    assert {"terminal_as_declared", "reason_as_declared", "summary_matches_record"} <= failed
    # Against the fixture's own expectation, the outcome is right but the summary still lies.
    trial = grade(recording, contracts, fixture.expect, holds)
    assert {check.name for check in trial.failed} == {
        "summary_matches_record",
        "replays_as_recorded",  # and the replay comes to another summary
    }


def test_a_summary_with_other_attempts_is_caught(tmp_path: Path, contracts: ContractSet) -> None:
    fixture = load_fixture(FIXTURES / "rate_limited.yaml", contracts)
    recording, _ = _run(fixture, tmp_path, contracts)
    assert recording.summary is not None
    recording.summary = dataclasses.replace(recording.summary, attempts=1)
    trial = grade(recording, contracts, None, None)
    failed = {check.name: check.detail for check in trial.failed}
    assert failed.keys() == {"summary_matches_record", "replays_as_recorded"}
    assert "attempts" in failed["summary_matches_record"]
    assert "attempts=1" in failed["replays_as_recorded"]


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_fixture_summary_and_keys_match_its_record(
    path: Path, tmp_path: Path, contracts: ContractSet
) -> None:
    recording, _ = _run(load_fixture(path, contracts), tmp_path, contracts)
    failed = _failed(recording, contracts)
    assert "summary_matches_record" not in failed
    assert "every_key_minted_for_the_run" not in failed


def test_a_key_minted_for_another_tenant_or_payload_fails_grading(
    tmp_path: Path, contracts: ContractSet
) -> None:
    fixture = load_fixture(FIXTURES / "hold_timeout_after_commit.yaml", contracts)
    recording, _ = _run(fixture, tmp_path, contracts)
    [write] = [output for output in recording.outputs if output.tool == "hold_room"][:1]
    assert write.operation_key is not None
    [args] = [r.args for r in recording.transitions if r.call_id == write.call_id and r.args][:1]
    run_id = recording.header.run_id
    for forged in (
        mint_key("other-tenant", "hold_room", run_id, parameter_hash(args)),
        mint_key("optiverse", "hold_room", run_id, parameter_hash({**args, "guests": 1})),
        mint_key("optiverse", "hold_room", "another-run", parameter_hash(args)),
    ):
        recording.outputs = [
            dataclasses.replace(output, operation_key=forged)
            if output.operation_key == write.operation_key
            else output
            for output in recording.outputs
        ]
        failed = {c.name: c.detail for c in grade(recording, contracts, None, None).failed}
        assert failed.keys() == {"every_key_minted_for_the_run", "replays_as_recorded"}
        assert forged in failed["every_key_minted_for_the_run"]
        write = dataclasses.replace(write, operation_key=forged)


def test_grade_stored_fails_an_edited_operation_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "g.sqlite"
    fixture = str(FIXTURES / "hold_slow_commit.yaml")
    assert main(["run", fixture, "--db", str(db), "--json"]) == 0
    capsys.readouterr()
    assert main(["grade", "--stored", "--db", str(db)]) == 0
    capsys.readouterr()
    forged = "optiverse:hold_room:00000000000000000000000000000000"
    with sqlite3.connect(db) as connection:
        connection.execute(
            "UPDATE outputs SET output = json_set(output, '$.operation_key', ?) "
            "WHERE json_extract(output, '$.tool') = 'hold_room'",
            (forged,),
        )
        edited = connection.execute(
            "SELECT count(*) FROM outputs WHERE json_extract(output, '$.operation_key') = ?",
            (forged,),
        ).fetchone()[0]
    connection.close()
    assert edited >= 1
    assert main(["grade", "--stored", "--db", str(db)]) == 1
    assert "every_key_minted_for_the_run" in capsys.readouterr().out


def test_grade_stored_fails_an_edited_summary_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "g.sqlite"
    stored_run_with_a_forged_summary(db, capsys)
    assert main(["grade", "--stored", "--db", str(db)]) == 1
    assert "summary_matches_record" in capsys.readouterr().out


def test_a_second_write_intent_after_an_unknown_outcome_fails_grading(
    tmp_path: Path, contracts: ContractSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The engine now ends such a run `unknown` before the model can hold again; grading must
    # still catch a runner without that guard, so this test takes the guard away.
    monkeypatch.setattr(_acting, "_unsettled", lambda run: None)
    fixture = _hold_fixture(
        {"hold_room": [{"write": "commit_then_lose_response"}, {"write": "commit"}]},
        [
            {"tool_calls": [{"id": "h1", "name": "hold_room", "args": HOLD}]},
            {"tool_calls": [{"id": "h2", "name": "hold_room", "args": {**HOLD, "guests": 3}}]},
            {"final": "Held."},
        ],
    )
    policy = _policy(unknown_outcome=Decision.BACK_TO_MODEL)
    recording, holds = _run(fixture, tmp_path, contracts, policy)
    assert holds == 2  # the broken policy really made a second hold
    trial = grade(recording, contracts, None, holds)
    failed = {check.name: check.detail for check in trial.failed}
    assert "no_second_intent_after_unknown_outcome" in failed
    assert "h2" in failed["no_second_intent_after_unknown_outcome"]


def test_a_write_dispatched_again_after_a_denial_fails_grading(
    tmp_path: Path, contracts: ContractSet
) -> None:
    fixture = _hold_fixture(
        {"hold_room": [DENIED, DENIED]},
        [
            {"tool_calls": [{"id": "h1", "name": "hold_room", "args": HOLD}]},
            {"tool_calls": [{"id": "h2", "name": "hold_room", "args": {**HOLD, "guests": 3}}]},
            {"final": "Could not hold."},
        ],
    )
    recording, _ = _run(fixture, tmp_path, contracts, _policy(access_denied=Decision.BACK_TO_MODEL))
    assert [o.call_id for o in recording.outputs] == ["h1", "h2"]  # both went to the supplier
    assert "no_retry_after_access_denied" in _failed(recording, contracts)


def test_a_write_in_the_same_batch_as_a_denial_is_not_accused(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """The lost write was dispatched beside the denied call, not after the denial: correct."""
    fixture = _hold_fixture(
        {"hold_room": [DENIED, {"write": "commit_then_lose_response"}]},
        [
            {
                "tool_calls": [
                    {"id": "h1", "name": "hold_room", "args": HOLD},
                    {"id": "h2", "name": "hold_room", "args": {**HOLD, "guests": 3}},
                ]
            },
            {"final": "unreachable: the run escalates"},
        ],
    )
    recording, holds = _run(fixture, tmp_path, contracts)
    assert holds == 1
    assert any(r.trigger == "reconcile" for r in recording.transitions)
    trial = grade(recording, contracts, None, holds)
    assert trial.passed, trial.failed


def test_a_write_beside_an_unknown_outcome_is_not_a_second_intent(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """Two writes proposed together: the second was dispatched before the first's outcome."""
    fixture = _hold_fixture(
        {"hold_room": [{"write": "commit_then_lose_response"}, {"write": "commit"}]},
        [
            {
                "tool_calls": [
                    {"id": "h1", "name": "hold_room", "args": HOLD},
                    {"id": "h2", "name": "hold_room", "args": {**HOLD, "guests": 3}},
                ]
            },
            {"final": "Held two rooms."},
        ],
    )
    recording, holds = _run(fixture, tmp_path, contracts)
    assert holds == 2
    trial = grade(recording, contracts, None, holds)
    assert trial.passed, trial.failed


def test_grade_trials_use_a_seed_each_and_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = str(FIXTURES / "transient_timeout_retry.yaml")
    db = tmp_path / "g.sqlite"
    assert main(["grade", fixture, "--trials", "3", "--seed", "5", "--db", str(db), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [graded] = report["fixtures"]
    assert [trial["seed"] for trial in graded["trials"]] == [5, 6, 7]
    assert graded["k"] == 3
    store = SqliteStore(db)
    seeds = sorted(listing.header.seed or 0 for listing in store.runs())
    store.close()
    assert seeds == [5, 6, 7]
    assert main(["grade", fixture, "--trials", "2", "--db", str(tmp_path / "t.sqlite")]) == 0
    text = capsys.readouterr().out
    assert "seeds 0..1" in text


def test_grade_stored_with_uneven_trials_gives_each_fixture_its_own_k(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "s.sqlite")
    two = str(FIXTURES / "hold_not_committed.yaml")
    one = str(FIXTURES / "read_only_success.yaml")
    assert main(["run", two, "--db", db, "--repeat", "2"]) == 0
    assert main(["run", one, "--db", db]) == 0
    capsys.readouterr()
    assert main(["grade", "--stored", "--db", db]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "pass^2" in rows["hold_not_committed"] and "pass^1" in rows["read_only_success"]
    overall = rows["overall:"]
    assert "pass^2" not in overall and "pass^1" not in overall
    assert "2/2" in overall
    assert main(["grade", "--stored", "--db", db, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sorted(f["k"] for f in report["fixtures"]) == [1, 2]


@pytest.mark.parametrize("fixture_name", ["parallel_calls", "hold_not_committed"])
def test_a_run_still_going_is_not_accused_of_leaving_its_batch_unanswered(
    tmp_path: Path, contracts: ContractSet, fixture_name: str
) -> None:
    """`grade --stored` while a run's batch is in flight (or after it was killed there) failed
    `every_call_answered_in_order` (`answered [], proposed ['call_1_0']`): a batch still going
    need only have answered its calls in order so far. A finished run still needs them all."""
    fixture = load_fixture(FIXTURES / f"{fixture_name}.yaml", contracts)
    recording, _ = _run(fixture, tmp_path, contracts)
    records = recording.transitions
    for cut in range(1, len(records)):
        so_far = dataclasses.replace(recording, transitions=records[:cut], summary=None)
        # (no replay: the cut keeps every input, so it is no record a reader gives)
        # nothing but its end missing (`run_ended`): no trajectory check accuses it
        assert _failed(so_far, contracts, replayed=False) == {"run_ended"}, (fixture_name, cut)
    first_batch = next(i for i, r in enumerate(records) if r.to_state == "plan")
    gone = [r.call_id for r in records[: first_batch + 1] if r.trigger == "classify"][-1]
    dropped = [r for r in records if not (r.trigger == "classify" and r.call_id == gone)]
    ended = dataclasses.replace(recording, transitions=dropped)
    assert "every_call_answered_in_order" in _failed(ended, contracts)
