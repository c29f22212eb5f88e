"""A refund run on a SQLite file, played by `tests/engine/test_one_driver.py` in real subprocesses.

    python -m tests.support.one_driver_play drive DB SENT    a run whose refund waits for DB.go
    python -m tests.support.one_driver_play crash DB SENT    a run SIGKILLed once its refund is out
    python -m tests.support.one_driver_play resume DB SENT RUN [CHANGE]
                                                             Engine.resume, one CHANGE

`SENT` gets one line per refund dispatched (`pid key`); `find_refund` answers from it, as a
destination that remembers what it did. Prints `run ID`, then `ended TERMINAL` or
`refused TYPE: MESSAGE`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from runner import (
    Engine,
    FunctionTools,
    Principal,
    RunSpec,
    SqliteStore,
    SystemClock,
    ToolResponse,
    load_contracts,
)
from runner.base.errors import RunnerError
from runner.core.policy import Policy
from runner.store.base import Store
from runner.testing import FunctionModel, call, latest_results
from runner.tools.invocation import ToolInvocation
from tests.support.paths import ROOT

CONTRACTS = load_contracts(ROOT / "examples" / "contracts")
PRINCIPAL = Principal(id="bot", scopes=frozenset({"orders.read", "orders.refund"}))
SPEC = RunSpec(
    task="refund A-100 if it was lost",
    tenant="t",
    principal=PRINCIPAL,
    tools=("lookup_order", "refund_order"),
    seed=3,
)
CHANGES: dict[str, dict[str, Any]] = {
    "tenant": {"tenant": "other-tenant"},
    "principal": {"principal": Principal(id="someone-else", scopes=PRINCIPAL.scopes)},
    "scopes": {"principal": Principal(id="bot", scopes=frozenset({"orders.read"}))},
    "task": {"task": "something else entirely"},
    "tools": {"tools": ("lookup_order",)},
    "context": {"context": {"authorized": "2027-04-01"}},
}
"""A spec that differs from the run's header in one thing each."""


def engine(
    db: str,
    sent: Path,
    *,
    crash: bool = False,
    policy: Policy | None = None,
    store: Store | None = None,
) -> Engine:
    go = Path(db + ".go")

    async def lookup(invocation: ToolInvocation) -> ToolResponse:
        order = {"order_id": "A-100", "state": "lost", "amount_cents": 500}
        return ToolResponse(payload={"status": "ok", **order})

    async def refund(invocation: ToolInvocation) -> ToolResponse:
        with sent.open("a") as out:
            out.write(f"{os.getpid()} {invocation.operation_key}\n")
        if crash:  # the refund went out; its answer never comes back
            os.kill(os.getpid(), signal.SIGKILL)
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return ToolResponse(payload={"status": "ok", "refund_id": "R1"})

    async def find(invocation: ToolInvocation) -> ToolResponse:
        keys = sent.read_text().split() if sent.exists() else []
        if invocation.operation_key in keys:
            return ToolResponse(payload={"status": "ok", "found": True, "refund_id": "R1"})
        return ToolResponse(payload={"status": "ok", "found": False})

    tools = FunctionTools({"lookup_order": lookup, "refund_order": refund, "find_refund": find})
    return Engine(
        contracts=CONTRACTS,
        toolbox=tools,
        store=store if store is not None else SqliteStore(db),
        clock=SystemClock(),
        policy=policy,
    )


def agent(transcript: Any, tools: Any) -> Any:
    results = latest_results(transcript)
    if not results:
        return call("lookup_order", order_id="A-100")
    if "refund_id" in str(results[-1]) or "found" in str(results[-1]):
        return "refunded"
    return call("refund_order", order_id="A-100", amount_cents=500)


def main(argv: list[str]) -> None:
    mode, db, sent = argv[0], argv[1], Path(argv[2])
    if mode in ("drive", "crash"):

        async def start() -> None:
            handle = engine(db, sent, crash=mode == "crash").start(SPEC, FunctionModel(agent))
            print("run", handle.run_id, flush=True)
            print("ended", (await handle.result()).terminal.value, flush=True)

        asyncio.run(start())
        return
    run_id, change = argv[3], argv[4] if len(argv) > 4 else None
    spec = dataclasses.replace(SPEC, **CHANGES[change]) if change in CHANGES else SPEC
    policy = Policy(max_retries=0) if change == "policy" else None
    try:
        result = asyncio.run(
            engine(db, sent, policy=policy).resume(run_id, spec, FunctionModel(agent))
        )
    except RunnerError as exc:
        print(f"refused {type(exc).__name__}: {exc}", flush=True)
        return
    print("ended", result.terminal.value, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
