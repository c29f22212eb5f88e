"""Replays re-drive stored runs from their recorded inputs alone."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from runner import Engine, FakeClock, FunctionTools, Principal, RunSpec
from runner.cli import main
from runner.core.budget import Limits
from runner.core.sim import naive_policy
from runner.harness.fixtures import collect_fixture_paths, load_fixture
from runner.proof.replay import Recording, describe, replay
from runner.record.recording import Responded
from runner.store import FanoutStore, JsonlLog, MemoryStore, SqliteStore
from runner.testing import FunctionModel, ToolDouble, call, latest_results
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES

PATHS = collect_fixture_paths([FIXTURES])


def record_fixture(name: str, tmp_path: Path, contracts: ContractSet) -> tuple[SqliteStore, str]:
    store = SqliteStore(tmp_path / "runs.sqlite")
    fixture = load_fixture(FIXTURES / f"{name}.yaml", contracts)
    outcome = run_fixture(fixture, contracts, store, world_dir=tmp_path / "world")
    return store, outcome.result.run_id


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_fixture_replays_identical_from_the_store_and_the_log(
    path: Path, tmp_path: Path, contracts: ContractSet
) -> None:
    log = tmp_path / "runs.jsonl"
    store = FanoutStore(SqliteStore(tmp_path / "runs.sqlite"), JsonlLog(log))
    outcome = run_fixture(load_fixture(path, contracts), contracts, store, world_dir=tmp_path)
    from_store = replay(Recording.from_store(store, outcome.result.run_id), contracts)
    store.close()
    [from_log] = [replay(recording, contracts) for recording in Recording.from_log(log)]
    for replayed in (from_store, from_log):
        assert replayed.identical, describe(replayed)
        assert replayed.replayed.records == outcome.result.transitions
        assert describe(replayed).startswith("identical: ")


def test_an_edited_recording_is_caught_at_its_first_divergence(
    tmp_path: Path, contracts: ContractSet
) -> None:
    store, run_id = record_fixture("rate_limited", tmp_path, contracts)
    recording = Recording.from_store(store, run_id)
    store.close()
    first = recording.outputs[0]  # the rate-limited answer: pretend it had succeeded
    edited = dataclasses.replace(
        first,
        outcome=Responded(
            payload={"status": "ok", "options": [], "source_timestamp": "2027-03-01T09:00:00Z"}
        ),
    )
    recording.outputs[0] = edited
    outcome = replay(recording, contracts)
    assert outcome.divergence is not None
    assert outcome.divergence.where == "seq 2"
    assert "rate_limited retry" in outcome.divergence.expected
    assert "empty continue" in outcome.divergence.got


def test_a_lower_cap_stops_the_runaway_run_earlier_and_says_so(
    tmp_path: Path, contracts: ContractSet
) -> None:
    store, run_id = record_fixture("budget_exhausted", tmp_path, contracts)
    recording = Recording.from_store(store, run_id)
    store.close()
    limits = Limits.model_validate({**recording.header.limits, "max_attempts": 5})
    outcome = replay(recording, contracts, limits=limits)
    result = outcome.replayed.result
    assert result is not None and result.terminal.value == "abstain" and result.reason == "attempts"
    assert result.attempts == 5
    assert len(outcome.replayed.records) < len(recording.transitions)
    assert outcome.replayed.records[:6] == recording.transitions[:6]  # the same world until the cap
    assert describe(outcome).startswith("with max_attempts 5 the run would have stopped at seq 16")


def test_a_policy_that_needs_an_unrecorded_answer_stops_outside_the_recording(
    tmp_path: Path, contracts: ContractSet
) -> None:
    store, run_id = record_fixture("hold_timeout_after_commit", tmp_path, contracts)
    recording = Recording.from_store(store, run_id)
    store.close()
    outcome = replay(recording, contracts, policy=naive_policy())
    assert outcome.replayed.result is None
    assert outcome.replayed.outside is not None and "hold_room" in outcome.replayed.outside
    assert "outside_recording" in describe(outcome)


def test_cli_replay_prints_identical_and_exits_non_zero_on_divergence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, log = str(tmp_path / "r.db"), tmp_path / "r.jsonl"
    assert main(["run", str(FIXTURES / "rate_limited.yaml"), "--db", db, "--log", str(log)]) == 0
    run_id = json.loads(log.read_text().splitlines()[0])["run_id"]
    capsys.readouterr()
    assert main(["replay", run_id, "--db", db]) == 0
    assert "identical: 9 transitions" in capsys.readouterr().out
    lines = log.read_text().splitlines()
    edited = [
        line.replace('"error_code": "rate_limited"', '"error_code": "service_unavailable"')
        for line in lines
    ]
    log.write_text("\n".join(edited) + "\n")
    assert main(["replay", str(log)]) == 1
    assert "divergence at seq 2: expected" in capsys.readouterr().out
    assert main(["replay", run_id, "--db", db, "--max-attempts", "1", "--json"]) == 0
    counterfactual = json.loads(capsys.readouterr().out)
    assert counterfactual["changes"] == ["max_attempts 1"]
    assert counterfactual["terminal"] == "abstain" and counterfactual["reason"] == "attempts"


def test_replaying_a_truncated_log_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "r.jsonl"
    db = str(tmp_path / "r.db")
    assert main(["run", str(FIXTURES / "rate_limited.yaml"), "--db", db, "--log", str(log)]) == 0
    text = log.read_text()
    log.write_text(text[: len(text) // 2])
    capsys.readouterr()
    assert main(["replay", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: log ") and ", line " in err and err.count("\n") == 1


def _log_of(tmp_path: Path, name: str) -> list[str]:
    log = tmp_path / "full.jsonl"
    db = str(tmp_path / "r.db")
    assert main(["run", str(FIXTURES / f"{name}.yaml"), "--db", db, "--log", str(log)]) == 0
    return log.read_text().splitlines()


def test_a_log_cut_short_replays_as_far_as_it_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _log_of(tmp_path, "rate_limited")
    for keep in (1, 2, 5):
        cut = tmp_path / f"cut{keep}.jsonl"
        cut.write_text("\n".join(lines[:keep]) + "\n")
        capsys.readouterr()
        assert main(["replay", str(cut)]) == 0, keep
        out = capsys.readouterr().out
        assert "identical as far as it goes" in out


def test_a_log_missing_an_input_is_a_divergence_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [line for line in _log_of(tmp_path, "rate_limited") if '"tool_output"' not in line]
    log = tmp_path / "edited.jsonl"
    log.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["replay", str(log)]) == 1
    assert "divergence at seq 2: the recording has no tool call 1" in capsys.readouterr().out


HOLD = {
    "hotel_id": "H-SHIBA",
    "check_in": "2027-04-02",
    "check_out": "2027-04-06",
    "guests": 4,
    "room_type": "accessible",
}


@pytest.mark.parametrize("lookup", [False, True], ids=["no_tool", "no_lookup"])
def test_a_run_whose_toolbox_lacked_an_implementation_replays_identical(
    contracts: ContractSet, lookup: bool
) -> None:
    """A tool with a contract but no implementation is answered `unknown_tool` without
    dispatch, and a lost write whose lookup has none ends `unknown` ('lookup_hold is not
    available'). Replay assumed every contract's tool existed, dispatched the call, found no
    recorded outcome and stopped: the stored run did not replay identical."""
    store = MemoryStore()
    registry = FunctionTools()
    if lookup:
        registry.register("hold_room", ToolDouble(TimeoutError("the response was lost")))
    engine = Engine(contracts=contracts, toolbox=registry, store=store, clock=FakeClock())
    spec = RunSpec(
        task="Hold a room.",
        tenant="optiverse",
        principal=Principal(id="agent-7", scopes=frozenset({"travel.book"})),
        tools=("hold_room",),
        seed=1,
    )
    model = FunctionModel(
        lambda transcript, tools: (
            "Done." if latest_results(transcript) else call("hold_room", **HOLD)
        )
    )
    result = engine.run_sync(spec, model)
    classified = [r for r in result.transitions if r.trigger == "classify"]
    expected = "unknown_outcome" if lookup else "unknown_tool"
    assert classified[-1].result_class == expected, classified
    again = replay(Recording.from_store(store, result.run_id), contracts)
    assert again.identical, describe(again)


def test_a_runtime_tool_the_model_called_is_still_there_for_its_lookup_in_replay(
    contracts: ContractSet,
) -> None:
    """The model calls `lookup_hold` itself (`unknown_tool`: only the runner may), then a lost
    hold is looked up with it: replay must not take the first answer for a missing tool."""
    store = MemoryStore()
    registry = FunctionTools(
        {
            "hold_room": ToolDouble(TimeoutError("the response was lost")),
            "lookup_hold": ToolDouble({"status": "ok", "found": True, "hold_id": "HOLD-1"}),
        }
    )
    engine = Engine(contracts=contracts, toolbox=registry, store=store, clock=FakeClock())
    spec = RunSpec(
        task="Hold a room.",
        tenant="optiverse",
        principal=Principal(id="agent-7", scopes=frozenset({"travel.book"})),
        tools=("hold_room", "lookup_hold"),
        seed=1,
    )
    turns = [call("lookup_hold"), call("hold_room", **HOLD), "Held."]
    model = FunctionModel(lambda transcript, tools: turns[model.requests - 1])
    result = engine.run_sync(spec, model)
    classes = [r.result_class for r in result.transitions if r.trigger == "classify"]
    assert classes == ["unknown_tool", "unknown_outcome", "ok"], classes
    again = replay(Recording.from_store(store, result.run_id), contracts)
    assert again.identical, describe(again)
