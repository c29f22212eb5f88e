"""The workload every system runs: 20 scripted tool calls (one per step), then an answer."""

from __future__ import annotations

import argparse
from typing import Any, Final

from bench import workloads

STEPS: Final = 20
RESULT: Final = workloads.RESULT
"""The no-op tool's answer: ten records (one shared dict, as a real cache would hand out)."""


def replies(steps: int = STEPS) -> list[dict[str, Any] | None]:
    """What the scripted model says at each step: a call's arguments, then None (the answer)."""
    return [workloads.arguments(page) for page in range(steps)] + [None]


def noop_lookup(arguments: dict[str, Any]) -> dict[str, Any]:
    """The trivial tool, as a plain function (the peers' tools are synchronous)."""
    return RESULT


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number
