"""The runner: the benchmark's contract, scripted model and no-op tool, through `Engine.run`."""

from __future__ import annotations

import dataclasses
import importlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench import workloads
from runner.base.clock import SystemClock
from runner.engine.engine import Engine
from runner.models.scripted import ScriptedModel
from runner.store import MemoryStore, SqliteStore
from runner.store.base import Store

from .common import STEPS


def make(durability: str | None, folder: Path, *, logging_: str) -> Callable[[], Awaitable[None]]:
    """`logging_`: "quiet" (structlog configured at WARNING, as the CLI does without --verbose)
    or "default" (the library's defaults: nothing configured)."""
    if logging_ == "quiet":
        log = importlib.import_module("runner.base.log")  # structlog: only when configured
        log.configure(json=True, level=logging.WARNING)
    store: Store = MemoryStore()
    if durability is not None:
        store = SqliteStore(folder / "runner.sqlite", synchronous="NORMAL")
    engine = Engine(
        contracts=workloads.contracts(),
        toolbox=workloads.NoopToolbox(),
        store=store,
        clock=SystemClock(),
    )
    # `transition` is the default; `step` is asked for on the spec.
    options = {"durability": durability} if durability == "step" else {}
    # The script is data, validated once (as the peers build theirs once); each run plays it
    # with a new model, whose cursor starts at the first turn.
    turns = workloads.script(STEPS)

    async def one_run() -> None:
        spec = dataclasses.replace(workloads.spec(STEPS), **options)
        result = await engine.run(spec, ScriptedModel(turns))
        assert result.terminal.value == "complete", result.reason

    return one_run
