"""`runner-log/2` keeps each call's typed observation on its `classify` record; logs written as
`runner-log/1` still read and replay identical.

`data/logs/runner-log-1.jsonl` was written by the runner as it was before the one decision
(commit 765e11c^, `runner run fixtures/... --log`), unedited: three runs whose `classify`
records hold what that runner put there (the policy table's first answer and the observation's
own reason, no observation), which the current runner decides otherwise. Their headers predate
the recorded system prompt: they were told the travel prompt (as `runner replay` assumes).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runner.core.budget import Bound
from runner.core.machine import Decision, Trigger
from runner.core.observations import (
    ArgumentsRejected,
    BudgetExhausted,
    ResultMalformed,
    ToolSucceeded,
)
from runner.harness.fixtures import load_fixture
from runner.proof.replay import Recording, describe, replay
from runner.record.trace import LOG_FORMAT, TransitionRecord, read_log
from runner.store import FanoutStore, JsonlLog, SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.prompt import SYSTEM_PROMPT
from runner.travel.scenario import run_fixture
from tests.support.paths import DATA, FIXTURES
from tests.support.travel import FLIGHT_ARGS, make_fixture

V1_LOG = DATA / "logs" / "runner-log-1.jsonl"


def _classify(records: list[TransitionRecord]) -> list[TransitionRecord]:
    return [record for record in records if record.trigger == Trigger.CLASSIFY]


def test_a_runner_log_1_file_replays_identical(contracts: ContractSet) -> None:
    assert '"format": "runner-log/1"' in V1_LOG.read_text()
    recordings = Recording.from_log(V1_LOG)
    assert len(recordings) == 3
    decided_otherwise = 0
    for recording in recordings:
        assert all(r.observation is None for r in recording.transitions)
        outcome = replay(recording, contracts, system_prompt=SYSTEM_PROMPT)
        assert outcome.identical, describe(outcome)
        replayed = outcome.replayed.records
        assert len(replayed) == len(recording.transitions)
        # The replay itself records the /2 way: every classify keeps its observation.
        assert all(r.observation is not None for r in _classify(replayed))
        decided_otherwise += sum(
            (old.decision, old.reason) != (new.decision, new.reason)
            for old, new in zip(_classify(recording.transitions), _classify(replayed), strict=True)
        )
    assert decided_otherwise >= 3  # the /1 comparison is what lets these replay identical


def test_a_runner_log_1_classify_still_compares_its_other_fields(contracts: ContractSet) -> None:
    [recording, *_] = Recording.from_log(V1_LOG)
    first = _classify(recording.transitions)[0]
    index = recording.transitions.index(first)
    recording.transitions[index] = dataclasses.replace(first, tool="not_the_tool")
    outcome = replay(recording, contracts, system_prompt=SYSTEM_PROMPT)
    assert outcome.divergence is not None
    assert outcome.divergence.where == f"seq {first.seq}"


def test_a_runner_log_1_verdict_that_differs_shows_in_the_move_after(
    contracts: ContractSet,
) -> None:
    """Leaving a /1 classify's decision out does not hide a different verdict: the move that
    carries it out follows, and is compared."""
    [recording] = [
        r for r in Recording.from_log(V1_LOG) if r.header.name == "retry_after_past_deadline"
    ]
    following = recording.transitions[2]
    assert following.trigger == Trigger.RESUME and following.decision is Decision.FINAL_ANSWER
    recording.transitions[2] = dataclasses.replace(following, decision=Decision.BACK_TO_MODEL)
    outcome = replay(recording, contracts, system_prompt=SYSTEM_PROMPT)
    assert outcome.divergence is not None and outcome.divergence.where == "seq 3"


@pytest.mark.parametrize(
    ("fixture", "kind"),
    [
        ("read_only_success", ToolSucceeded),
        ("malformed_bad_timestamp", ResultMalformed),
        ("invalid_args_corrected", ArgumentsRejected),
        (None, BudgetExhausted),
    ],
)
def test_classify_records_keep_the_typed_observation_in_every_store(
    fixture: str | None, kind: type, tmp_path: Path, contracts: ContractSet
) -> None:
    log = tmp_path / "runs.jsonl"
    store = FanoutStore(SqliteStore(tmp_path / "runs.sqlite"), JsonlLog(log))
    if fixture is None:  # two calls, one attempt: the second is answered budget_exhausted
        other = {**FLIGHT_ARGS, "date_start": "2027-04-02"}
        calls = [{"name": "search_flights", "args": args} for args in (FLIGHT_ARGS, other)]
        loaded = make_fixture(
            budget={"max_attempts": 1}, model=[{"tool_calls": calls}, {"final": "NH7."}]
        )
    else:
        loaded = load_fixture(FIXTURES / f"{fixture}.yaml", contracts)
    outcome = run_fixture(loaded, contracts, store, world_dir=tmp_path)
    run_id = outcome.result.run_id
    from_sqlite = Recording.from_store(store, run_id).transitions
    store.close()
    assert f'"format": "{LOG_FORMAT}"' in log.read_text() and LOG_FORMAT == "runner-log/2"
    [logged] = read_log(log)
    for records in (outcome.result.transitions, from_sqlite, logged.transitions):
        assert records == outcome.result.transitions
        classified = _classify(records)
        assert all(r.observation is not None for r in classified)
        assert all(r.observation.kind == r.result_class for r in classified if r.observation)
        assert all(r.observation is None for r in records if r.trigger != Trigger.CLASSIFY)
        [observed, *_] = [r.observation for r in classified if isinstance(r.observation, kind)]
        if isinstance(observed, ToolSucceeded):
            assert observed.result == {}  # the body is the tool_output record's, not copied
        if isinstance(observed, BudgetExhausted):
            assert isinstance(observed.bound, Bound)  # the enum, not its string
        if isinstance(observed, ResultMalformed):
            assert isinstance(observed.errors, tuple) and observed.errors
    assert any(output.outcome for output in logged.outputs)


def test_an_edited_observation_is_a_divergence(tmp_path: Path, contracts: ContractSet) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    loaded = load_fixture(FIXTURES / "invalid_args_corrected.yaml", contracts)
    run_id = run_fixture(loaded, contracts, store, world_dir=tmp_path).result.run_id
    recording = Recording.from_store(store, run_id)
    store.close()
    [rejected] = [r for r in recording.transitions if isinstance(r.observation, ArgumentsRejected)]
    assert isinstance(rejected.observation, ArgumentsRejected)
    edited = dataclasses.replace(rejected.observation, field="another_field")
    recording.transitions[rejected.seq - 1] = dataclasses.replace(rejected, observation=edited)
    outcome = replay(recording, contracts, system_prompt=SYSTEM_PROMPT)
    assert outcome.divergence is not None
    assert outcome.divergence.where == f"seq {rejected.seq}"
    assert "observation=" in outcome.divergence.expected
