"""A run's recorded inputs hold one model turn and one tool outcome per ordinal. Two for one
ordinal are an edited record: one would silently shadow the other when the run is re-driven (a
replay said `identical` for a log holding two outcomes of one lookup; stranger finding). Every
reader refuses such a record, naming the run and the ordinal, as a gap in transitions is."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from runner.base.errors import LogFormatError, StoreCorrupt
from runner.cli import main
from runner.proof.replay import Recording, replay
from runner.record.recording import Responded
from runner.record.trace import read_log
from runner.store import MemoryStore, SqliteStore
from runner.store.sqlite import OUTPUT, TURN
from runner.tools.contracts import ContractSet
from tests.support.bare_rows import header
from tests.support.paths import FIXTURES

FIXTURE = str(FIXTURES / "hold_timeout_after_commit.yaml")


def _ran(tmp_path: Path) -> tuple[Path, Path, str]:
    db, log = tmp_path / "s.sqlite", tmp_path / "l.jsonl"
    assert main(["run", FIXTURE, "--db", str(db), "--log", str(log)]) == 0
    [started] = [json.loads(line) for line in log.read_text().splitlines()[:1]]
    return db, log, started["run_id"]


def _forged_line(
    lines: list[dict[str, object]], kind: str, ordinal: int
) -> list[dict[str, object]]:
    """`lines` with a second `kind` line for `ordinal`, other content, in front of the real one."""
    at = next(
        i for i, line in enumerate(lines) if line["type"] == kind and line["ordinal"] == ordinal
    )
    forged = json.loads(json.dumps(lines[at]))
    if kind == "tool_output":
        forged["outcome"]["payload"] = {"status": "ok", "found": False}
    else:
        forged["text"] = "forged"
    return [*lines[:at], forged, *lines[at:]]


@pytest.mark.parametrize(
    ("kind", "what"), [("tool_output", "tool output"), ("model_turn", "model turn")]
)
def test_a_log_with_two_inputs_for_one_ordinal_is_refused(
    tmp_path: Path, kind: str, what: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, log, run_id = _ran(tmp_path)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    forged = tmp_path / "forged.jsonl"
    forged.write_text("".join(json.dumps(line) + "\n" for line in _forged_line(lines, kind, 3)))
    with pytest.raises(LogFormatError, match=f"run {run_id} {what} 3 recorded twice"):
        read_log(forged)
    capsys.readouterr()
    assert main(["replay", str(forged)]) != 0
    assert "identical" not in capsys.readouterr().out


def _second_row(db: Path, run_id: str, kind: int, ordinal: int, change: dict[str, object]) -> None:
    """A second `run_log` row for the run's input `ordinal`, in front of the real one."""
    conn = sqlite3.connect(db)
    with conn:
        (run_no,) = conn.execute("SELECT run_no FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        entry, body = conn.execute(
            "SELECT entry, body FROM run_log WHERE kind = ? AND number = ? AND entry >> 32 = ?",
            (kind, ordinal, run_no),
        ).fetchone()
        conn.execute(
            "UPDATE run_log SET entry = entry + 1000000 WHERE entry >= ? AND entry >> 32 = ?",
            (entry, run_no),
        )
        forged = {**json.loads(body), **change}
        conn.execute(
            "INSERT INTO run_log (entry, kind, number, body) VALUES (?, ?, ?, ?)",
            (entry, kind, ordinal, json.dumps(forged)),
        )
    conn.close()


@pytest.mark.parametrize(
    ("kind", "what", "change"),
    [
        (OUTPUT, "tool output", {"outcome": {"form": "response", "payload": {"found": False}}}),
        (TURN, "model turn", {"text": "forged"}),
    ],
)
def test_a_store_with_two_inputs_for_one_ordinal_is_corrupt(
    tmp_path: Path,
    kind: int,
    what: str,
    change: dict[str, object],
    capsys: pytest.CaptureFixture[str],
) -> None:
    db, _, run_id = _ran(tmp_path)
    _second_row(db, run_id, kind, 3, change)
    store = SqliteStore(db, read_only=True)
    try:
        with pytest.raises(StoreCorrupt, match=f"run {run_id} {what} 3 recorded twice"):
            store.outputs(run_id) if kind == OUTPUT else store.turns(run_id)
    finally:
        store.close()
    capsys.readouterr()
    assert main(["replay", run_id, "--db", str(db)]) == 2
    assert f"{what} 3 recorded twice" in capsys.readouterr().err
    assert main(["grade", "--stored", "--db", str(db)]) != 0


def test_the_memory_store_refuses_two_inputs_for_one_ordinal(tmp_path: Path) -> None:
    db, _, run_id = _ran(tmp_path)
    sqlite = SqliteStore(db, read_only=True)
    stored, outputs, turns = sqlite.header(run_id), sqlite.outputs(run_id), sqlite.turns(run_id)
    sqlite.close()
    assert stored is not None
    memory = MemoryStore()
    memory.begin_run(stored)
    memory.append_inputs(run_id, [*turns, *outputs])
    assert memory.outputs(run_id) == outputs
    memory.append_inputs(run_id, [dataclasses.replace(outputs[2], outcome=Responded(payload={}))])
    with pytest.raises(StoreCorrupt, match=f"run {run_id} tool output 3 recorded twice"):
        memory.outputs(run_id)
    memory.append_inputs(run_id, [dataclasses.replace(turns[0], text="forged")])
    with pytest.raises(StoreCorrupt, match=f"run {run_id} model turn 1 recorded twice"):
        memory.turns(run_id)


def test_replay_refuses_a_recording_with_two_inputs_for_one_ordinal(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """A recording built by hand (the API takes one) is held to the same rule."""
    _, log, run_id = _ran(tmp_path)
    [logged] = Recording.from_log(log)
    assert replay(logged, contracts).identical
    other = dataclasses.replace(logged.outputs[2], outcome=Responded(payload={"found": False}))
    forged = dataclasses.replace(logged, outputs=[*logged.outputs[:2], other, *logged.outputs[2:]])
    with pytest.raises(StoreCorrupt, match=f"run {run_id} tool output 3 recorded twice"):
        replay(forged, contracts)


def test_distinct_ordinals_cost_nothing_to_read_back(tmp_path: Path) -> None:
    """The check keeps a whole record readable (and an empty one)."""
    memory = MemoryStore()
    memory.begin_run(header("r1"))
    assert memory.turns("r1") == [] and memory.outputs("r1") == []
