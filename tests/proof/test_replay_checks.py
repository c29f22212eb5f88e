"""An exact replay checks everything the run recorded, not only its transitions, and names what
differs with both values."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from runner.cli import main
from runner.harness.fixtures import load_fixture
from runner.proof.replay import Recording, describe, replay
from runner.record.trace import OperationSummary
from runner.store import SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES
from tests.support.travel import stored_run_with_a_forged_summary


def _recording(name: str, tmp_path: Path, contracts: ContractSet) -> Recording:
    store = SqliteStore(tmp_path / "runs.sqlite")
    fixture = load_fixture(FIXTURES / f"{name}.yaml", contracts)
    outcome = run_fixture(fixture, contracts, store, world_dir=tmp_path / "world")
    recording = Recording.from_store(store, outcome.result.run_id)
    store.close()
    return recording


def _diverges(recording: Recording, contracts: ContractSet) -> str:
    outcome = replay(recording, contracts)
    assert not outcome.identical
    assert outcome.divergence is not None
    return describe(outcome)


def test_an_edited_summary_terminal_is_a_divergence_naming_the_field(
    tmp_path: Path, contracts: ContractSet
) -> None:
    recording = _recording("hold_reconcile_inconclusive", tmp_path, contracts)
    assert recording.summary is not None and recording.summary.terminal == "unknown"
    recording.summary = dataclasses.replace(
        recording.summary, terminal="complete", reason="model_final"
    )
    sentence = _diverges(recording, contracts)
    assert "terminal" in sentence and "complete" in sentence and "unknown" in sentence
    assert "reason" in sentence and "model_final" in sentence


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("attempts", 7),
        ("answer", "Held two rooms."),
        ("model_steps", 9),
    ],
)
def test_every_summary_field_is_compared(
    field: str, value: object, tmp_path: Path, contracts: ContractSet
) -> None:
    recording = _recording("hold_timeout_after_commit", tmp_path, contracts)
    assert recording.summary is not None
    original = getattr(recording.summary, field)
    recording.summary = dataclasses.replace(recording.summary, **{field: value})
    sentence = _diverges(recording, contracts)
    assert field in sentence and str(value) in sentence and str(original) in sentence


def test_an_edited_operation_status_is_a_divergence(tmp_path: Path, contracts: ContractSet) -> None:
    recording = _recording("hold_reconcile_inconclusive", tmp_path, contracts)
    assert recording.summary is not None
    [op] = recording.summary.operations
    recording.summary = dataclasses.replace(
        recording.summary,
        operations=[OperationSummary(key=op.key, tool=op.tool, status="committed")],
    )
    sentence = _diverges(recording, contracts)
    assert "operations" in sentence and "committed" in sentence and "unknown" in sentence


def test_an_edited_final_model_text_is_a_divergence(tmp_path: Path, contracts: ContractSet) -> None:
    recording = _recording("hold_timeout_after_commit", tmp_path, contracts)
    last = recording.turns[-1]
    recording.turns[-1] = dataclasses.replace(last, text="I booked nothing.")
    sentence = _diverges(recording, contracts)
    assert "answer" in sentence and "I booked nothing." in sentence


def test_an_edited_input_operation_key_is_a_divergence(
    tmp_path: Path, contracts: ContractSet
) -> None:
    recording = _recording("hold_timeout_after_commit", tmp_path, contracts)
    index = next(i for i, o in enumerate(recording.outputs) if o.operation_key)
    original = recording.outputs[index].operation_key
    assert original is not None
    recording.outputs[index] = dataclasses.replace(
        recording.outputs[index], operation_key="forged-key"
    )
    sentence = _diverges(recording, contracts)
    assert "operation_key" in sentence and "forged-key" in sentence and original in sentence


def test_a_transition_differing_in_an_unprinted_field_names_it_with_both_values(
    tmp_path: Path, contracts: ContractSet
) -> None:
    recording = _recording("hold_timeout_after_commit", tmp_path, contracts)
    index = next(i for i, r in enumerate(recording.transitions) if r.args)
    record = recording.transitions[index]
    assert record.args is not None
    recording.transitions[index] = dataclasses.replace(record, args={**record.args, "guests": 9})
    sentence = _diverges(recording, contracts)
    assert f"seq {record.seq}" in sentence and "args" in sentence
    assert "'guests': 9" in sentence and "'guests': 4" in sentence
    expected, got = sentence.split("expected", 1)[1].split(", got", 1)
    assert expected != got


def test_an_edited_summary_row_in_sqlite_fails_replay_on_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.sqlite"
    run_id = stored_run_with_a_forged_summary(db, capsys)
    assert main(["replay", run_id, "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "identical" not in out and "terminal" in out and "complete" in out


def test_an_edited_run_finished_line_fails_replay_of_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "r.jsonl"
    fixture = str(FIXTURES / "hold_reconcile_inconclusive.yaml")
    assert main(["run", fixture, "--db", str(tmp_path / "r.db"), "--log", str(log)]) == 0
    lines = []
    for line in log.read_text().splitlines():
        data = json.loads(line)
        if data["type"] == "run_finished":
            data["terminal"], data["reason"] = "complete", "model_final"
        lines.append(json.dumps(data))
    log.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["replay", str(log)]) == 1
    out = capsys.readouterr().out
    assert "identical" not in out and "terminal" in out
