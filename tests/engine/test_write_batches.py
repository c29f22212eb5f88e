"""Writes in one reply, repeated call ids, and unsettled writes (issue 9, items 3 and 4).

- calls in one batch that map to one operation key are dispatched once; the copies are refused as
  duplicates of the first, and every call still gets its one result, in call order;
- a call id the model repeats (in one reply or from an earlier turn) is made unique at `plan`, so
  pairing, replay, grading and `runner artifact` stay unambiguous;
- a run never ends `complete` while a write it started is still pending.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.cli import main
from runner.core.machine import Decision
from runner.core.policy import DEFAULT_DECISIONS, Policy
from runner.core.sim import naive_policy
from runner.engine._call_ids import unique_calls
from runner.harness.fixtures import load_fixture
from runner.models.base import ToolCall
from runner.proof.grading import grade
from runner.proof.replay import Recording, replay
from runner.store import MemoryStore, SqliteStore
from runner.tools.contracts import ContractSet, load_contracts
from runner.travel import SEMANTIC_RULES, contracts_dir
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES
from tests.support.travel import FLIGHT_ARGS, FLIGHTS_OK, make_fixture


def _classified(outcome_transitions: list) -> list[tuple[str | None, str | None]]:  # type: ignore[type-arg]
    return [(r.call_id, r.result_class) for r in outcome_transitions if r.trigger == "classify"]


def test_identical_writes_in_one_reply_are_sent_once(
    tmp_path: Path, contracts: ContractSet, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = load_fixture(FIXTURES / "hold_duplicate_calls.yaml", contracts)
    db = tmp_path / "runs.sqlite"
    store = SqliteStore(db)
    outcome = run_fixture(fixture, contracts, store, world_dir=tmp_path / "world")
    run_id = outcome.result.run_id
    assert outcome.passed, outcome.failures
    assert len(outcome.environment.tools["hold_room"].invocations) == 1
    assert _classified(outcome.result.transitions) == [
        ("c-hold", "ok"),
        ("c-hold_dup2", "repeat_refused"),
        ("c-hold_dup3", "repeat_refused"),
    ]
    copies = [r for r in outcome.result.transitions if r.result_class == "repeat_refused"]
    assert {r.reason for r in copies} == {"duplicate of c-hold in the same reply (ok)"}
    assert [r.operation_key for r in copies] == [None, None]  # no intent of their own
    assert [o.call_id for o in store.outputs(run_id)] == ["c-hold"]
    [operation] = outcome.result.operations
    assert operation.status == "committed"
    recording = Recording.from_store(store, run_id)
    store.close()
    trial = grade(recording, contracts, fixture.expect, outcome.holds)
    assert trial.passed, trial.failed  # every call answered once, in order, by its (unique) id
    assert replay(recording, contracts).identical
    assert main(["artifact", run_id, "c-hold", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "ok"
    assert main(["artifact", run_id, "c-hold_dup2", "--db", str(db)]) == 2  # never dispatched


def test_a_batch_of_distinct_writes_is_still_sent_in_full(contracts: ContractSet) -> None:
    hold = {
        "hotel_id": "H-SHIBA", "check_in": "2027-04-02", "check_out": "2027-04-06", "guests": 4,
        "room_type": "accessible",
    }  # fmt: skip
    fixture = make_fixture(
        principal={"id": "agent-7", "scopes": ["travel.read", "travel.book"]},
        tools=["hold_room", "lookup_hold"],
        environment={},
        model=[
            {
                "tool_calls": [
                    {"id": "a", "name": "hold_room", "args": hold},
                    {"id": "b", "name": "hold_room", "args": {**hold, "guests": 3}},
                    {"id": "c", "name": "hold_room", "args": hold},
                ]
            },
            {"final": "Two holds."},
        ],
    )
    outcome = run_fixture(fixture, contracts, MemoryStore())
    assert len(outcome.environment.tools["hold_room"].invocations) == 2
    assert _classified(outcome.result.transitions) == [
        ("a", "ok"),
        ("b", "ok"),
        ("c", "repeat_refused"),
    ]
    assert outcome.holds == 2
    assert outcome.result.terminal.value == "complete"


def test_the_same_number_written_two_ways_is_one_write(contracts: ContractSet) -> None:
    """4 and 4.0 are the same JSON Schema integer (the schema accepts both): the copy minted a
    key of its own, went out, and the supplier held the room twice."""
    hold = {
        "hotel_id": "H-SHIBA", "check_in": "2027-04-02", "check_out": "2027-04-06", "guests": 4,
        "room_type": "accessible",
    }  # fmt: skip
    fixture = make_fixture(
        principal={"id": "agent-7", "scopes": ["travel.read", "travel.book"]},
        tools=["hold_room", "lookup_hold"],
        environment={},
        model=[
            {
                "tool_calls": [
                    {"id": "a", "name": "hold_room", "args": hold},
                    {"id": "b", "name": "hold_room", "args": {**hold, "guests": 4.0}},
                ]
            },
            {"tool_calls": [{"id": "c", "name": "hold_room", "args": {**hold, "guests": 4e0}}]},
            {"final": "One hold."},
        ],
    )
    outcome = run_fixture(fixture, contracts, MemoryStore())
    assert len(outcome.environment.tools["hold_room"].invocations) == 1
    assert _classified(outcome.result.transitions) == [
        ("a", "ok"),
        ("b", "repeat_refused"),
        ("c", "repeat_refused"),  # the same write again, after it succeeded
    ]
    assert outcome.holds == 1


def test_repeated_call_ids_are_made_unique_in_a_reply_and_across_turns(
    tmp_path: Path, contracts: ContractSet
) -> None:
    later = {**FLIGHT_ARGS, "date_end": "2027-04-04"}
    fixture = make_fixture(
        environment={"search_flights": [{"respond": FLIGHTS_OK}] * 3},
        model=[
            {
                "tool_calls": [
                    {"id": "c", "name": "search_flights", "args": FLIGHT_ARGS},
                    {"id": "c", "name": "search_flights", "args": later},
                ]
            },
            {
                "tool_calls": [
                    {"id": "c", "name": "search_flights", "args": {**later, "max_results": 2}}
                ]
            },
            {"final": "NH7."},
        ],
    )
    store = SqliteStore(tmp_path / "runs.sqlite")
    outcome = run_fixture(fixture, contracts, store)
    assert _classified(outcome.result.transitions) == [
        ("c", "ok"),
        ("c_dup2", "ok"),
        ("c_dup3", "ok"),
    ]
    run_id = outcome.result.run_id
    assert [o.call_id for o in store.outputs(run_id)] == ["c", "c_dup2", "c_dup3"]
    recording = Recording.from_store(store, run_id)
    store.close()
    assert grade(recording, contracts, fixture.expect, None).passed
    assert replay(recording, contracts).identical


def _contracts_without_duplicate_suppression(tmp_path: Path) -> ContractSet:
    folder = tmp_path / "contracts"
    shutil.copytree(contracts_dir(), folder)
    hold = json.loads((folder / "hold_room.json").read_text())
    hold["suppresses_duplicates"] = False
    (folder / "hold_room.json").write_text(json.dumps(hold))
    return load_contracts(folder, SEMANTIC_RULES)


@pytest.mark.parametrize(
    ("name", "terminal", "status"),
    [("hold_timeout_after_commit", "complete", "committed"),
     ("hold_reconcile_inconclusive", "unknown", "unknown")],
)  # fmt: skip
def test_an_unknown_write_outcome_is_looked_up_even_under_a_retry_policy(
    tmp_path: Path, name: str, terminal: str, status: str
) -> None:
    """`unknown_outcome: retry` (no longer a valid policy file, so built bypassing validation)
    on a write whose destination does not deduplicate: the write is not re-sent; it is looked
    up by its key, and the run never ends `complete` with the key still pending."""
    contracts = _contracts_without_duplicate_suppression(tmp_path)
    retrying = Policy.model_construct(
        name="retry-unknown", decisions={**DEFAULT_DECISIONS, "unknown_outcome": Decision.RETRY}
    )
    fixture = load_fixture(FIXTURES / f"{name}.yaml", contracts)
    outcome = run_fixture(fixture, contracts, MemoryStore(), policy=retrying)
    assert len(outcome.environment.tools["hold_room"].invocations) == 1
    assert len(outcome.environment.tools["lookup_hold"].invocations) == 1
    assert outcome.result.terminal.value == terminal
    [operation] = outcome.result.operations
    assert operation.status == status
    assert outcome.holds == 1


def test_a_run_with_a_pending_write_cannot_end_complete(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """The naive simulation re-sends an unknown write under a fresh key: the second hold
    commits, the first key stays pending, and the run must hand that key over (`unknown`)."""
    fixture = load_fixture(FIXTURES / "hold_timeout_after_commit.yaml", contracts)
    outcome = run_fixture(fixture, contracts, MemoryStore(), policy=naive_policy())
    assert outcome.holds == 2  # the simulated bug still happens, and the checks still see it
    assert "holds: expected 1, got 2" in outcome.failures
    assert outcome.result.terminal.value == "unknown"
    assert outcome.result.reason == "write_not_settled"
    first, second = outcome.result.operations
    assert (first.status, second.status) == ("unknown", "committed")
    assert outcome.result.transitions[-1].operation_key == first.key


_IDS = st.lists(st.sampled_from(["c", "c_dup2", "c_dup3", "x", ""]), max_size=6)


@settings(max_examples=200, deadline=None)
@given(turns=st.lists(_IDS, min_size=1, max_size=4))
def test_call_ids_come_out_unique_and_the_same_every_time(turns: list[list[str]]) -> None:
    """Any ids a model sends, over any turns: unique in the run, kept as sent unless already
    taken, and renamed the same way on every pass (so replay and grading pair as the run did)."""
    passes = []
    for _ in range(2):
        taken: set[str] = set()
        given_out: list[str] = []
        for ids in turns:
            calls = unique_calls((ToolCall(id=i, name="t", arguments={}) for i in ids), taken)
            given_out += [call.id for call in calls]
        passes.append(given_out)
    out = passes[0]
    assert passes[1] == out
    assert len(set(out)) == len(out)
    sent = [i for ids in turns for i in ids]
    for index, (original, unique) in enumerate(zip(sent, out, strict=True)):
        assert (unique == original) == (original not in out[:index])
        assert unique == original or unique.startswith(f"{original}_dup")
