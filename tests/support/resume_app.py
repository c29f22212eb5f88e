"""An embedded application, as `runner resume --app resume_app:build` finds it: a booking write
with its lookup, a function model, a SQLite store. Every effect is counted at the tool boundary,
in a file of its own (`RESUME_APP_EFFECTS`), never from the runner's records.

    RESUME_APP_DB=runs.sqlite RESUME_APP_EFFECTS=effects.txt python -c \\
        "import resume_app; resume_app.start()"
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from runner import (
    DeclaredTools,
    Engine,
    Principal,
    RunSpec,
    SqliteStore,
    SystemClock,
    ToolCall,
    ToolInvocation,
    ToolSpec,
    Transcript,
)
from runner.engine.app import App
from runner.record.trace import RunHeader
from runner.testing import FunctionModel, call, latest_results


class Booking(BaseModel):
    model_config = ConfigDict(extra="forbid")
    room: str


class Booked(BaseModel):
    status: Literal["ok"] = "ok"
    booking_id: str


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Found(BaseModel):
    status: Literal["ok"] = "ok"
    found: bool


def _effects() -> Path:
    return Path(os.environ["RESUME_APP_EFFECTS"])


def _applied() -> list[str]:
    path = _effects()
    return path.read_text(encoding="utf-8").split() if path.exists() else []


tools = DeclaredTools()


@tools.tool(
    arguments=Booking,
    result=Booked,
    scope="rooms.book",
    timeout_s=5,
    side_effect="write",
    reconcile_with="find_booking",
)
async def book_room(args: Booking, invocation: ToolInvocation) -> Booked:
    """Book a room. A write: once per operation key."""
    key = invocation.operation_key or ""
    with _effects().open("a", encoding="utf-8") as effects:  # counted before it answers
        effects.write(key + "\n")
        effects.flush()
        os.fsync(effects.fileno())
    return Booked(booking_id=f"B-{len(_applied())}")


@tools.tool(arguments=NoArgs, result=Found, scope="rooms.book", timeout_s=5, audience="runtime")
async def find_booking(args: NoArgs, invocation: ToolInvocation) -> Found:
    """Whether the booking with this operation key exists."""
    return Found(found=(invocation.operation_key or "") in _applied())


def _agent(transcript: Transcript, offered: tuple[ToolSpec, ...]) -> str | ToolCall:
    if not latest_results(transcript):
        return call("book_room", room="R-1")
    return "Booked R-1."


def build(header: RunHeader | None) -> App:
    """The factory: the same engine and model for a new run (header None) and for a resume."""
    engine = Engine(
        contracts=tools.contract_set(),
        toolbox=tools,
        store=SqliteStore(os.environ["RESUME_APP_DB"]),
        clock=SystemClock(),
    )
    spec = RunSpec(
        task="Book room R-1.",
        tenant="hotel-1",
        principal=Principal(id="desk", scopes=frozenset({"rooms.book"})),
        tools=("book_room",),
    )
    return App(engine, FunctionModel(_agent), spec if header is None else None)


def start() -> None:
    """Start one run, as the application would (the test kills it part way)."""
    app = build(None)
    assert app.spec is not None
    app.engine.run_sync(app.spec, app.model)
