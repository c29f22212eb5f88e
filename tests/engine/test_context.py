"""Context accounting and truncation: the prefill is visible, big results are cut, none lost."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from runner.cli import main
from runner.harness.fixtures import load_fixture
from runner.models.scripted import ScriptedModel
from runner.models.transcript import render_json
from runner.record._render import render_for_model
from runner.tools.contracts import ContractSet
from tests.support.driving import RecordingModel, drive
from tests.support.paths import FIXTURES

BIG = {"call_id": "c1", "tool": "t", "result_class": "ok", "attempts_left": 3,
       "result": {"rows": ["x" * 50] * 400}}  # fmt: skip


def test_small_results_are_shown_whole() -> None:
    body = {"call_id": "c1", "result": {"a": 1}}
    text = render_json(body)
    assert render_for_model(body, limit=100, run_id="r", call_id="c1") == (text, len(text))


def test_large_results_show_head_tail_and_where_the_rest_is() -> None:
    text, full = render_for_model(BIG, limit=1000, run_id="run-1", call_id="c1")
    shown = json.loads(text)
    assert full == len(render_json(BIG)) and len(text) < 1400
    assert shown["truncated"] is True and shown["call_id"] == "c1"
    elided = len(render_json(BIG["result"])) - 1000
    assert f"...[{elided} of " in shown["result"]
    assert "runner artifact run-1 c1" in shown["result"]
    assert shown["result"].startswith('{"rows":["xxx')
    assert render_for_model(BIG, limit=1000, run_id="run-1", call_id="c1")[0] == text


def test_the_large_result_fixture_reports_its_prefill_saving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.sqlite")
    assert main(["run", str(FIXTURES / "large_result.yaml"), "--db", db, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    context = run["context"]
    assert len(context["input_tokens_per_step"]) == 4
    assert context["cumulative_prefill"] == sum(context["input_tokens_per_step"])
    assert context["cumulative_prefill_without_truncation"] > 4 * context["cumulative_prefill"]
    assert main(["artifact", run["run_id"], "call_1_0", "--db", db]) == 0
    full = json.loads(capsys.readouterr().out)
    assert len(full["options"]) == 10 and len(full["options"][0]["description"]) == 3000
    assert main(["show", run["run_id"], "--db", db]) == 0
    shown = capsys.readouterr().out
    assert "step  input_tokens  cumulative_prefill" in shown
    assert "without truncation the cumulative prefill would be" in shown


def test_the_transcript_is_an_exact_growing_prefix(contracts: ContractSet) -> None:
    fixture = load_fixture(FIXTURES / "large_result.yaml", contracts)
    model = RecordingModel(ScriptedModel(fixture.model))
    drive(fixture, contracts, model)
    seen = model.transcripts
    assert len(seen) == 4
    for earlier, later in pairwise(seen):
        assert later[: len(earlier)] == earlier


def test_artifact_for_an_unknown_call_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.sqlite")
    assert main(["run", str(FIXTURES / "access_denied.yaml"), "--db", db, "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["artifact", run_id, "nope", "--db", db]) == 2
    assert "has no tool output for call nope" in capsys.readouterr().err
