"""Run every benchmark in this one process; print a table and write bench/results.json.

Figures are medians (and p90) of per-step or per-run times, reported beside floors measured in the
same process: a bare hand-written loop making the same model and tool calls, and raw SQLite inserts
of the same rows. Ratios, not absolute times, are what carry from machine to machine.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import platform
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

from runner.base import _failpoints, log
from runner.base.clock import SystemClock
from runner.engine.engine import Engine
from runner.models.transcript import AssistantMessage, Transcript
from runner.proof.replay import Recording, replay
from runner.record.spec import Durability
from runner.store import FanoutStore, JsonlLog, MemoryStore, SqliteStore
from runner.store.base import Store
from runner.tools.contracts import ContractSet
from runner.tools.invocation import Principal, ToolInvocation

from . import workloads

RESULTS = Path(__file__).resolve().parent / "results.json"


def _us(ns: float) -> float:
    return round(ns / 1000, 2)


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_us": _us(statistics.median(ordered)),
        "p90_us": _us(ordered[int(len(ordered) * 0.9) - 1]),
        "samples": len(ordered),
    }


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _engine(contracts: ContractSet, store: Store, durability: Durability = "transition") -> Engine:
    return Engine(
        contracts=contracts,
        toolbox=workloads.NoopToolbox(),
        store=store,
        clock=SystemClock(),
        durability=durability,
    )


async def _one_run(engine: Engine, steps: int) -> float:
    """Nanoseconds per step of one run (its model and spec built outside the timing)."""
    model, spec = workloads.model(steps), workloads.spec(steps)
    started = time.perf_counter_ns()
    await engine.run(spec, model)
    return (time.perf_counter_ns() - started) / max(steps, 1)


async def _timed_runs(engine: Engine, steps: int, runs: int) -> list[float]:
    return [await _one_run(engine, steps) for _ in range(runs)]


async def _one_bare_run(steps: int) -> float:
    """The floor: the same scripted model and no-op tool, driven by a hand-written loop."""
    principal = Principal(id="bench", scopes=frozenset({"bench.read"}))
    model, transcript = workloads.model(steps), Transcript()
    started = time.perf_counter_ns()
    while True:
        reply = await model.generate(transcript, (), "auto")
        if not reply.tool_calls:
            break
        transcript.append(AssistantMessage(text="", tool_calls=reply.tool_calls))
        for call in reply.tool_calls:
            invocation = ToolInvocation(
                call_id=call.id,
                tool=call.name,
                arguments=call.arguments,
                tenant="bench",
                principal=principal,
                credentials={},
                operation_key=None,
                timeout_s=5,
            )
            await workloads.noop(invocation)
    return (time.perf_counter_ns() - started) / steps


async def _paired(
    first: Callable[[], Awaitable[float]], second: Callable[[], Awaitable[float]], pairs: int
) -> tuple[list[float], list[float]]:
    """Alternate the two measurements so that drift in the machine's speed hits both alike."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(pairs):
        a.append(await first())
        b.append(await second())
    return a, b


