"""Runs stored before `RunSpec.annotations` and the recorded system prompt still load, resume,
grade and replay: their headers kept the fixture layer's `fixture` and `world` as fields of their
own and recorded no prompt (every run was told the travel prompt)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runner.cli import main
from runner.record.trace import HEADER_ADAPTER, read_log
from runner.store import SqliteStore
from runner.travel import SYSTEM_PROMPT
from tests.support.crash_sweep import runner_process
from tests.support.paths import FIXTURES

HOLD = FIXTURES / "hold_timeout_after_commit.yaml"


def _older(header: dict[str, Any]) -> dict[str, Any]:
    """A header as the runner wrote it before this change."""
    older = dict(header)
    annotations = older.pop("annotations")
    del older["system_prompt"]
    older["fixture"] = annotations.get("fixture")
    older["world"] = annotations.get("world", {})
    return older


def test_an_older_header_reads_its_fixture_and_world_into_annotations() -> None:
    older = {
        "run_id": "r1",
        "name": "x",
        "tenant": "t",
        "principal": "p",
        "started_at": "2027-03-01T09:00:00Z",
        "task": "t",
        "tools": [],
        "scopes": [],
        "context": {},
        "limits": {},
        "policy": {},
        "seed": 0,
        "fixture": {"name": "x"},
        "world": {"supplier_db": "/w/s.sqlite"},
    }
    header = HEADER_ADAPTER.validate_json(json.dumps(older))
    assert header.annotations == {"fixture": {"name": "x"}, "world": {"supplier_db": "/w/s.sqlite"}}
    assert header.system_prompt is None
    embedded = HEADER_ADAPTER.validate_python({**older, "fixture": None, "world": {}})
    assert embedded.annotations == {}


def test_a_log_with_older_headers_still_reads(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    log = tmp_path / "runs.jsonl"
    assert (
        main(["run", str(FIXTURES / "read_only_success.yaml"), "--db", str(db), "--log", str(log)])
        == 0
    )
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    lines[0] = _older(lines[0])
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (run,) = read_log(log)
    assert run.header.annotations["fixture"]["name"] == "read_only_success"
    assert main(["replay", str(log)]) == 0  # identical, told the travel prompt


def test_a_killed_run_with_an_older_header_resumes_grades_and_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = runner_process(["run", str(HOLD), "--db", "runs.sqlite"], tmp_path, kill_after=6)
    assert done.returncode != 0, "the run finished before it was killed"
    db = tmp_path / "runs.sqlite"
    store = SqliteStore(db)
    (listing,) = store.runs()
    run_id = listing.header.run_id
    assert store.summary(run_id) is None
    store.close()
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("SELECT header FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        stored = json.loads(text)
        assert stored["system_prompt"] == SYSTEM_PROMPT  # what the fixture layer now records
        conn.execute(
            "UPDATE runs SET header = ? WHERE run_id = ?", (json.dumps(_older(stored)), run_id)
        )
    capsys.readouterr()
    assert main(["resume", run_id, "--db", str(db), "--json"]) == 0  # its expectation met
    assert json.loads(capsys.readouterr().out)["expect"]["passed"]
    assert main(["grade", "--stored", run_id, "--db", str(db), "--json"]) == 0
    assert main(["replay", run_id, "--db", str(db)]) == 0
    assert "identical" in capsys.readouterr().out
