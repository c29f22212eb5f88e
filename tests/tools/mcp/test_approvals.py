"""Writes of real MCP servers (stdio and streamable HTTP) under approval, three times each: a
call is a proposal with a readable summary, the run ends `escalate` (`approval_required`) with
nothing sent; approved, the continuation sends the write once under its proposed key; denied,
nothing is ever sent. Every run replays identical from the record alone, with no server running."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from runner.base.clock import SystemClock
from runner.base.errors import ApprovalRefused
from runner.core.budget import Limits
from runner.core.confirm import ApprovalSecret
from runner.core.states import State
from runner.engine.approvals import approve, deny, pending_approvals
from runner.engine.engine import Engine
from runner.proof.api import replay_run_sync
from runner.record.spec import RunResult, RunSpec
from runner.store import SqliteStore
from runner.testing import scripted
from runner.tools.contracts import ContractSet
from runner.tools.invocation import Principal
from runner.tools.mcp import McpConfig, McpTools, with_recorded
from tests.support.mcp_harness import BOOKING_UNDER_APPROVAL, http_server, read_state, stdio_server
from tests.support.network import allow_loopback_only

pytestmark = pytest.mark.slow

TRIALS = range(3)
SECRET = ApprovalSecret("a test secret of at least 16 bytes")
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
TOOLS = {
    **BOOKING_UNDER_APPROVAL,
    "cancel_all": {},  # the server says destructive: it asks for approval
}
BOOK = {"tool_calls": [{"name": "booking__book_room", "args": {"room": "plain", "nights": 2}}]}
CANCEL = {"tool_calls": [{"name": "booking__cancel_all", "args": {}}]}


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The no-network guard, lifted for 127.0.0.1 alone (the streamable-HTTP servers)."""
    allow_loopback_only(monkeypatch)


@pytest.fixture(params=["stdio", "http"])
def booking(request: pytest.FixtureRequest, tmp_path: Path, loopback: None) -> Iterator[McpConfig]:
    settings = {"scope": "booking.write", "tools": TOOLS}
    if request.param == "stdio":
        server = stdio_server("booking", tmp_path, **settings)
        yield McpConfig.of({"servers": {"booking": server}}, base_dir=tmp_path)
    else:
        with http_server("booking", tmp_path) as url:
            server = {"url": url, **settings}
            yield McpConfig.of({"servers": {"booking": server}}, base_dir=tmp_path)


def _spec(tools: McpTools) -> RunSpec:
    spec = RunSpec(
        task="Use the tools.",
        tenant="acme",
        principal=Principal(id="ops", scopes=frozenset({"booking.write"})),
        tools=tools.tool_names,
        limits=Limits(max_seconds=20),
        seed=7,
    )
    return tools.pinned_spec(spec)


def _drive(config: McpConfig, db: Path, act: Any) -> RunResult:
    """Connect (pin), do `act(engine, spec)` on the system clock, close every connection."""

    async def drive() -> RunResult:
        tools = await McpTools.connect(config, clock=SystemClock())
        store = SqliteStore(db)
        try:
            engine = Engine(
                contracts=tools.contract_set(), toolbox=tools, store=store, clock=SystemClock()
            )
            result: RunResult = await act(engine, _spec(tools))
            return result
        finally:
            await tools.aclose()
            store.close()

    return asyncio.run(drive())


def _replays_identical(db: Path, *run_ids: str) -> None:
    store = SqliteStore(db)
    try:
        for run_id in run_ids:
            header = store.header(run_id)
            assert header is not None
            contracts = with_recorded(ContractSet([]), header.annotations)
            replay = replay_run_sync(store, run_id, contracts)
            assert replay.identical, replay.divergence
    finally:
        store.close()


def _waiting(config: McpConfig, db: Path, turn: dict[str, Any]) -> RunResult:
    waiting = _drive(config, db, lambda engine, spec: engine.run(spec, scripted(turn)))
    assert (waiting.terminal, waiting.reason) == (State.ESCALATE, "approval_required")
    assert [t.result_class for t in waiting.transitions if t.tool] == ["approval_required"]
    return waiting


def _continue(config: McpConfig, db: Path, run_id: str) -> RunResult:
    final = scripted({"final": "Done."})
    return _drive(
        config,
        db,
        lambda engine, spec: engine.continue_approved(run_id, spec, final, secret=SECRET, now=NOW),
    )


@pytest.mark.parametrize("trial", TRIALS)
def test_an_approved_mcp_write_is_sent_once_under_its_proposed_key(
    booking: McpConfig, tmp_path: Path, trial: int
) -> None:
    db = tmp_path / f"t{trial}" / "runs.sqlite"
    db.parent.mkdir()
    waiting = _waiting(booking, db, BOOK)
    assert read_state(tmp_path, "bookings.json", {}) == {}  # proposed, never sent
    store = SqliteStore(db)
    (proposal,) = pending_approvals(store, waiting.run_id)
    assert proposal.tool == "booking__book_room" and proposal.reasons == ["contract"]
    assert proposal.summary == "Book room plain for 2 nights"
    approve(store, waiting.run_id, approver="alice", secret=SECRET, now=NOW)
    store.close()
    continued = _continue(booking, db, waiting.run_id)
    assert continued.terminal is State.COMPLETE, continued.reason
    bookings = read_state(tmp_path, "bookings.json", {})
    assert list(bookings) == [proposal.operation_key]  # sent once, under the proposed key
    assert [op.key for op in continued.operations] == [proposal.operation_key]
    assert [op.status for op in continued.operations] == ["committed"]
    with pytest.raises(ApprovalRefused, match="continued"):  # asked again: nothing sent again
        _continue(booking, db, waiting.run_id)
    assert read_state(tmp_path, "bookings.json", {}) == bookings
    _replays_identical(db, waiting.run_id, continued.run_id)  # the server is stopped by now


@pytest.mark.parametrize("trial", TRIALS)
def test_a_denied_destructive_mcp_write_is_never_sent(
    booking: McpConfig, tmp_path: Path, trial: int
) -> None:
    db = tmp_path / f"t{trial}" / "runs.sqlite"
    db.parent.mkdir()
    waiting = _waiting(booking, db, CANCEL)
    store = SqliteStore(db)
    (proposal,) = pending_approvals(store, waiting.run_id)
    assert proposal.tool == "booking__cancel_all"
    assert proposal.summary == "booking__cancel_all: "  # no arguments to show
    deny(store, waiting.run_id, approver="bob", now=NOW, note="not today")
    store.close()
    continued = _continue(booking, db, waiting.run_id)
    assert (continued.terminal, continued.reason) == (State.ABSTAIN, "approval_denied")
    assert read_state(tmp_path, "cancel_calls.json", []) == []
    _replays_identical(db, waiting.run_id, continued.run_id)


@pytest.mark.parametrize("trial", TRIALS)
def test_an_approved_destructive_mcp_write_is_sent_once(
    booking: McpConfig, tmp_path: Path, trial: int
) -> None:
    db = tmp_path / f"t{trial}" / "runs.sqlite"
    db.parent.mkdir()
    waiting = _waiting(booking, db, CANCEL)
    store = SqliteStore(db)
    approve(store, waiting.run_id, "booking__cancel_all", approver="alice", secret=SECRET, now=NOW)
    store.close()
    continued = _continue(booking, db, waiting.run_id)
    assert continued.terminal is State.COMPLETE, continued.reason
    assert read_state(tmp_path, "cancel_calls.json", []) == [{}]
    _replays_identical(db, waiting.run_id, continued.run_id)
