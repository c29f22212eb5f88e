"""Approvals bound to the payload: a refund that needs a person's approval is never sent on the
model's word. The run ends `escalate` (`approval_required`) with a proposal in the store; a
person approves it (a confirm token the model never sees) or denies it; the continuation sends
the approved refund exactly once, or ends `abstain` on the denial.

    python examples/approvals.py

The test suite runs it and type-checks it with `mypy --strict`.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from runner import (
    DeclaredTools,
    Engine,
    MemoryStore,
    Principal,
    RunSpec,
    SystemClock,
    ToolInvocation,
)
from runner.core.confirm import ApprovalSecret
from runner.engine.approvals import approve, deny, pending_approvals
from runner.testing import FunctionModel, call, latest_results

REFUNDS: dict[str, int] = {}
"""Operation key -> amount: what the payments system really did."""


class RefundArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str
    amount_cents: int


class Refunded(BaseModel):
    status: Literal["ok"] = "ok"
    found: bool = True


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


tools = DeclaredTools()


@tools.tool(
    arguments=RefundArgs, result=Refunded, scope="orders.refund", timeout_s=5,
    side_effect="write", reconcile_with="find_refund", requires_approval=True,
)  # fmt: skip
async def refund_order(args: RefundArgs, invocation: ToolInvocation) -> Refunded:
    """Refund an order to the customer's card."""
    REFUNDS[invocation.operation_key or ""] = args.amount_cents
    return Refunded()


@tools.tool(arguments=NoArgs, result=Refunded, scope="orders.refund", timeout_s=5,
            audience="runtime")  # fmt: skip
async def find_refund(args: NoArgs, invocation: ToolInvocation) -> Refunded:
    """Find a refund by the operation key of its write (called by the runner only)."""
    return Refunded(found=(invocation.operation_key or "") in REFUNDS)


def spec(order: str) -> RunSpec:
    return RunSpec(
        task=f"Refund order {order} (4,200 cents).",
        tenant="shop-1",
        principal=Principal(id="support-bot", scopes=frozenset({"orders.refund"})),
        tools=("refund_order",),
    )


def agent(order: str) -> FunctionModel:
    return FunctionModel(
        lambda transcript, offered: (
            "Refunded." if latest_results(transcript)
            else call("refund_order", order_id=order, amount_cents=4200)
        )
    )  # fmt: skip


async def main() -> None:
    store, secret = MemoryStore(), ApprovalSecret(b"a-secret-of-32-bytes-or-more-000")
    engine = Engine(contracts=tools.contract_set(), toolbox=tools, store=store, clock=SystemClock())
    waiting = {order: await engine.run(spec(order), agent(order)) for order in ("A-1", "A-2")}
    for order, result in waiting.items():
        print(f"{order}: {result.terminal.value} ({result.reason}), refunds sent: {len(REFUNDS)}")
    for proposal in pending_approvals(store):
        print(f"pending: {proposal.summary}")
    now = datetime.now(UTC)
    approve(store, waiting["A-1"].run_id, approver="alice", secret=secret, now=now)
    deny(store, waiting["A-2"].run_id, approver="alice", now=now, note="already refunded")
    for order, result in waiting.items():
        went_on = await engine.continue_approved(
            result.run_id, spec(order), agent(order), secret=secret, now=now
        )
        print(f"{order} continued: {went_on.terminal.value} ({went_on.reason})")
    print(f"refunds sent: {len(REFUNDS)} (the approved one, once)")


if __name__ == "__main__":
    asyncio.run(main())
