"""Embedding the runner in a service: your own tools and model adapter, a SQLite store, handles
at once, a cancel, and every run replayed identical from inside the running event loop.

    python examples/embed_service.py             # what each run came to
    python examples/embed_service.py --verbose   # and every transition, through stdlib logging

The library itself prints nothing (it logs only when the application configures logging): the
lines you see are this program's. The test suite runs it and type-checks it with `mypy --strict`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
from pathlib import Path

from runner import (
    Engine,
    FunctionTools,
    ModelReply,
    Principal,
    RunSpec,
    RunStatus,
    SqliteStore,
    SystemClock,
    TokenUsage,
    ToolCall,
    ToolInvocation,
    ToolResponse,
    ToolSpec,
    Transcript,
    list_runs,
    load_contracts,
    replay_run,
)
from runner.models import ToolChoice
from runner.models.transcript import ToolResultMessage

CONTRACTS = Path(__file__).resolve().parent / "contracts"


class OrderDesk:
    """Your own tools: a small order system. Tenant, principal, credentials and the write's
    operation key come from the runtime (`ToolInvocation`), never from the model."""

    def __init__(self) -> None:
        self.orders = {
            "A-100": ("delivered", 2500),
            "A-101": ("lost", 4200),
            "A-102": ("lost", 900),
        }
        self.refunds: dict[str, str] = {}
        """Operation key -> refund id: a repeated key gets the same refund (no duplicates)."""

    async def lookup_order(self, invocation: ToolInvocation) -> ToolResponse:
        order_id = str(invocation.arguments["order_id"])
        if order_id not in self.orders:
            return ToolResponse(
                payload={"status": "error", "error_code": "not_found", "retryable": False}
            )
        state, amount = self.orders[order_id]
        payload = {"status": "ok", "order_id": order_id, "state": state, "amount_cents": amount}
        return ToolResponse(payload=payload)

    async def refund_order(self, invocation: ToolInvocation) -> ToolResponse:
        key = invocation.operation_key or ""
        refund_id = self.refunds.setdefault(key, f"R-{len(self.refunds) + 1}")
        return ToolResponse(payload={"status": "ok", "refund_id": refund_id})

    async def find_refund(self, invocation: ToolInvocation) -> ToolResponse:
        refund_id = self.refunds.get(invocation.operation_key or "")
        found = {"refund_id": refund_id} if refund_id else {}
        return ToolResponse(payload={"status": "ok", "found": refund_id is not None, **found})

    def registry(self) -> FunctionTools:
        tools = FunctionTools()
        tools.register("lookup_order", self.lookup_order)
        tools.register("refund_order", self.refund_order)
        tools.register("find_refund", self.find_refund)
        return tools


class RefundDesk:
    """Your own model adapter. A real one sends the transcript and tools to your LLM and maps
    its answer to a `ModelReply`; this one follows a rule, so the example needs no network."""

    def __init__(self, order_id: str) -> None:
        self.order_id = order_id

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        results = {
            message.tool: json.loads(message.content).get("result", {})
            for message in transcript.messages
            if isinstance(message, ToolResultMessage)
        }
        usage = TokenUsage(input_tokens=transcript.chars // 4 + 1, output_tokens=20)
        order = results.get("lookup_order")
        if order is None and tool_choice != "none":
            call = ToolCall(id="c1", name="lookup_order", arguments={"order_id": self.order_id})
            return ModelReply(text="", tool_calls=(call,), usage=usage, stop_reason="tool_use")
        if order and order["state"] == "lost" and "refund_order" not in results:
            arguments = {"order_id": self.order_id, "amount_cents": order["amount_cents"]}
            call = ToolCall(id="c2", name="refund_order", arguments=arguments)
            return ModelReply(text="", tool_calls=(call,), usage=usage, stop_reason="tool_use")
        refund = results.get("refund_order")
        text = f"Refunded as {refund['refund_id']}." if refund else "No refund is due."
        return ModelReply(text=text, tool_calls=(), usage=usage, stop_reason="end_turn")


class SlowModel:
    """A model whose answer takes an hour: the run is cancelled while it waits."""

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        await asyncio.sleep(3600)
        raise TimeoutError("never answered")


def spec_for(order_id: str) -> RunSpec:
    return RunSpec(
        task=f"The customer says order {order_id} never arrived. Refund it if it was lost.",
        tenant="shop-1",
        principal=Principal(id="support-bot", scopes=frozenset({"orders.read", "orders.refund"})),
        tools=("lookup_order", "refund_order"),
    )


async def main(folder: Path) -> list[RunStatus]:
    """Start three runs at once, cancel one, and replay each from the store."""
    contracts = load_contracts(CONTRACTS)
    store = SqliteStore(folder / "runs.sqlite")
    engine = Engine(
        contracts=contracts, toolbox=OrderDesk().registry(), store=store, clock=SystemClock()
    )
    handles = [engine.start(spec_for(order), RefundDesk(order)) for order in ("A-100", "A-101")]
    slow = engine.start(spec_for("A-102"), SlowModel())  # its id is stored already
    slow.cancel()  # ends `abstain`, reason `cancelled`, without waiting an hour
    results = [await handle.result() for handle in [*handles, slow]]
    for order, result in zip(("A-100", "A-101", "A-102"), results, strict=True):
        answer = f": {result.answer}" if result.answer else ""
        print(f"order {order}: {result.terminal.value} ({result.reason}){answer}")
    runs = [status for status in list_runs(store) if isinstance(status, RunStatus)]
    for status in runs:  # replayed from the store alone, while this loop keeps running
        replayed = await replay_run(store, status.run_id, contracts)
        assert replayed.identical, replayed.divergence
    print(f"replayed {len(runs)} runs from the store alone: all identical")
    store.close()
    return runs


if __name__ == "__main__":
    if "--verbose" in sys.argv:
        logging.basicConfig(level=logging.INFO)  # the library logs only when you ask
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(main(Path(folder)))
