"""`runner resume RUN_ID --app module:function`: a run an embedded application started, killed
with SIGKILL at every commit point, resumed by the command line from another directory with the
application's own factory. Each run ends in a declared state; the write happened at most once,
and once exactly when the record says it committed, counted at the tool boundary (the
application's effects file), not from the runner's records."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

APP_DIR = ROOT / "tests" / "support"
START = "import resume_app; resume_app.start()"


def _env(folder: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RUNNER_KILL_AFTER_COMMITS"}
    env.update(RESUME_APP_DB=str(folder / "runs.sqlite"), RESUME_APP_EFFECTS=str(folder / "fx"))
    env["PYTHONPATH"] = str(APP_DIR)
    return {**env, **more}


def _start(folder: Path, kill_after: int | None) -> int:
    more = {} if kill_after is None else {"RUNNER_KILL_AFTER_COMMITS": str(kill_after)}
    done = subprocess.run(
        [sys.executable, "-c", START],
        check=False,
        cwd=folder,
        env=_env(folder, **more),
        timeout=120,
    )
    return done.returncode


def _resume(folder: Path, elsewhere: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    env = _env(folder)
    env.pop("PYTHONPATH")  # found through --app-dir, as a user's service would be
    return subprocess.run(
        [
            *(sys.executable, "-m", "runner", "resume", run_id),
            *("--app", "resume_app:build", "--app-dir", str(APP_DIR)),
            *("--db", str(folder / "runs.sqlite")),
        ],
        cwd=elsewhere,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _run_ids(folder: Path) -> list[str]:
    with sqlite3.connect(folder / "runs.sqlite") as db:
        return [row[0] for row in db.execute("SELECT run_id FROM runs")]


@pytest.mark.slow
def test_a_killed_embedded_run_resumes_from_the_cli_with_its_write_once(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outcomes = []
    for kill_after in range(1, 40):
        folder = tmp_path / f"kill-{kill_after}"
        folder.mkdir()
        status = _start(folder, kill_after)
        if status == 0:  # past the run's last commit: the sweep has covered every one
            break
        assert status == -signal.SIGKILL, status
        ids = _run_ids(folder) if (folder / "runs.sqlite").exists() else []
        if not ids:  # killed before the header was stored: no run to resume
            continue
        (run_id,) = ids
        done = _resume(folder, elsewhere, run_id)
        assert done.returncode == 0, done.stdout + done.stderr
        if "already ended" in done.stdout:  # killed after its last commit: nothing to resume
            continue
        effects = (folder / "fx").read_text().split() if (folder / "fx").exists() else []
        outcomes.append((kill_after, done.stdout, effects))
    else:
        pytest.fail("the run never finished without being killed")
    assert len(outcomes) >= 4, outcomes  # commit points before and after the write was sent
    for kill_after, shown, effects in outcomes:
        assert "=> complete (model_final)" in shown, (kill_after, shown)
        # Never twice; and once exactly when the record says the write committed (a write the
        # crash stopped before it was sent is looked up, found not applied, and reported failed).
        committed = "(book_room): committed" in shown
        assert len(effects) == (1 if committed else 0), (kill_after, effects, shown)
    assert any("(book_room): committed" in shown for _, shown, _ in outcomes)
    assert any("(book_room): failed" in shown for _, shown, _ in outcomes)
