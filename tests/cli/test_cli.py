"""The `runner` command, in-process and as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runner import Engine, FunctionTools, Principal, RunSpec, SqliteStore, SystemClock
from runner.cli import main
from runner.record.trace import read_log
from runner.store.base import RunListing
from runner.testing import FunctionModel
from runner.travel import load_travel_contracts
from tests.support.paths import FIXTURES, ROOT

TRANSITION_KEYS = {
    "seq",
    "from",
    "to",
    "trigger",
    "tool",
    "call_id",
    "args",
    "result_class",
    "attempt",
    "decision",
    "latency_ms",
    "operation_key",
    "tokens_in",
    "tokens_out",
    "wait_s",
    "reason",
    "time",
    "observation",
    "approval",
    "provenance",
    "cost_usd",
    "offered",
    "manifest_tokens",
}
RUN_KEYS = {
    "run_id",
    "fixture",
    "terminal",
    "reason",
    "limit_spent",
    "answer",
    "attempts",
    "model_steps",
    "tokens",
    "elapsed_s",
    "waits_s",
    "states",
    "transitions",
    "expect",
    "holds",
    "operation_keys",
    "context",
    "cost_usd",
}


def test_each_repeated_copy_runs_with_its_own_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Copy i of `--repeat` runs with SEED + i, as grade's trials do: copies that all drew the
    same jitter would be one sample repeated."""
    db = tmp_path / "runs.sqlite"
    fixture = str(FIXTURES / "hold_not_committed.yaml")
    assert main(["run", fixture, "--repeat", "3", "--seed", "41", "--db", str(db)]) == 0
    store = SqliteStore(db, read_only=True)
    try:
        runs = store.runs()
        seeds = sorted(run.header.seed for run in runs if isinstance(run, RunListing))
    finally:
        store.close()
    assert len(runs) == 3 and seeds == [41, 42, 43]
    assert "3 runs met expectations" in capsys.readouterr().out


def test_run_all_fixtures_three_times_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "runs.sqlite")
    assert main(["run", str(FIXTURES), "--repeat", "3", "--json", "--db", db]) == 0
    runs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    fixtures = {path.stem for path in FIXTURES.iterdir() if path.is_file()}  # not the corpora
    assert len(runs) == 3 * len(fixtures)
    for run in runs:
        assert set(run) == RUN_KEYS
        assert run["expect"] == {"passed": True, "failures": []}
        assert run["attempts"] <= 8 and run["elapsed_s"] <= 30
        for transition in run["transitions"]:
            assert set(transition) == TRANSITION_KEYS
            observation = transition["observation"]
            if transition["trigger"] == "classify":  # the typed observation, as JSON
                assert observation["kind"] == transition["result_class"]
            else:
                assert observation is None


def test_human_output_has_one_line_per_transition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(FIXTURES / "rate_limited.yaml"), "--db", str(tmp_path / "r.db")]) == 0
    out = capsys.readouterr().out
    assert "call -> observe" in out and "rate_limited" in out and "wait 2 s" in out
    assert "=> complete (model_final)" in out and "expect: met" in out
    assert "1 fixtures x 1: 1 runs met expectations, 0 did not" in out


def test_failed_expectation_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        (FIXTURES / "read_only_success.yaml")
        .read_text()
        .replace("terminal: complete", "terminal: escalate")
    )
    path = tmp_path / "wrong.yaml"
    path.write_text(text)
    assert main(["run", str(path), "--db", str(tmp_path / "r.db")]) == 1
    assert (
        "expect: FAILED: terminal: expected 'escalate', got 'complete'" in capsys.readouterr().out
    )


def test_log_file_is_written_and_reads_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.jsonl"
    argv = ["run", str(FIXTURES / "parallel_calls.yaml"), "--repeat", "2", "--log", str(log)]
    assert main([*argv, "--db", str(tmp_path / "runs.sqlite")]) == 0
    runs = read_log(log)
    assert len(runs) == 2
    assert all(run.summary is not None and run.summary.terminal == "complete" for run in runs)
    assert [r.seq for r in runs[0].transitions] == list(range(1, len(runs[0].transitions) + 1))


