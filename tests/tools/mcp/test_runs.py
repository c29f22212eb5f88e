"""Runs through real MCP servers (stdio and streamable HTTP), three times each: every run ends in
a declared state, writes happen once, a hostile server cannot widen what the run may do, and every
run replays identical from the record alone, with no server running."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from runner.base.clock import SystemClock
from runner.core.budget import Limits
from runner.core.states import TERMINAL, State
from runner.engine.engine import Engine
from runner.record.spec import RunResult, RunSpec
from runner.store import MemoryStore, SqliteStore
from runner.testing import scripted
from runner.tools.declare import DeclaredTools
from runner.tools.invocation import Principal
from runner.tools.mcp import McpConfig, McpTools
from tests.support.mcp_harness import (
    Outcome,
    classes,
    http_server,
    read_state,
    replayed,
    run_through,
    stdio_server,
)
from tests.support.network import allow_loopback_only

pytestmark = pytest.mark.slow

TRIALS = range(3)
DOCS_TOOLS = {"search": {"read_only": True}, "Fetch-Page": {"read_only": True}}
BOOKING_TOOLS = {
    "book_room": {
        "reconcile_with": "find_booking",
        "key_argument": "request_id",
        "suppresses_duplicates": True,
        "timeout_s": 3,
    },
    "find_booking": {"read_only": True, "runtime_only": True, "key_argument": "request_id"},
    "cancel_all": {},  # a write the server calls destructive: offered, under approval
}


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The no-network guard, lifted for 127.0.0.1 alone (the streamable-HTTP servers)."""
    allow_loopback_only(monkeypatch)


def _declared_and_replayed(outcome: Outcome) -> None:
    """Ended declared; the header records the pin; replays identical with no server running."""
    assert outcome.result.terminal in TERMINAL
    store = SqliteStore(outcome.store_path)
    header = store.header(outcome.result.run_id)
    store.close()
    assert header is not None and header.annotations["mcp"] == outcome.tools.pin.to_json()
    replay = replayed(outcome)  # every server is stopped by now
    assert replay.identical, replay.divergence


@pytest.fixture(params=["stdio", "http"])
def docs_server(
    request: pytest.FixtureRequest, tmp_path: Path, loopback: None
) -> Iterator[dict[str, Any]]:
    settings = {"scope": "docs.read", "tools": DOCS_TOOLS}
    if request.param == "stdio":
        yield stdio_server("search", tmp_path, **settings)
    else:
        with http_server("search", tmp_path) as url:
            yield {"url": url, **settings}


@pytest.mark.parametrize("trial", TRIALS)
def test_read_only_search_server(docs_server: dict[str, Any], tmp_path: Path, trial: int) -> None:
    """Structured results are checked against the outputSchema, text results take the text shape,
    a search with nothing found and an isError result are domain answers."""
    turns = [
        {"tool_calls": [{"name": "docs__search", "args": {"query": "retry", "limit": 3}}]},
        {"tool_calls": [{"name": "docs__fetch_page", "args": {"url": "https://docs.example/r"}}]},
        {"tool_calls": [{"name": "docs__search", "args": {"query": "fail"}}]},
        {"final": "Retry with backoff, with the same key."},
    ]
    outcome = run_through(
        {"servers": {"docs": docs_server}},
        turns,
        tmp_path / f"t{trial}",
        scopes=frozenset({"docs.read"}),
    )
    result = outcome.result
    assert result.terminal is State.COMPLETE
    assert classes(result) == ["ok", "ok", "permanent"]
    assert result.evidence[0]["result"]["structured"]["results"][0]["title"] == (
        "Retries with backoff"
    )
    assert result.evidence[1]["result"]["text"].startswith("page https://docs.example/r")
    _declared_and_replayed(outcome)


@pytest.fixture(params=["stdio", "http"])
def booking_server(
    request: pytest.FixtureRequest, tmp_path: Path, loopback: None
) -> Iterator[dict[str, Any]]:
    settings = {"scope": "booking.write", "tools": BOOKING_TOOLS}
    if request.param == "stdio":
        yield stdio_server("booking", tmp_path, **settings)
    else:
        with http_server("booking", tmp_path) as url:
            yield {"url": url, **settings}


def _book(room: str) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"name": "booking__book_room", "args": {"room": room, "nights": 2}}]},
        {"final": "Booked."},
    ]


@pytest.mark.parametrize("trial", TRIALS)
@pytest.mark.parametrize("room", ["plain", "hang-after"])
def test_a_write_happens_once(
    booking_server: dict[str, Any], tmp_path: Path, room: str, trial: int
) -> None:
    """A write and, when its answer never comes (the server hangs after writing), the lookup by
    key on a fresh connection: found, so one booking and no second write."""
    outcome = run_through(
        {"servers": {"booking": booking_server}},
        _book(room),
        tmp_path / f"t{trial}",
        scopes=frozenset({"booking.write"}),
    )
    result = outcome.result
    assert result.terminal is State.COMPLETE, result.reason
    if room == "plain":
        assert classes(result) == ["ok"]
    else:
        assert classes(result) == ["unknown_outcome", "ok"]
        assert result.transitions[2].tool == "booking__find_booking"  # the reconcile move
    bookings = read_state(tmp_path, "bookings.json", {})
    assert len(bookings) == 1
    assert [op.status for op in result.operations] == ["committed"]
    key = result.operations[0].key
    assert key in bookings  # the runtime filled key_argument with the operation key
    cancel_all = next(t for t in outcome.tools.pin.tools if t.tool == "cancel_all")
    assert cancel_all.needs_approval and cancel_all.offered  # under approval: see
    assert "booking__cancel_all" in outcome.tools.tool_names  # tests/tools/mcp/test_approvals.py
    _declared_and_replayed(outcome)


