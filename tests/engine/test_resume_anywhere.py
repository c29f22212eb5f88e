"""A killed run resumed from another working directory, or one a live model drove, goes on with the
same world and the same model, or is refused: never a second write, never the fixture's script in
the live model's place.

Runs are real `runner` subprocesses killed with SIGKILL after a chosen durable commit
(`RUNNER_KILL_AFTER_COMMITS`); live models answer over HTTP from the loopback LLM server.
"""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.base.errors import StoreError
from runner.cli import main
from runner.store import SqliteStore
from runner.travel.supplier import SupplierDatabase, locate
from tests.support.crash_sweep import (
    HOLD_AFTER_COMMIT,
    HOLD_FIXTURES,
    LIVE,
    Variant,
    all_holds,
    crash_after_the_hold,
    live_args,
    llm,
    resume,
    sweep_fixture,
)
from tests.support.llm_server import RecordedLLMServer

__all__ = ["llm"]

pytestmark = pytest.mark.slow


def test_a_resumed_live_run_goes_on_with_its_live_model(
    tmp_path: Path, llm: RecordedLLMServer
) -> None:
    """Before: the fixture's script took over and held for four guests too (two holds)."""
    run_id = crash_after_the_hold(tmp_path, live_args(llm))
    asked = len(llm.requests[("openai", LIVE)])
    code, out, err = resume(tmp_path, run_id)
    assert all_holds(tmp_path) == 1
    assert code == 0, err
    assert json.loads(out)["terminal"] == "complete"
    assert len(llm.requests[("openai", LIVE)]) == asked + 1  # the final answer, from the model
    store = SqliteStore(tmp_path / "run" / "runs.sqlite")
    header, summary = store.header(run_id), store.summary(run_id)
    store.close()
    assert header is not None and header.model is not None
    assert (header.model.provider, header.model.name) == ("openai", LIVE)
    assert summary is not None and summary.answer == "Held a room at Shiba Park Hotel."


def test_a_live_run_resumes_with_the_same_model_named_again(
    tmp_path: Path, llm: RecordedLLMServer
) -> None:
    run_id = crash_after_the_hold(tmp_path, live_args(llm))
    code, _, err = resume(tmp_path, run_id, *live_args(llm))
    assert code == 0, err
    assert all_holds(tmp_path) == 1


MISMATCHES = {
    "provider": ["--model", "anthropic:live-hold"],
    "name": ["--model", "openai:another-model"],
    "base-url": ["--model", "openai:live-hold", "--base-url", "http://127.0.0.1:9/v1"],
    "fallback": ["--model", "openai:live-hold", "--fallback-model", "spare"],
}


def test_resuming_with_another_model_is_refused(tmp_path: Path, llm: RecordedLLMServer) -> None:
    run_id = crash_after_the_hold(tmp_path, live_args(llm))
    asked = sum(len(requests) for requests in llm.requests.values())
    for what, other in MISMATCHES.items():
        endpoint = [] if "--base-url" in other else ["--base-url", f"{llm.url}/v1"]
        code, out, err = resume(tmp_path, run_id, *other, *endpoint)
        assert (code, out) == (2, ""), what
        assert f"cannot resume run {run_id}: it was driven by openai:{LIVE}" in err, what
        assert "Traceback" not in err
    assert sum(len(requests) for requests in llm.requests.values()) == asked
    code, _, err = resume(tmp_path, run_id)  # still resumable, with its own model
    assert code == 0, err
    assert all_holds(tmp_path) == 1


def test_a_scripted_run_is_not_resumed_with_a_live_model(
    tmp_path: Path, llm: RecordedLLMServer
) -> None:
    run_id = crash_after_the_hold(tmp_path, [])
    code, _, err = resume(tmp_path, run_id, *live_args(llm))
    assert code == 2
    assert "it was driven by scripted:fixture-script, not openai:live-hold" in err


def test_resuming_from_another_directory_does_not_hold_again(tmp_path: Path) -> None:
    """Before: the relative supplier path opened a fresh, empty database in the new directory,
    the lookup found nothing there, and the hold was sent again."""
    run_id = crash_after_the_hold(tmp_path, [])
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "runs.sqlite.world").mkdir(parents=True)  # another store's world lives there
    code, out, err = resume(tmp_path, run_id, cwd=elsewhere)
    assert all_holds(tmp_path) == 1
    assert code == 0, err
    assert json.loads(out)["holds"] == 1
    assert list(elsewhere.rglob("*.sqlite")) == []


def test_a_missing_supplier_database_is_refused_by_name(tmp_path: Path) -> None:
    run_id = crash_after_the_hold(tmp_path, [])
    (world,) = (tmp_path / "run" / "runs.sqlite.world").glob("supplier-*.sqlite")
    for path in world.parent.iterdir():
        path.unlink()
    code, _, err = resume(tmp_path, run_id)
    assert code == 2
    assert f"cannot resume run {run_id}: its supplier database {world} does not exist" in err
    assert list(world.parent.iterdir()) == []  # not created afresh


