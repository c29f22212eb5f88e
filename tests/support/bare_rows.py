"""A run header with every field plain and any replaced: for the tests that write rows by hand."""

from __future__ import annotations

from datetime import UTC, datetime

from runner.record.trace import RunHeader

WHEN = datetime(2027, 3, 1, tzinfo=UTC)


def header(run_id: str, **changes: object) -> RunHeader:
    data: dict[str, object] = {
        "run_id": run_id,
        "name": "n",
        "tenant": "t",
        "principal": "p",
        "started_at": WHEN,
        "task": "task",
        "tools": [],
        "scopes": [],
        "context": {},
        "limits": {},
        "policy": {},
        "seed": 0,
    }
    data.update(changes)
    return RunHeader(**data)  # type: ignore[arg-type]