@pytest.mark.parametrize("trial", TRIALS)
@pytest.mark.parametrize(
    ("room", "expected", "connections"),
    [
        ("lost-after", ["unknown_outcome", "ok"], 2),
        ("lost-before", ["unknown_outcome", "not_applied", "ok"], 2),
        ("rpc-after", ["unknown_outcome", "ok"], 1),
    ],
)
def test_a_server_that_dies_mid_write(
    tmp_path: Path, room: str, expected: list[str], connections: int, trial: int
) -> None:
    """The process dies with the write done (found by the lookup) or not done (not found: sent
    again with the same key), and the server is restarted for the next call; or it answers a
    JSON-RPC error after writing (which does not say whether it wrote). One booking exists."""
    state = tmp_path / f"t{trial}"
    state.mkdir()
    server = stdio_server("booking", state, scope="booking.write", tools=BOOKING_TOOLS)
    outcome = run_through(
        {"servers": {"booking": server}}, _book(room), state, scopes=frozenset({"booking.write"})
    )
    result = outcome.result
    assert result.terminal is State.COMPLETE, result.reason
    assert classes(result) == expected
    assert len(read_state(state, "bookings.json", {})) == 1
    assert outcome.tools.links["booking"].connections == connections  # restarted if it died
    _declared_and_replayed(outcome)


@pytest.mark.parametrize("trial", TRIALS)
def test_a_write_without_a_lookup_ends_unknown_with_its_key(tmp_path: Path, trial: int) -> None:
    state = tmp_path / f"t{trial}"
    state.mkdir()
    tools = {"book_room": {"key_argument": "request_id", "timeout_s": 3}}
    server = stdio_server("booking", state, scope="booking.write", tools=tools)
    outcome = run_through(
        {"servers": {"booking": server}},
        _book("lost-after"),
        state,
        scopes=frozenset({"booking.write"}),
    )
    result = outcome.result
    assert result.terminal is State.UNKNOWN
    assert [op.status for op in result.operations] == ["unknown"]
    assert result.transitions[-1].operation_key == result.operations[0].key
    assert len(read_state(state, "bookings.json", {})) == 1  # it did happen, once
    _declared_and_replayed(outcome)


HOSTILE_TOOLS = {
    "slow_search": {"read_only": True, "timeout_s": 1},
    "dying_search": {"read_only": True},
    "bad_output": {"read_only": True},
    "rpc_error": {"read_only": True},
}


def _hostile(state: Path) -> dict[str, Any]:
    server = stdio_server("hostile", state, scope="web.read", tools=HOSTILE_TOOLS)
    return {"servers": {"hostile": server}}


@pytest.mark.parametrize("trial", TRIALS)
def test_a_server_that_hangs_or_dies_is_retried_on_a_fresh_process(
    tmp_path: Path, trial: int
) -> None:
    state = tmp_path / f"t{trial}"
    state.mkdir()
    turns = [
        {"tool_calls": [{"name": "hostile__dying_search", "args": {"query": "a"}}]},
        {"tool_calls": [{"name": "hostile__slow_search", "args": {"query": "hang"}}]},
        {"final": "Partial."},
    ]
    outcome = run_through(
        _hostile(state),
        turns,
        state,
        scopes=frozenset({"web.read"}),
        limits=Limits(max_seconds=12),
    )
    result = outcome.result
    assert result.terminal is State.COMPLETE
    # died once, retried on a restarted server; then hangs every time: bounded retries, back
    assert classes(result) == ["transient", "ok", "transient", "transient", "transient"]
    assert result.elapsed_s < 12
    _declared_and_replayed(outcome)


@pytest.mark.parametrize("trial", TRIALS)
def test_schema_violations_and_rpc_errors_are_classified(tmp_path: Path, trial: int) -> None:
    state = tmp_path / f"t{trial}"
    state.mkdir()
    turns = [
        {"tool_calls": [{"name": "hostile__bad_output", "args": {"query": "a"}}]},
        {"tool_calls": [{"name": "hostile__rpc_error", "args": {"query": "a"}}]},
        {"tool_calls": [{"name": "hostile__slow_search", "args": {"query": 3}}]},
        {"final": "Nothing usable."},
    ]
    outcome = run_through(_hostile(state), turns, state, scopes=frozenset({"web.read"}))
    result = outcome.result
    assert result.terminal is State.COMPLETE
    assert classes(result) == ["malformed_result", "permanent", "invalid_arguments"]
    _declared_and_replayed(outcome)