def test_bad_fixture_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: [\n")
    assert main(["run", str(path), "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: fixture ") and err.count("\n") == 1


def test_contracts_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["contracts", "check"]) == 0
    assert "ok: 64 contracts compiled" in capsys.readouterr().out


def test_contracts_check_reports_a_broken_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.json").write_text('{"name": "broken"}')
    assert main(["--contracts", str(tmp_path), "contracts", "check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: contract ") and err.count("\n") == 1


def test_seed_changes_jitter_but_not_outcomes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(FIXTURES / "transient_timeout_retry.yaml")
    waits = []
    for seed in ("1", "2"):
        assert main(["run", path, "--json", "--seed", seed, "--db", str(tmp_path / "r.db")]) == 0
        waits.append(json.loads(capsys.readouterr().out)["waits_s"])
    assert waits[0] != waits[1]


def test_module_entry_point_runs_as_a_subprocess(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runner", "run", str(FIXTURES / "access_denied.yaml"), "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["terminal"] == "escalate"
    assert (tmp_path / "runs.sqlite").is_file()  # the default store: where it was run, not the repo


def test_show_and_runs_read_the_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "r.db")
    assert main(["run", str(FIXTURES / "hold_not_committed.yaml"), "--db", db, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["holds"] == 1 and run["operation_keys"][0]["status"] == "committed"
    assert main(["runs", "--db", db]) == 0
    listing = capsys.readouterr().out
    assert run["run_id"] in listing and "hold_not_committed" in listing and "complete" in listing
    assert main(["show", run["run_id"], "--db", db]) == 0
    shown = capsys.readouterr().out
    assert "reconcile    lookup_hold" in shown and "not_applied" in shown
    assert main(["show", run["run_id"], "--db", db, "--json"]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert stored["transitions"] == run["transitions"]  # the store alone tells the same story


def test_resume_of_an_ended_run_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.db")
    assert main(["run", str(FIXTURES / "access_denied.yaml"), "--db", db, "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["resume", run_id, "--db", db]) == 0
    assert "already ended: escalate (access_denied)" in capsys.readouterr().out


def test_unknown_run_and_missing_store_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "nope", "--db", str(tmp_path / "missing.db")]) == 2
    assert "does not exist" in capsys.readouterr().err
    db = str(tmp_path / "r.db")
    assert main(["run", str(FIXTURES / "access_denied.yaml"), "--db", db]) == 0
    capsys.readouterr()
    assert main(["show", "nope", "--db", db]) == 2
    assert main(["resume", "nope", "--db", db]) == 2
    assert "no run nope" in capsys.readouterr().err


def test_naive_policy_makes_two_holds_and_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", str(FIXTURES / "hold_timeout_after_commit.yaml"), "--db", str(tmp_path / "r.db")]
    assert main([*args, "--policy", "naive", "--json"]) == 1
    run = json.loads(capsys.readouterr().out)
    assert run["holds"] == 2 and "holds: expected 1, got 2" in run["expect"]["failures"]


def test_a_corrupt_store_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.db"
    db.write_bytes(b"garbage" * 1000)
    assert main(["run", str(FIXTURES / "access_denied.yaml"), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("error: ")
        and "not a readable runner database" in err
        and err.count("\n") == 1
    )


def test_a_closed_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    command = (
        f"{sys.executable} -m runner run {FIXTURES} --json --db {tmp_path / 'r.db'} | head -c 100"
    )
    done = subprocess.run(
        command, shell=True, capture_output=True, text=True, cwd=tmp_path, check=False, timeout=120
    )
    assert "Traceback" not in done.stderr and len(done.stdout) == 100


@pytest.mark.parametrize(
    ("keywords", "fragment"),
    [
        ({"format": "iri"}, "format 'iri' cannot be asserted"),
        ({"pattern": "\\p{Digit}"}, "pattern"),
    ],
)
def test_contracts_check_refuses_what_cannot_be_checked_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], keywords: dict[str, str], fragment: str
) -> None:
    data = json.loads((ROOT / "contracts" / "search_flights.json").read_text())
    data["input_schema"]["properties"]["origin"] = {"type": "string", **keywords}
    (tmp_path / "search_flights.json").write_text(json.dumps(data))
    assert main(["--contracts", str(tmp_path), "contracts", "check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: contract ") and fragment in err and err.count("\n") == 1


def test_runs_keeps_its_columns_aligned_for_a_run_started_on_the_system_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An embedded run starts at a time with microseconds (32 characters, not 25): the `started`
    column pushed every later column of its row out of line with the header."""
    db = tmp_path / "r.db"
    assert main(["run", str(FIXTURES / "access_denied.yaml"), "--db", str(db)]) == 0
    store = SqliteStore(db)
    engine = Engine(
        contracts=load_travel_contracts(), toolbox=FunctionTools(), store=store, clock=SystemClock()
    )
    spec = RunSpec(task="t", tenant="x", principal=Principal(id="p", scopes=frozenset()), tools=())
    engine.run_sync(spec, FunctionModel(lambda transcript, tools: "done"))
    store.close()
    capsys.readouterr()
    assert main(["runs", "--db", str(db)]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 2
    for column in ("fixture", "terminal", "attempts"):
        at = header.index(column)
        assert all(row[at - 2 : at] == "  " and row[at] != " " for row in rows), (column, rows)


def test_help_says_what_the_command_does_and_nothing_of_the_code_layout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`runner --help` printed the package docstring whole, its notes on layers included."""
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "run fixtures; resume, show and list stored runs" in out
    assert "layer" not in out and "_common.WORLD" not in out
