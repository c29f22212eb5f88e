"""What a fixture's `expect` says against what its run came to: every difference, as a line."""

from __future__ import annotations

from typing import Any

from ..core.states import State
from ..record.spec import RunResult
from ..record.trace import states_visited
from .fixtures import Expect


def preserved_key(result: RunResult) -> str | None:
    """The key a run ending `unknown` hands over (None otherwise)."""
    if result.terminal is not State.UNKNOWN or not result.transitions:
        return None
    key = result.transitions[-1].operation_key
    statuses = {op.key: op.status for op in result.operations}
    return key if key is not None and statuses.get(key) == "unknown" else None


def check_expectations(expect: Expect, result: RunResult, holds: int | None) -> list[str]:
    """Every way `result` differs from `expect`, as readable lines (empty: all met)."""
    failures: list[str] = []

    def compare(label: str, wanted: Any, got: Any) -> None:
        if wanted is not None and wanted != got:
            failures.append(f"{label}: expected {wanted!r}, got {got!r}")

    compare("terminal", expect.terminal.value, result.terminal.value)
    compare("reason", expect.reason, result.reason)
    compare("attempts", expect.attempts, result.attempts)
    compare("model_steps", expect.model_steps, result.model_steps)
    compare("holds", expect.holds, holds)
    if expect.cost_usd is not None:
        got = None if result.cost_usd is None else round(result.cost_usd, 9)
        compare("cost_usd", round(expect.cost_usd, 9), got)
    if expect.operation_key_preserved is not None:
        compare(
            "operation_key_preserved",
            expect.operation_key_preserved,
            preserved_key(result) is not None,
        )
    if expect.waits_s is not None:
        compare(
            "waits_s", [round(w, 3) for w in expect.waits_s], [round(w, 3) for w in result.waits_s]
        )
    if expect.transitions is not None:
        compare(
            "transitions",
            [s.value for s in expect.transitions],
            [s.value for s in states_visited(result.transitions)],  # both as plain names
        )
    for fragment in expect.answer_contains or ():
        if fragment not in (result.answer or ""):
            failures.append(f"answer: expected to contain {fragment!r}, got {result.answer!r}")
    return failures
