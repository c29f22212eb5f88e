"""`show` prints call ids for `artifact`; `resume --json` and `runs --json` print JSON; `--verbose`
goes before or after the subcommand."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from runner.cli import main
from tests.support.paths import FIXTURES, ROOT


def _run(db: str, fixture: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["run", str(FIXTURES / fixture), "--db", db, "--json"]) == 0
    return str(json.loads(capsys.readouterr().out)["run_id"])


def test_show_prints_the_call_ids_artifact_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.sqlite")
    run_id = _run(db, "parallel_calls.yaml", capsys)
    assert main(["show", run_id, "--db", db]) == 0
    lines = capsys.readouterr().out.splitlines()
    rail = next(line for line in lines if "classify" in line and "check_rail" in line)
    call_id = rail.split()[6]  # seq, from, ->, to, trigger, tool, call id
    assert call_id == "c-rail"
    assert main(["artifact", run_id, call_id, "--db", db]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "ok"


def test_resume_json_of_an_ended_run_is_the_stored_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.sqlite")
    run_id = _run(db, "access_denied.yaml", capsys)
    assert main(["resume", run_id, "--db", db, "--json"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert main(["show", run_id, "--db", db, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert resumed == {**shown, "already_ended": True}
    assert resumed["terminal"] == "escalate"


def test_resume_json_of_an_ended_write_reports_its_holds_as_the_run_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.sqlite")
    assert main(["run", str(FIXTURES / "hold_not_committed.yaml"), "--db", db, "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert main(["resume", ran["run_id"], "--db", db, "--json"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["holds"] == ran["holds"] == 1
    assert resumed["transitions"] == ran["transitions"]


def test_runs_json_is_one_object_per_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.sqlite")
    first = _run(db, "access_denied.yaml", capsys)
    second = _run(db, "rate_limited.yaml", capsys)
    assert main(["runs", "--db", db, "--json"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {item["run_id"] for item in listed} == {first, second}
    by_id = {item["run_id"]: item for item in listed}
    assert by_id[first] == {
        "run_id": first,
        "fixture": "access_denied",
        "started": by_id[first]["started"],
        "terminal": "escalate",
        "reason": "access_denied",
        "attempts": 1,
        "unreadable": None,
    }


@pytest.mark.parametrize(
    "argv",
    [
        ["--verbose", "contracts", "check"],
        ["contracts", "check", "--verbose"],
        ["contracts", "--verbose", "check"],
    ],
)
def test_verbose_is_accepted_before_and_after_the_subcommand(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 0
    assert "contracts compiled" in capsys.readouterr().out


@pytest.mark.slow
def test_verbose_after_the_subcommand_logs_transitions(tmp_path: Path) -> None:
    fixture = str(FIXTURES / "access_denied.yaml")
    db = str(tmp_path / "r.sqlite")
    for verbose in ([], ["--verbose"]):
        done = subprocess.run(
            [sys.executable, "-m", "runner", "run", fixture, "--db", db, *verbose],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert ("transition" in done.stderr) == bool(verbose)


def test_runs_json_names_an_unreadable_run_in_its_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.sqlite"
    good = _run(str(db), "access_denied.yaml", capsys)
    bad = _run(str(db), "rate_limited.yaml", capsys)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE runs SET header = 'not json' WHERE run_id = ?", (bad,))
    conn.close()
    assert main(["runs", "--db", str(db), "--json"]) == 2
    out, err = capsys.readouterr()
    listed = {item["run_id"]: item for item in map(json.loads, out.splitlines())}
    assert listed[good]["unreadable"] is None
    assert listed[bad] == {"run_id": bad, "unreadable": listed[bad]["unreadable"]}
    assert f"run {bad} header cannot be read back" in listed[bad]["unreadable"]
    assert err.count("\n") == 1 and f"run {bad} header cannot be read back" in err


def test_show_tells_how_the_run_was_started_and_each_requests_output_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.sqlite")
    fixture = str(FIXTURES / "parallel_calls.yaml")
    argv = ["run", fixture, "--db", db, "--json", "--durability", "step", "--seed", "7"]
    assert main(argv) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["show", run_id, "--db", db, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    started = shown["started_as"]
    assert (started["durability"], started["seed"], started["tenant"]) == ("step", 7, "optiverse")
    assert started["model"].startswith("scripted:")
    limits = shown["context"]["max_output_tokens_per_step"]
    assert len(limits) == shown["model_steps"] >= 2
    assert all(isinstance(limit, int) and limit > 0 for limit in limits)
    assert main(["show", run_id, "--db", db]) == 0
    assert "started as: durability step  seed 7" in capsys.readouterr().out
