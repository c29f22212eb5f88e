"""Nothing a schema names is fetched: loading contract files, pinning an MCP server's tools,
running, replaying and grading make no request to the meta-schema server their schemas name,
and a write whose schema names one is not offered, so it is never dispatched."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.base.errors import ContractError
from runner.cli import main
from runner.tools.contracts import ContractSet, load_contracts
from runner.tools.mcp import with_recorded
from tests.support.meta_server import MetaSchemaServer
from tests.support.network import allow_loopback_only
from tests.support.paths import ROOT


@pytest.fixture
def meta(monkeypatch: pytest.MonkeyPatch) -> Iterator[MetaSchemaServer]:
    allow_loopback_only(monkeypatch)
    running = MetaSchemaServer()
    yield running
    running.stop()


def _placed(where: str, url: str) -> dict[str, Any]:
    """search_flights' input schema, naming `url` as a `$schema` at `where`."""
    data = json.loads((ROOT / "contracts" / "search_flights.json").read_text())
    schema = data["input_schema"]
    if where == "top":
        schema["$schema"] = url
    elif where == "properties":
        schema["properties"]["origin"]["$schema"] = url
    else:  # in `$defs`, with an `$id` of its own
        schema["$defs"] = {"airport": {"$id": f"{url}/airport", "$schema": url, "type": "string"}}
        schema["properties"]["origin"] = {"$ref": "#/$defs/airport"}
    return data


@pytest.mark.parametrize(
    ("where", "place"),
    [("top", "/"), ("properties", "/properties/origin"), ("defs", "/$defs/airport")],
)
def test_a_contract_file_naming_a_meta_schema_is_refused_and_fetches_nothing(
    tmp_path: Path, meta: MetaSchemaServer, where: str, place: str
) -> None:
    folder = tmp_path / "contracts"
    shutil.copytree(ROOT / "contracts", folder)
    (folder / "search_flights.json").write_text(json.dumps(_placed(where, meta.meta)))
    with pytest.raises(ContractError) as info:
        load_contracts(folder)
    message = str(info.value)
    assert "search_flights.json" in message and f"input_schema at {place}: " in message
    assert f"$schema {meta.meta!r} is refused" in message and "\n" not in message
    assert meta.requests == []


TOOLS = {
    "set_limit": {"timeout_s": 5},
    "rename": {"timeout_s": 5},
    "tag": {"timeout_s": 5},
    "report": {"read_only": True},
    "echo": {"read_only": True},
}
"""Every tool of the `dialects` server has an overlay: only the schemas decide what is offered."""

REFUSED = {
    "set_limit": "inputSchema at /",
    "rename": "inputSchema at /properties/name",
    "tag": "inputSchema at /$defs/tag",
    "report": "outputSchema at /",
}


def _servers(tmp_path: Path, meta: MetaSchemaServer) -> Path:
    servers = tmp_path / "servers.json"
    dialects = {
        "command": sys.executable,
        "args": [str(ROOT / "tests" / "support" / "mcp_servers.py"), "dialects"],
        "env": {"MCP_STATE": str(tmp_path), "MCP_META_URL": meta.meta},
        "scope": "acct.write",
        "tools": TOOLS,
    }
    servers.write_text(json.dumps({"servers": {"dialects": dialects}}))
    return servers


WRITES = ["dialects__set_limit", "dialects__rename", "dialects__tag"]


def _fixture(tmp_path: Path, tools: list[str]) -> Path:
    """The model calls each write with arguments its schema refuses, then the draft-7 read."""
    fixture = tmp_path / f"dialects{len(tools)}.yaml"
    calls = [
        {"name": "dialects__set_limit", "args": {"limit": "lots", "also": 1}},
        {"name": "dialects__rename", "args": {"name": 12345678}},
        {"name": "dialects__tag", "args": {"tag": 1}},
    ]
    fixture.write_text(
        json.dumps(
            {
                "name": "dialects",
                "description": "Writes whose schemas name a meta-schema server.",
                "task": "Change the account.",
                "tenant": "acme",
                "principal": {"id": "ops", "scopes": ["acct.write"]},
                "budget": {"max_seconds": 30},
                "tools": tools,
                "model": [
                    {"tool_calls": calls},
                    {"tool_calls": [{"name": "dialects__echo", "args": {"text": "hi"}}]},
                    {"final": "Done."},
                ],
            }
        )
    )
    return fixture


def _header(log: Path) -> dict[str, Any]:
    header: dict[str, Any] = json.loads(log.read_text().splitlines()[0])
    assert header["type"] == "run_started"
    return header


@pytest.mark.slow
def test_mcp_tools_naming_a_meta_schema_are_not_offered_and_nothing_is_fetched(
    tmp_path: Path, meta: MetaSchemaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pinned, run, replayed and graded: no request, no write dispatched; the warning names
    the server's own tool, where its schema names the meta-schema, and the URL."""
    db, log = str(tmp_path / "runs.sqlite"), tmp_path / "runs.jsonl"
    servers = str(_servers(tmp_path, meta))
    offering_writes = str(_fixture(tmp_path, [*WRITES, "dialects__echo"]))
    assert main(["run", offering_writes, "--mcp", servers, "--db", db]) == 2
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    for tool, place in REFUSED.items():
        (line,) = [w for w in warnings if f"dialects.{tool} (MCP)" in w]
        assert f"{place}: $schema {meta.meta!r} is refused" in line
    assert len(warnings) == len(REFUSED)  # echo (draft 7, `$defs`) is offered
    assert f"tools without a contract: {', '.join(WRITES)}" in err
    assert not (tmp_path / "calls.json").exists()  # nothing was dispatched
    # The model calls the writes anyway (unknown tools to this run), then the offered read.
    reading = str(_fixture(tmp_path, ["dialects__echo"]))
    code = main(["run", reading, "--mcp", servers, "--db", db, "--log", str(log)])
    assert code == 0, capsys.readouterr().err
    calls = json.loads((tmp_path / "calls.json").read_text())
    assert [call["tool"] for call in calls] == ["echo"]  # no write was dispatched
    run_id = _header(log)["run_id"]
    assert main(["replay", run_id, "--db", db]) == 0
    assert "identical" in capsys.readouterr().out
    assert main(["grade", "--stored", "--db", db]) == 0
    assert "1/1 fixtures pass^1" in capsys.readouterr().out
    assert meta.requests == []


@pytest.mark.slow
def test_a_recorded_pin_that_offered_such_a_tool_replays_and_grades_nothing(
    tmp_path: Path, meta: MetaSchemaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run recorded before these schemas were refused (its pin offers the write) is refused
    when replayed or graded, in one line, and nothing is fetched."""
    log = tmp_path / "runs.jsonl"
    servers = str(_servers(tmp_path, meta))
    db = str(tmp_path / "runs.sqlite")
    fixture = str(_fixture(tmp_path, ["dialects__echo"]))
    run = ["run", fixture, "--mcp", servers, "--db", db, "--log", str(log)]
    assert main(run) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    header = next(line for line in lines if line["type"] == "run_started")
    for tool in header["annotations"]["mcp"]["tools"]:
        tool.update(offered=True, refused=None)  # as a runner that fetched the meta-schema did
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    capsys.readouterr()
    with pytest.raises(ContractError, match=r"dialects\.set_limit \(MCP\): inputSchema at /: "):
        with_recorded(ContractSet([]), header["annotations"])  # what replay and grade call
    assert main(["replay", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: contract dialects.") and err.count("\n") == 1
    assert repr(meta.meta) in err
    assert meta.requests == []