def _raw_insert_per_step(commits: list[list[tuple[Any, ...]]], steps: int, folder: Path) -> float:
    """The same rows the runner wrote, in the same commits (a transition with its inputs),
    inserted raw into a table of the same shape (WAL, NORMAL)."""
    conn = sqlite3.connect(folder / "raw.sqlite", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE log (entry INTEGER PRIMARY KEY, kind INT, number INT, body TEXT)")
    started = time.perf_counter_ns()
    for rows in commits:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO log VALUES (?, ?, ?, ?)", rows)
        conn.execute("COMMIT")
    elapsed = time.perf_counter_ns() - started
    conn.close()
    return elapsed / steps


def _commits_per_run(store: SqliteStore) -> int:
    """How many commits one 20-step run makes (the FULL store's: each is one flush)."""
    counted: list[int] = []
    count = _failpoints.committed  # what the crash sweep counts: every durable commit
    _failpoints.committed = lambda: counted.append(1)
    try:
        _run(lambda: _one_run(_engine(workloads.contracts(), store), 20))
    finally:
        _failpoints.committed = count
    return len(counted)


def _flush_ns(folder: Path, times: int = 60) -> float:
    """The median time of one fdatasync of a freshly written 4 KB page in `folder`."""
    path = folder / "flush.probe"
    spent: list[float] = []
    with path.open("wb", buffering=0) as probe:
        for _ in range(times):
            probe.write(b"x" * 4096)
            started = time.perf_counter_ns()
            os.fdatasync(probe.fileno())
            spent.append(time.perf_counter_ns() - started)
    path.unlink()
    return statistics.median(spent)


def _filesystem(folder: Path) -> str:
    """The type of the filesystem `folder` is on (from /proc/mounts; "unknown" elsewhere)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    best, kind = "", "unknown"
    where = str(folder.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) > 2 and where.startswith(parts[1]) and len(parts[1]) > len(best):
            best, kind = parts[1], parts[2]
    return kind


def _commits_of(db: Path) -> list[list[tuple[Any, ...]]]:
    """A store's log rows as it committed them: each transition with the inputs before it."""
    conn = sqlite3.connect(db)
    commits: list[list[tuple[Any, ...]]] = [[]]
    for row in conn.execute("SELECT entry, kind, number, body FROM run_log ORDER BY entry"):
        commits[-1].append(row)
        if row[1] == 0:  # a transition ends its commit
            commits.append([])
    conn.close()
    return [rows for rows in commits if rows]


async def _concurrent(contracts: ContractSet, runs: int, steps: int) -> dict[str, float]:
    engine = _engine(contracts, MemoryStore())
    jobs = [engine.run(workloads.spec(steps), workloads.model(steps)) for _ in range(runs)]
    started = time.perf_counter()
    results = await asyncio.gather(*jobs)
    elapsed = time.perf_counter() - started
    assert all(r.terminal.value == "complete" for r in results)
    return {"runs": runs, "runs_per_s": round(runs / elapsed, 1), "peak_rss_mb": _peak_rss_mb()}


def _run(coro_factory: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(coro_factory())  # type: ignore[arg-type]


def _steps(contracts: ContractSet, engine: Engine, results: dict[str, Any]) -> None:
    """1: a full step in memory, against the bare loop, alternating."""
    _run(lambda: _timed_runs(engine, 20, 30))  # warm up
    memory, bare = _run(
        lambda: _paired(lambda: _one_run(engine, 20), lambda: _one_bare_run(20), 300)
    )
    results["in_memory"] = _stats(memory)
    results["bare_loop"] = _stats(bare)
    ratios = [m / b for m, b in zip(memory, bare, strict=True)]
    results["in_memory_over_bare"] = round(statistics.median(ratios), 1)


def _stores(contracts: ContractSet, engine: Engine, folder: Path, results: dict[str, Any]) -> None:
    """2: every transition committed to SQLite, against raw inserts of the same rows."""
    normal_store = SqliteStore(folder / "NORMAL.sqlite", synchronous="NORMAL")
    normal_engine = _engine(contracts, normal_store)
    durable, in_memory = _run(
        lambda: _paired(lambda: _one_run(normal_engine, 20), lambda: _one_run(engine, 20), 150)
    )
    normal_store.close()
    results["durable_normal"] = _stats(durable)
    shares = [d - m for d, m in zip(durable, in_memory, strict=True)]
    results["store_share_us"] = _us(statistics.median(shares))
    step_store = SqliteStore(folder / "STEP.sqlite", synchronous="NORMAL")
    step_engine = _engine(contracts, step_store, durability="step")
    results["durable_step"] = _stats(_run(lambda: _timed_runs(step_engine, 20, 150)))
    step_store.close()
    # FULL against NORMAL, alternating (a FULL run alone, minutes later, met other load); the
    # disk's own flush is measured beside it: FULL's extra cost is one flush per commit, and a
    # disk that acknowledges a flush at once (tmpfs, a write-back cache) makes FULL look free.
    full_store = SqliteStore(folder / "FULL.sqlite", synchronous="FULL")
    again_store = SqliteStore(folder / "NORMAL-2.sqlite", synchronous="NORMAL")
    full_engine, again_engine = _engine(contracts, full_store), _engine(contracts, again_store)
    full, normal = _run(
        lambda: _paired(lambda: _one_run(full_engine, 20), lambda: _one_run(again_engine, 20), 60)
    )
    commits = _commits_per_run(full_store)
    full_store.close()
    again_store.close()
    results["durable_full"] = _stats(full)
    results["durable_full_normal"] = _stats(normal)
    results["commits_per_step"] = round(commits / 20, 2)
    results["flush_us"] = _us(_flush_ns(folder))
    results["folder_filesystem"] = _filesystem(folder)
    logged = _commits_of(folder / "NORMAL.sqlite")
    raw = _raw_insert_per_step(logged, 150 * 20, folder)
    results["raw_sqlite_insert_per_step_us"] = _us(raw)
    results["rows_per_step"] = round(sum(len(rows) for rows in logged) / (150 * 20), 2)


def _replay_speed(contracts: ContractSet, folder: Path, results: dict[str, Any]) -> None:
    """5: replay speed from a stored log of about 10,000 transitions."""
    log_path = folder / "replay.jsonl"
    sink = FanoutStore(MemoryStore(), JsonlLog(log_path))
    _run(lambda: _timed_runs(_engine(contracts, sink), 20, 164))  # 164 runs x 61 transitions
    sink.close()
    recordings = Recording.from_log(log_path)
    transitions = sum(len(r.transitions) for r in recordings)
    started = time.perf_counter()
    for recording in recordings:
        outcome = replay(recording, contracts)
        assert outcome.identical, outcome.divergence
    elapsed = time.perf_counter() - started
    results["replay"] = {
        "transitions": transitions,
        "transitions_per_s": round(transitions / elapsed),
    }


def _logging_cost(contracts: ContractSet, results: dict[str, Any]) -> None:
    """7: a run with the library's default logging settings (nothing configured) against the
    quiet configuration (structlog at WARNING, as the CLI without --verbose), alternating."""
    engine = _engine(contracts, MemoryStore())

    async def default() -> float:
        structlog.reset_defaults()  # as in a program that never configured logging
        return await _one_run(engine, 20)

    async def quiet() -> float:
        log.configure(json=True, level=logging.WARNING)
        return await _one_run(engine, 20)

    _run(lambda: _timed_runs(engine, 20, 20))  # warm up
    defaults, quiets = _run(lambda: _paired(default, quiet, 150))
    log.configure(json=True, level=logging.WARNING)
    results["default_logging"] = _stats(defaults)
    results["quiet_logging"] = _stats(quiets)
    ratios = [d / q for d, q in zip(defaults, quiets, strict=True)]
    results["default_over_quiet"] = round(statistics.median(ratios), 2)


def _growth(engine: Engine, results: dict[str, Any]) -> None:
    """6: does a step cost more as the run grows? And what does the run hold in memory?"""
    growth = []
    for steps in (20, 200, 2_000):
        runs = max(3, 4_000 // steps)
        per_step = _stats(_run(lambda: _timed_runs(engine, steps, runs)))  # noqa: B023
        tracemalloc.start()
        _run(lambda: _timed_runs(engine, steps, 1))  # noqa: B023
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        growth.append({"steps": steps, **per_step, "run_peak_kb": round(peak / 1024, 1)})
    results["growth"] = growth


def main() -> int:
    log.configure(json=True, level=logging.WARNING)
    contracts = workloads.contracts()
    results: dict[str, Any] = {
        "machine": {"python": sys.version.split()[0], "platform": platform.platform()},
    }
    started = time.perf_counter()

    def progress(what: str) -> None:
        print(f"{what} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    # 4 first: peak RSS only ever grows, so measure it before anything else inflates it.
    results["baseline_rss_mb"] = _peak_rss_mb()
    results["concurrency"] = [
        _run(lambda: _concurrent(contracts, 1_000, 20)),
        _run(lambda: _concurrent(contracts, 10_000, 20)),
    ]
    progress("concurrency measured")
    engine = _engine(contracts, MemoryStore())
    _steps(contracts, engine, results)
    # The SQLite files live beside the results, not in /tmp, which is often tmpfs (no flush).
    with tempfile.TemporaryDirectory(dir=RESULTS.parent, prefix=".bench-") as tmp:
        _stores(contracts, engine, Path(tmp), results)
        progress("stores measured")
        _replay_speed(contracts, Path(tmp), results)
        progress("replay measured")
    # 3: fixed cost of a run (created, one answer, finished and released).
    results["fixed_per_run"] = _stats(_run(lambda: _timed_runs(engine, 0, 500)))
    _logging_cost(contracts, results)
    _growth(engine, results)
    results["total_s"] = round(time.perf_counter() - started, 1)

    _report(results)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {RESULTS} in {results['total_s']} s")
    return 0


def _report(r: dict[str, Any]) -> None:
    memory, bare = r["in_memory"]["median_us"], r["bare_loop"]["median_us"]
    normal, full = r["durable_normal"]["median_us"], r["durable_full"]["median_us"]
    raw = r["raw_sqlite_insert_per_step_us"]
    store_share = r["store_share_us"]
    print(f"{'measure':<44} {'median':>10} {'p90':>10}  against")
    print(
        f"{'step, in memory (us)':<44} {memory:>10} {r['in_memory']['p90_us']:>10}  "
        f"{r['in_memory_over_bare']}x the bare loop ({bare} us)"
    )
    print(
        f"{'step, SQLite every transition, NORMAL (us)':<44} {normal:>10} "
        f"{r['durable_normal']['p90_us']:>10}"
    )
    print(
        f"{'step, SQLite a commit a step, NORMAL (us)':<44} {r['durable_step']['median_us']:>10} "
        f'{r["durable_step"]["p90_us"]:>10}  durability="step"'
    )
    per_commit = (full - r["durable_full_normal"]["median_us"]) / r["commits_per_step"]
    print(
        f"{'step, SQLite every transition, FULL (us)':<44} {full:>10} "
        f"{r['durable_full']['p90_us']:>10}  NORMAL alternating: "
        f"{r['durable_full_normal']['median_us']} us; {per_commit:.0f} us more a commit "
        f"({r['commits_per_step']} a step), one fdatasync {r['flush_us']} us "
        f"({r['folder_filesystem']})"
    )
    if r["flush_us"] < 20:
        print(
            f"{'':<44} this disk acknowledges a flush at once (tmpfs or a write-back cache): "
            "FULL cannot cost more than NORMAL here"
        )
    print(
        f"{'store share of a step (durable - memory, us)':<44} {store_share:>10.1f} {'':>10}  "
        f"{store_share / raw:.2f}x raw inserts of the same rows, same commits ({raw} us)"
    )
    print(
        f"{'fixed cost per run (us)':<44} {r['fixed_per_run']['median_us']:>10} "
        f"{r['fixed_per_run']['p90_us']:>10}"
    )
    for c in r["concurrency"]:
        print(
            f"{str(c['runs']) + ' concurrent 20-step runs':<44} {c['runs_per_s']:>10} runs/s"
            f"  peak RSS {c['peak_rss_mb']} MB"
        )
    print(
        f"{'replay (transitions/s)':<44} {r['replay']['transitions_per_s']:>10}  "
        f"over {r['replay']['transitions']} transitions"
    )
    print(
        f"{'step, library default logging (us)':<44} {r['default_logging']['median_us']:>10} "
        f"{r['default_logging']['p90_us']:>10}  {r['default_over_quiet']}x the quiet "
        f"configuration ({r['quiet_logging']['median_us']} us), alternating"
    )
    first = r["growth"][0]["median_us"]
    for g in r["growth"]:
        print(
            f"{'step at ' + str(g['steps']) + ' steps (us)':<44} {g['median_us']:>10} "
            f"{g['p90_us']:>10}  {g['median_us'] / first:.2f}x the 20-step cost; "
            f"run peak {g['run_peak_kb']} KB"
        )


if __name__ == "__main__":
    sys.exit(main())