def test_an_empty_supplier_database_is_refused_not_migrated(tmp_path: Path) -> None:
    """A world file emptied (truncated by a failed copy or restore) was migrated as a fresh
    database: the lookup found no hold there and the hold was sent again."""
    run_id = crash_after_the_hold(tmp_path, [])
    (world,) = (tmp_path / "run" / "runs.sqlite.world").glob("supplier-*.sqlite")
    for path in world.parent.iterdir():
        path.unlink()
    world.touch()
    code, out, err = resume(tmp_path, run_id)
    assert (code, out) == (2, "")
    assert f"cannot resume run {run_id}: its supplier database {world} is empty" in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert world.stat().st_size == 0  # left as it was found


def test_grade_stored_from_another_directory_passes_correct_hold_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the supplier path was relative to where the runs ran; graded from elsewhere,
    every hold fixture failed `holds`."""
    ran_in, graded_in = tmp_path / "ran", tmp_path / "graded"
    ran_in.mkdir()
    graded_in.mkdir()
    monkeypatch.chdir(ran_in)
    paths = [str(path) for path in HOLD_FIXTURES]
    assert main(["run", *paths, "--db", "runs.sqlite", "--json"]) == 0
    monkeypatch.chdir(graded_in)
    capsys.readouterr()
    assert main(["grade", "--stored", "--db", str(ran_in / "runs.sqlite"), "--json"]) == 0
    grades = json.loads(capsys.readouterr().out)
    assert grades["fixtures"] and all(g["pass_k"] for g in grades["fixtures"])
    assert list(graded_in.iterdir()) == []


def test_grading_a_run_whose_supplier_database_is_gone_names_it_and_grades_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was graded as failing (`holds_as_declared: None holds, declared 1`, exit 1), and
    `resume --json` of it said `"holds": null`, which reads as a run with no world."""
    monkeypatch.chdir(tmp_path)
    hold = next(path for path in HOLD_FIXTURES if path.name == "hold_timeout_after_commit.yaml")
    assert main(["run", str(hold), "--db", "runs.sqlite"]) == 0
    ((run_id, _),) = sqlite3.connect("runs.sqlite").execute("SELECT run_id, 0 FROM runs")
    for path in (tmp_path / "runs.sqlite.world").iterdir():
        path.unlink()
    capsys.readouterr()
    assert main(["grade", "--stored", "--db", "runs.sqlite"]) == 2
    err = capsys.readouterr().err
    assert f"error: run {run_id}: supplier database " in err and "does not exist" in err
    assert main(["resume", run_id, "--db", "runs.sqlite", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "does not exist" in captured.err


# -- the crash-and-resume sweep, from elsewhere and with a live model ------------------------------


def _sweeps(variants: list[tuple[Path, Variant]], workdir: Path) -> list[str]:
    def one(item: tuple[Path, Variant]) -> tuple[str, int, list[str]]:
        path, variant = item
        folder = workdir / f"{len(variant.run_args)}-{variant.elsewhere}-{variant.stride}"
        folder.mkdir(exist_ok=True)
        sweep = sweep_fixture(path, folder, variant)
        return sweep.fixture, sweep.points, sweep.problems

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, variants))
    assert all(points >= 2 for _, points, _ in results), results
    print(f"\n  {sum(points for _, points, _ in results)} crash points: {results}")
    return [problem for _, _, problems in results for problem in problems]


def test_sweep_resume_from_another_directory(tmp_path: Path) -> None:
    """Every hold fixture, every third crash point (1, 4, 7, ...), resumed from another folder."""
    variant = Variant(elsewhere=True, stride=3)
    assert _sweeps([(path, variant) for path in HOLD_FIXTURES], tmp_path) == []


def test_sweep_resume_of_a_live_model_run(tmp_path: Path, llm: RecordedLLMServer) -> None:
    """The hold fixture driven by a live model unlike its script: every second crash point over
    the OpenAI protocol (1, 3, 5, ...); every fifth over the Anthropic one (2, 7, 12, 17),
    resumed from another folder."""
    variants = [
        (HOLD_AFTER_COMMIT, Variant(run_args=tuple(live_args(llm)), stride=2)),
        (
            HOLD_AFTER_COMMIT,
            Variant(run_args=tuple(live_args(llm, "anthropic")), elsewhere=True, stride=5, first=2),
        ),
    ]
    assert _sweeps(variants, tmp_path) == []


def test_a_relative_path_from_an_older_runner_is_found_beside_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Older headers recorded the supplier database relative to where the run was started."""
    store_dir = tmp_path / "project" / "sub"
    world = store_dir / "runs.sqlite.world"
    world.mkdir(parents=True)
    SupplierDatabase(world / "supplier-abc.sqlite").close()
    monkeypatch.chdir(tmp_path)  # neither where the run started nor where the store is
    for recorded in ("sub/runs.sqlite.world/supplier-abc.sqlite",  # run from project/
                     "runs.sqlite.world/supplier-abc.sqlite"):  # run from project/sub/  # fmt: skip
        assert locate(recorded, store_dir) == world / "supplier-abc.sqlite"
    assert locate("runs.sqlite.world/supplier-other.sqlite", store_dir) is None
    assert locate(str(world / "supplier-abc.sqlite"), None) == world / "supplier-abc.sqlite"
    with pytest.raises(StoreError, match=r"supplier-gone\.sqlite does not exist"):
        SupplierDatabase.open_existing(world / "supplier-gone.sqlite")
    assert sorted(p.name for p in world.glob("*.sqlite")) == ["supplier-abc.sqlite"]
