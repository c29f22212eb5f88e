"""One system, one process: `python -m bench.peers.measure SYSTEM MODE` prints its µs per step.

MODE is `memory`, `transition` (every transition committed) or `step` (one commit per step).
Warm-up runs first (imports, compiled schemas, first validators), then timed runs for about a
second and a half; the figures are the median run's time divided by its 20 steps, on the wall
clock and in CPU time (the process's, all its threads: what the code costs, whatever else the
machine is running).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import STEPS

WARM_UP_S, MEASURE_S, MIN_RUNS, MAX_RUNS = 0.3, 1.5, 15, 400
MODES = ("memory", "transition", "step")


def factory(system: str) -> Callable[[str | None, Path], Callable[[], Any]]:
    """The system's `make(durability, folder)`, imported only when asked for."""
    if system in ("runner", "runner-default-logging"):
        runner_app = importlib.import_module("bench.peers.runner_app")
        logging_ = "default" if system == "runner-default-logging" else "quiet"
        return lambda durability, folder: runner_app.make(durability, folder, logging_=logging_)
    module = {
        "floor": "floor",
        "burr": "burr_app",
        "langgraph": "langgraph_app",
        "pydantic-ai": "pydantic_ai_app",
    }[system]
    make: Callable[[str | None, Path], Callable[[], Any]]
    make = importlib.import_module(f"bench.peers.{module}").make
    return make


async def _timed(one_run: Callable[[], Any]) -> tuple[list[float], list[float]]:
    """Per-step nanoseconds of each timed run, wall and CPU (awaiting `one_run` when it is a
    coroutine)."""
    is_async = inspect.iscoroutinefunction(one_run)
    samples: list[float] = []
    cpu: list[float] = []
    for phase_s, keep in ((WARM_UP_S, False), (MEASURE_S, True)):
        phase_end = time.perf_counter() + phase_s
        count = 0
        while count < MIN_RUNS or (time.perf_counter() < phase_end and count < MAX_RUNS):
            started, started_cpu = time.perf_counter_ns(), time.process_time_ns()
            if is_async:
                await one_run()
            else:
                one_run()
            if keep:
                samples.append((time.perf_counter_ns() - started) / STEPS)
                cpu.append((time.process_time_ns() - started_cpu) / STEPS)
            count += 1
    return samples, cpu


def main(argv: list[str]) -> int:
    system, mode = argv
    if mode not in MODES:
        raise SystemExit(f"mode {mode!r}: one of {', '.join(MODES)}")
    durability = None if mode == "memory" else mode
    with tempfile.TemporaryDirectory() as folder:
        one_run = factory(system)(durability, Path(folder))
        wall, cpu = asyncio.run(_timed(one_run))
    figures = {"wall": statistics.median(wall) / 1000, "cpu": statistics.median(cpu) / 1000}
    print(json.dumps({"us_per_step": figures, "runs": len(wall)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
