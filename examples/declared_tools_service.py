"""Tools declared in Python in a service: a write and its lookup declared with pydantic models and
the `DeclaredTools` decorator, a JSON contract file implemented through the same `DeclaredTools`,
your own model adapter and `FunctionModel` side by side, a SQLite store, handles at once.

One run is cancelled while its write is in flight and the write's response is lost: the run looks
the write up by its key first (it committed), then ends `abstain` (`cancelled`) with one terminal
record. Every run is replayed identical from inside the running event loop.

    python examples/declared_tools_service.py   # what each run came to

The test suite runs this file and type-checks it with `mypy --strict`.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from runner import (
    DeclaredTools,
    Engine,
    FunctionModel,
    ModelReply,
    Principal,
    RunSpec,
    SqliteStore,
    State,
    SystemClock,
    TokenUsage,
    ToolCall,
    ToolInvocation,
    ToolResponse,
    ToolSpec,
    Transcript,
    load_contracts,
    replay_run,
    run_status,
)
from runner.core.states import TERMINAL
from runner.models import ToolChoice
from runner.testing import call, latest_results

FILE_CONTRACTS = load_contracts(Path(__file__).resolve().parent / "contracts")


class ReserveArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str = Field(min_length=3, max_length=20)
    units: int = Field(ge=1, le=10)


class Reserved(BaseModel):
    status: Literal["ok"] = "ok"
    reservation_id: str


class ToolError(BaseModel):
    status: Literal["error"] = "error"
    error_code: Literal["rate_limited", "service_unavailable", "inconclusive"]
    retryable: bool


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Found(BaseModel):
    """What a `reconcile_with` lookup answers: `found` true (the write happened) or false."""

    status: Literal["ok"] = "ok"
    found: bool


class Warehouse:
    def __init__(self) -> None:
        self.reservations: dict[str, str] = {}
        """Operation key -> reservation: a repeated key is the same reservation."""
        self.lose_response_for: set[str] = set()
        self.write_started = asyncio.Event()


WAREHOUSE = Warehouse()
tools = DeclaredTools()


@tools.tool(
    arguments=ReserveArgs,
    result=Reserved | ToolError,
    scope="orders.refund",
    timeout_s=5,
    side_effect="write",
    reconcile_with="find_reservation",
    suppresses_duplicates=True,
)
async def reserve_stock(args: ReserveArgs, invocation: ToolInvocation) -> Reserved:
    """Reserve units for an order. A write: once per order."""
    key = invocation.operation_key or ""
    if invocation.tenant in WAREHOUSE.lose_response_for:
        WAREHOUSE.write_started.set()
    await asyncio.sleep(0.1)  # a slow supplier: the cancel arrives while this is in flight
    WAREHOUSE.reservations.setdefault(key, f"S-{len(WAREHOUSE.reservations) + 1}")
    if invocation.tenant in WAREHOUSE.lose_response_for:
        raise ConnectionError("the response was lost after the commit")
    return Reserved(reservation_id=WAREHOUSE.reservations[key])


@tools.tool(
    arguments=NoArgs,
    result=Found | ToolError,
    scope="orders.refund",
    timeout_s=5,
    audience="runtime",
)
async def find_reservation(args: NoArgs, invocation: ToolInvocation) -> Found:
    """Find a reservation by the operation key of its write (called by the runner only)."""
    return Found(found=(invocation.operation_key or "") in WAREHOUSE.reservations)


@tools.implement(FILE_CONTRACTS["lookup_order"])
async def lookup_order(arguments: dict[str, object], invocation: ToolInvocation) -> ToolResponse:
    payload = {"status": "ok", "order_id": arguments["order_id"], "state": "shipped"}
    return ToolResponse(payload={**payload, "amount_cents": 1200})


class ReservingModel:
    """Your own model adapter: look the order up, reserve two units, answer."""

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        results, usage = latest_results(transcript), TokenUsage(input_tokens=50, output_tokens=5)
        if tool_choice == "none" or any(r.tool == "reserve_stock" for r in results):
            return ModelReply(text="Reserved.", tool_calls=(), usage=usage, stop_reason="end_turn")
        step = ("reserve_stock", {"order_id": "A-7", "units": 2}) if results else None
        name, arguments = step or ("lookup_order", {"order_id": "A-7"})
        calls = (ToolCall(id=f"c{len(transcript.messages)}", name=name, arguments=arguments),)
        return ModelReply(text="", tool_calls=calls, usage=usage, stop_reason="tool_use")


async def main(db: Path) -> None:
    contracts = tools.contract_set([FILE_CONTRACTS["lookup_order"]])
    store = SqliteStore(db)
    engine = Engine(contracts=contracts, toolbox=tools, store=store, clock=SystemClock())
    principal = Principal(id="bot", scopes=frozenset({"orders.read", "orders.refund"}))

    def spec(tenant: str) -> RunSpec:
        offered = ("lookup_order", "reserve_stock")
        return RunSpec(
            task="Reserve two for A-7.", tenant=tenant, principal=principal, tools=offered
        )

    looker = FunctionModel(
        lambda transcript, offered: (
            "Shipped." if latest_results(transcript) else call("lookup_order", order_id="A-7")
        )
    )
    WAREHOUSE.lose_response_for.add("t-cancelled")
    handles = [
        engine.start(spec("t-cancelled"), ReservingModel()),
        engine.start(spec("t-reserves"), ReservingModel()),
        engine.start(spec("t-looks"), looker),
    ]
    assert all(run_status(store, h.run_id).status == "running" for h in handles)
    await WAREHOUSE.write_started.wait()
    handles[0].cancel()
    cancelled, reserved, looked = [await handle.result() for handle in handles]
    assert (cancelled.terminal, cancelled.reason) == (State.ABSTAIN, "cancelled")
    assert sum(record.to_state in TERMINAL for record in cancelled.transitions) == 1
    assert any(record.trigger == "reconcile" for record in cancelled.transitions)
    assert [op.status for op in cancelled.operations] == ["committed"]  # looked up, not resent
    assert (reserved.answer, looked.answer) == ("Reserved.", "Shipped.")
    print(f"declared tools: {', '.join(sorted(contracts))}")
    for tenant, result in zip(
        ("t-cancelled", "t-reserves", "t-looks"), (cancelled, reserved, looked), strict=True
    ):
        answer = f": {result.answer}" if result.answer else ""
        print(f"{tenant}: {result.terminal.value} ({result.reason}){answer}")
    writes = ", ".join(f"{op.tool} {op.status}" for op in cancelled.operations)
    print(f"t-cancelled: its write's response was lost; looked up by its key first: {writes}")
    for result in (cancelled, reserved, looked):
        assert run_status(store, result.run_id).reason == result.reason
        replayed = await replay_run(store, result.run_id, contracts)
        assert replayed.identical, replayed.divergence
    print("replayed 3 runs from the store alone: all identical")
    store.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(scratch) / "runs.db"))
