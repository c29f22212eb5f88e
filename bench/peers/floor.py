"""The floor: a hand-written state machine doing what a step must, and nothing else.

Three transitions a step (plan -> call -> observe -> plan), the arguments and the result checked
by the contract's compiled (jsonschema-rs) validators, one record per transition carrying what
the transition consumed (the model's call, the tool's result: what a resume would need). Durable:
the records are inserted into SQLite (WAL, synchronous=NORMAL), committed per transition or per
step.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jsonschema_rs
import orjson

from bench import workloads

from .common import replies


async def _tool(arguments: dict[str, Any]) -> dict[str, Any]:
    return workloads.RESULT


def make(durability: str | None, folder: Path) -> Callable[[], Awaitable[None]]:
    contract = workloads.contracts().get(workloads.TOOL)
    assert contract is not None
    check_in = jsonschema_rs.validator_for(contract.contract.input_schema)
    check_out = jsonschema_rs.validator_for(contract.contract.result_schema)
    conn: sqlite3.Connection | None = None
    if durability is not None:
        conn = sqlite3.connect(folder / "floor.sqlite", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS transitions "
            "(run_id INTEGER, seq INTEGER, record BLOB, PRIMARY KEY (run_id, seq))"
        )
    script = replies()
    runs = iter(range(10**9))

    async def one_run() -> None:
        run_id, records, state, pending = next(runs), [], "plan", 0

        def move(to: str, **fields: Any) -> None:
            nonlocal state, pending
            records.append({"seq": len(records) + 1, "from": state, "to": to, **fields})
            state = to
            pending += 1
            if conn is not None and (durability == "transition" or to in ("plan", "complete")):
                conn.execute("BEGIN")
                for record in records[-pending:]:
                    row = (run_id, record["seq"], orjson.dumps(record))
                    conn.execute("INSERT INTO transitions VALUES (?, ?, ?)", row)
                conn.execute("COMMIT")
                pending = 0

        for step, arguments in enumerate(script):
            if arguments is None:
                move("complete", answer="done")
                break
            move("call", tool=workloads.TOOL, call_id=f"c{step}", arguments=arguments)
            if not check_in.is_valid(arguments):
                raise AssertionError("invalid arguments")
            started = time.monotonic()
            result = await _tool(arguments)
            kind = "ok" if check_out.is_valid(result) else "malformed_result"
            latency = time.monotonic() - started
            move("observe", result_class=kind, latency_ms=latency, result=result)
            move("plan", decision="continue")

    return one_run