@pytest.mark.parametrize("trial", TRIALS)
def test_a_hostile_server_cannot_widen_what_the_run_may_do(tmp_path: Path, trial: int) -> None:
    """A tool that claims readOnlyHint but writes is not offered without an overlay; a tool list
    that changes after the pin adds nothing (the new tool is unknown) and the run keeps the
    contracts it started with (recorded in its header)."""
    state = tmp_path / f"t{trial}"
    state.mkdir()
    turns = [
        {"tool_calls": [{"name": "hostile__sneaky_note", "args": {"text": "x"}}]},
        {"tool_calls": [{"name": "hostile__exfiltrate", "args": {"to": "evil"}}]},
        {"tool_calls": [{"name": "hostile__bad_output", "args": {"query": "a"}}]},
        {"final": "Done."},
    ]
    outcome = run_through(
        _hostile(state),
        turns,
        state,
        scopes=frozenset({"web.read"}),
        before_run=lambda: (state / "v2").write_text("1"),  # the list changes after the pin
    )
    result = outcome.result
    assert result.terminal is State.COMPLETE
    # sneaky_note and exfiltrate are not pinned; bad_output is gone from the live server now
    assert classes(result) == ["unknown_tool", "unknown_tool", "invalid_arguments"]
    assert read_state(state, "notes.json", None) is None
    assert read_state(state, "exfiltrated.json", None) is None
    called = {call["tool"] for call in read_state(state, "calls.json", [])}
    assert called == {"bad_output"}
    pinned = {tool.tool for tool in outcome.tools.pin.tools}
    assert "exfiltrate" not in pinned and "bad_output" in pinned
    assert "no operator overlay" in outcome.tools.refused["hostile__sneaky_note"]
    _declared_and_replayed(outcome)


@pytest.mark.parametrize("trial", TRIALS)
def test_an_http_transport_that_drops_mid_write_ends_unknown_with_its_key(
    tmp_path: Path, loopback: None, trial: int
) -> None:
    """The streamable-HTTP server is killed while the write is in flight (it has written): the
    write is `unknown_outcome`, the lookup cannot reach the server, so the run ends `unknown` with
    the key, inside its deadline, and the write happened once."""
    state = tmp_path / f"t{trial}"
    state.mkdir()
    with http_server("booking", state) as url:
        server = {"url": url, "scope": "booking.write", "tools": BOOKING_TOOLS}
        process = http_server.last  # type: ignore[attr-defined]
        killer = threading.Timer(1.0, process.kill)
        try:
            outcome = run_through(
                {"servers": {"booking": server}},
                _book("hang-after"),
                state,
                scopes=frozenset({"booking.write"}),
                limits=Limits(max_seconds=15),
                before_run=killer.start,  # once the tools are pinned
            )
        finally:
            killer.cancel()
    result = outcome.result
    assert result.terminal is State.UNKNOWN, result.reason
    assert classes(result)[0] == "unknown_outcome"
    assert [op.status for op in result.operations] == ["unknown"]
    assert len(read_state(state, "bookings.json", {})) == 1
    assert result.elapsed_s < 15
    _declared_and_replayed(outcome)


class NoteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str


class Noted(BaseModel):
    status: Literal["ok"] = "ok"


def test_mcp_tools_and_local_tools_in_one_run(tmp_path: Path) -> None:
    """The library API: MCP tools first, then a local `DeclaredTools`; one contract set, one run."""
    local = DeclaredTools()

    @local.tool(arguments=NoteArgs, result=Noted, scope="docs.read", timeout_s=5)
    async def take_note(args: NoteArgs) -> Noted:
        """Keep a note of what was found, for the final answer."""
        return Noted()

    config = McpConfig.of(
        {
            "servers": {
                "docs": stdio_server("search", tmp_path, scope="docs.read", tools=DOCS_TOOLS)
            }
        },
        base_dir=tmp_path,
    )

    async def drive() -> RunResult:
        tools = await McpTools.connect(config, clock=SystemClock())
        try:
            engine = Engine(
                contracts=tools.contract_set(local.contracts),
                toolbox=tools.before(local),
                store=MemoryStore(),
                clock=SystemClock(),
            )
            spec = RunSpec(
                task="Search, then take a note.",
                tenant="acme",
                principal=Principal(id="ops", scopes=frozenset({"docs.read"})),
                tools=(*tools.tool_names, "take_note"),
            )
            model = scripted(
                {
                    "tool_calls": [
                        {"name": "docs__search", "args": {"query": "keys"}},
                        {"name": "take_note", "args": {"text": "keys"}},
                    ]
                },
                {"final": "One key per write intent."},
            )
            return await engine.run(tools.pinned_spec(spec), model)
        finally:
            await tools.aclose()

    result = asyncio.run(drive())
    assert result.terminal is State.COMPLETE
    assert classes(result) == ["ok", "ok"]
    assert [e["tool"] for e in result.evidence] == ["docs__search", "take_note"]
