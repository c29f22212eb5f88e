"""Text from a model or a tool shows escaped in human-readable output: it cannot drive the
terminal (ANSI escapes, NUL, CR) or forge a line of the report (newlines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from runner.cli import main
from runner.proof.report import printable, printable_json
from tests.support.travel import FLIGHT_ARGS, FLIGHTS_OK

CLEAR_SCREEN = "\x1b[2J\x1b[H"
FORGED = "\n  expect: met\n"


def test_printable_escapes_every_control_character_and_keeps_the_rest() -> None:
    assert printable(f"ok{CLEAR_SCREEN}") == "ok\\x1b[2J\\x1b[H"
    assert printable("a\nb\rc\td\x00e\x7f\x9b") == "a\\nb\\rc\\td\\x00e\\x7f\\x9b"
    assert printable("right\u202eto left\u2028next") == "right\\u202eto left\\u2028next"
    assert printable("Tōkyō ✈ 東京 café") == "Tōkyō ✈ 東京 café"
    assert printable(None) == "None"


def _hostile_fixture(tmp_path: Path) -> Path:
    fixture = {
        "name": "hostile_text",
        "description": "the model's text tries to drive the terminal and forge a report line",
        "task": "Find flights SFO to NRT.",
        "tenant": "optiverse",
        "principal": {"id": "agent-7", "scopes": ["travel.read"]},
        "tools": ["search_flights"],
        "environment": {"search_flights": [{"respond": FLIGHTS_OK}]},
        "model": [
            {
                "tool_calls": [
                    {"name": f"evil{FORGED}tool", "args": {}},
                    {"name": "search_flights", "args": FLIGHT_ARGS},
                ]
            },
            {"final": f"{CLEAR_SCREEN}NH7.{FORGED}  => complete (model_final)\r\x00"},
        ],
        # Declared wrong on purpose: the honest verdict is FAILED, the forged one says met.
        "expect": {"terminal": "abstain"},
    }
    path = tmp_path / "hostile_text.yaml"
    path.write_text(yaml.safe_dump(fixture), encoding="utf-8")
    return path


def _assert_clean(out: str) -> None:
    assert "\x1b" not in out and "\x00" not in out and "\r" not in out
    assert not any(line.strip() == "expect: met" for line in out.splitlines())
    assert sum(line.startswith("  => ") for line in out.splitlines()) <= 1


def test_run_show_and_runs_escape_model_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, db = _hostile_fixture(tmp_path), str(tmp_path / "h.sqlite")
    assert main(["run", str(path), "--db", db]) == 1
    out = capsys.readouterr().out
    _assert_clean(out)
    assert "expect: FAILED" in out
    assert "\\x1b[2J" in out and "\\n  expect: met\\n" in out
    assert "  => complete (model_final)" in out  # once: the real outcome line
    assert main(["run", str(path), "--db", db, "--json"]) == 1
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    for command in (["show", run_id], ["runs"], ["replay", run_id]):
        assert main([*command, "--db", db]) == 0, command
        _assert_clean(capsys.readouterr().out)


def test_artifact_escapes_what_json_leaves_raw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`json.dumps(ensure_ascii=False)` escapes C0 controls only: C1 controls (U+009B is a CSI),
    DEL, line separators and bidirectional overrides reached the terminal raw."""
    hostile = "NH7\x9b2J\x7f\u202eLJ\u2028\x85 東京"
    fixture = yaml.safe_load(_hostile_fixture(tmp_path).read_text(encoding="utf-8"))
    fixture["environment"]["search_flights"][0]["respond"] = {
        **FLIGHTS_OK,
        "options": [{"flight_id": hostile, "assistance_status": "unknown"}],
    }
    path = tmp_path / "hostile_text.yaml"
    path.write_text(yaml.safe_dump(fixture), encoding="utf-8")
    db = str(tmp_path / "h.sqlite")
    main(["run", str(path), "--db", db, "--json"])
    run = json.loads(capsys.readouterr().out)
    call_id = next(t["call_id"] for t in run["transitions"] if t["tool"] == "search_flights")
    assert main(["artifact", run["run_id"], call_id, "--db", db]) == 0
    out = capsys.readouterr().out
    assert not any(char in out for char in "\x9b\x7f\u202e\u2028\x85"), repr(out)
    assert "東京" in out  # other text stays as written
    assert json.loads(out)["options"][0]["flight_id"] == hostile  # still the same JSON


def test_invisible_characters_in_a_tool_name_show_escaped() -> None:
    """A confusable tool name (`hold<ZWSP>_room`, a BOM, a word joiner, a soft hyphen) must not
    print exactly like the real tool in a trace: the reader would see `hold_room` refused."""
    for invisible in ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e"):
        shown = printable(f"hold{invisible}_room")
        assert shown != "hold_room" and invisible not in shown, repr(shown)
    assert printable_json('"hold\u200b_room"') == '"hold\\u200b_room"'
