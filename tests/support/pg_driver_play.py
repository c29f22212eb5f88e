"""A refund run on a PostgreSQL store, played in subprocesses by
`tests/engine/test_postgres_lease.py`.

    python -m tests.support.pg_driver_play crash URL DIR       a run SIGKILLed in its lookup
                                                               (no refund)
    python -m tests.support.pg_driver_play resume URL DIR RUN  Engine.resume on its own store handle

`DIR/sent` gets one line per refund dispatched (`pid key`); a refund waits for `DIR/go` before it
answers. Prints `run ID`, then `ended TERMINAL` or `refused TYPE: MESSAGE`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from runner import Engine, FunctionTools, ToolResponse
from runner.base.clock import SystemClock
from runner.base.errors import RunnerError
from runner.store.postgres import PostgresStore
from runner.testing import FunctionModel
from runner.tools.invocation import ToolInvocation
from tests.support.one_driver_play import CONTRACTS, SPEC, agent

MODEL = FunctionModel(agent)


def engine(
    store: PostgresStore,
    folder: Path,
    *,
    crash: bool = False,
    before_lookup: Callable[[], Awaitable[None]] | None = None,
) -> Engine:
    """The refund run's engine on `store`: `crash` kills the process inside the lookup, before
    any refund is begun; `before_lookup` is awaited first in each lookup."""
    sent, go = folder / "sent", folder / "go"

    async def lookup(invocation: ToolInvocation) -> ToolResponse:
        if before_lookup is not None:
            await before_lookup()
        if crash:
            os.kill(os.getpid(), signal.SIGKILL)
        return ToolResponse(
            payload={"status": "ok", "order_id": "A-100", "state": "lost", "amount_cents": 500}
        )

    async def refund(invocation: ToolInvocation) -> ToolResponse:
        with sent.open("a") as out:
            out.write(f"{os.getpid()} {invocation.operation_key}\n")
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return ToolResponse(payload={"status": "ok", "refund_id": "R1"})

    async def find(invocation: ToolInvocation) -> ToolResponse:
        keys = sent.read_text().split() if sent.exists() else []
        found = invocation.operation_key in keys
        return ToolResponse(payload={"status": "ok", "found": found, "refund_id": "R1"})

    tools = FunctionTools({"lookup_order": lookup, "refund_order": refund, "find_refund": find})
    return Engine(contracts=CONTRACTS, toolbox=tools, store=store, clock=SystemClock())


async def _main(argv: list[str]) -> None:
    mode, url, folder = argv[0], argv[1], Path(argv[2])
    store = await PostgresStore.open(url)
    try:
        if mode == "crash":
            handle = engine(store, folder, crash=True).start(SPEC, MODEL)
            print("run", handle.run_id, flush=True)
            await handle.result()
            return
        try:
            result = await engine(store, folder).resume(argv[3], SPEC, MODEL)
        except RunnerError as exc:
            print(f"refused {type(exc).__name__}: {exc}", flush=True)
            return
        print("ended", result.terminal.value, flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
