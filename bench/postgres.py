"""PostgreSQL: the durable step cost beside SQLite's, and queued runs per second with 1, 2 and 4
workers; prints a table and writes bench/results_postgres.json. `make bench-postgres`.

A throwaway cluster is started for it (tests/support/pg.py) with PostgreSQL's durable defaults
(fsync on, synchronous commit), on loopback. The step cost is the same 20-step run as `make bench`,
on the engine's awaited-store path (store/writebehind.py) against SQLite (synchronous=NORMAL) and
memory, alternating. The worker figures are fixture runs (every bundled fixture, cycled), submitted
once all the workers are up, timed until the last run ended.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg

from runner.base import log
from runner.base.clock import SystemClock
from runner.cli._distributed import fixture_job
from runner.distributed.queue import ensure_queue_schema, make_app, submit
from runner.engine.engine import Engine
from runner.harness.fixtures import collect_fixture_paths, load_fixture
from runner.store import MemoryStore, SqliteStore
from runner.store.base import AsyncStore, Store
from runner.store.postgres import PostgresStore
from runner.tools.contracts import ContractSet
from runner.travel import fixtures_dir, load_travel_contracts
from tests.support.pg import start_cluster, stop_cluster

from . import workloads

RESULTS = Path(__file__).resolve().parent / "results_postgres.json"
STEPS = 20
PAIRS = 40
QUEUED_RUNS = 200
WORKER_COUNTS = (1, 2, 4)


async def _per_step(engine: Engine) -> float:
    model, spec = workloads.model(STEPS), workloads.spec(STEPS)
    started = time.perf_counter_ns()
    await engine.run(spec, model)
    return (time.perf_counter_ns() - started) / STEPS / 1000


def _engine(contracts: ContractSet, store: Store | AsyncStore) -> Engine:
    return Engine(
        contracts=contracts, toolbox=workloads.NoopToolbox(), store=store, clock=SystemClock()
    )


async def _step_costs(url: str, folder: Path) -> dict[str, Any]:
    contracts = workloads.contracts()
    postgres = await PostgresStore.open(url)
    # Durable against a crash of PostgreSQL but not of the machine: what SQLite's NORMAL keeps.
    relaxed = await PostgresStore.open(url + "?options=-c%20synchronous_commit%3Doff")
    sqlite = SqliteStore(folder / "bench.sqlite")
    engines: dict[str, Engine] = {
        "memory": _engine(contracts, MemoryStore()),
        "sqlite_normal": _engine(contracts, sqlite),
        "postgres": _engine(contracts, postgres),
        "postgres_async_commit": _engine(contracts, relaxed),
    }
    samples: dict[str, list[float]] = {name: [] for name in engines}
    for engine in engines.values():  # warm up
        await _per_step(engine)
    for _ in range(PAIRS):
        for name, engine in engines.items():
            samples[name].append(await _per_step(engine))
    await postgres.close()
    await relaxed.close()
    sqlite.close()
    medians = {name: round(statistics.median(s), 1) for name, s in samples.items()}
    return {
        "step_us": medians,
        "store_share_us": {
            "sqlite_normal": round(medians["sqlite_normal"] - medians["memory"], 1),
            "postgres": round(medians["postgres"] - medians["memory"], 1),
            "postgres_async_commit": round(medians["postgres_async_commit"] - medians["memory"], 1),
        },
        "runs_per_store": PAIRS,
        "steps_per_run": STEPS,
    }


def _sql(url: str, query: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(query).fetchone()  # type: ignore[arg-type]  # our own SQL
    return int(row[0]) if row else 0


def _runs_per_second(cluster: Any, workers: int, folder: Path) -> dict[str, Any]:
    url = cluster.new_database()
    contracts = load_travel_contracts()
    fixtures = [load_fixture(p, contracts) for p in collect_fixture_paths([fixtures_dir()])]
    runs = [fixture_job(f, 0) for f in itertools.islice(itertools.cycle(fixtures), QUEUED_RUNS)]
    app = make_app(url)

    async def prepare() -> None:
        async with app.open_async():
            await ensure_queue_schema(app, url)
        await (await PostgresStore.open(url)).close()

    asyncio.run(prepare())
    env = {**os.environ, "RUNNER_WORLD": str(folder / f"world-{workers}")}
    command = [sys.executable, "-m", "runner", "worker", "--db", url, "--concurrency", "4"]
    processes = [
        subprocess.Popen(command, env=env, cwd=folder, stdout=subprocess.DEVNULL)
        for _ in range(workers)
    ]
    try:
        while _sql(url, "SELECT count(*) FROM procrastinate_workers") < workers:
            time.sleep(0.1)

        async def queue() -> None:
            async with app.open_async():
                await submit(app, runs)

        started = time.perf_counter()
        asyncio.run(queue())
        while _sql(url, "SELECT count(*) FROM runner_runs WHERE summary IS NOT NULL") < len(runs):
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=60)
    return {"workers": workers, "runs": len(runs), "runs_per_s": round(len(runs) / elapsed, 1)}


def _timed(what: str, started: float) -> None:
    print(f"{what} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)


def main() -> int:
    log.configure(json=True, level=logging.WARNING)
    started = time.perf_counter()
    cluster = start_cluster(durable=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            results: dict[str, Any] = _run(lambda: _step_costs(cluster.new_database(), folder))
            _timed("step costs measured", started)
            results["workers"] = [_runs_per_second(cluster, n, folder) for n in WORKER_COUNTS]
            _timed("workers measured", started)
    finally:
        stop_cluster(cluster)
    results["cpus"] = os.cpu_count()
    _report(results)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {RESULTS}")
    return 0


def _run(factory: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(factory())  # type: ignore[arg-type]


def _report(r: dict[str, Any]) -> None:
    step, share = r["step_us"], r["store_share_us"]
    print(f"{'measure':<48} {'median':>10}")
    print(f"{'step, in memory (us)':<48} {step['memory']:>10}")
    print(f"{'step, SQLite every transition, NORMAL (us)':<48} {step['sqlite_normal']:>10}")
    print(f"{'step, PostgreSQL every transition, fsync (us)':<48} {step['postgres']:>10}")
    print(
        f"{'step, PostgreSQL, synchronous_commit=off (us)':<48} {step['postgres_async_commit']:>10}"
    )
    print(
        f"{'store share of a step: SQLite / PostgreSQL (us)':<48} "
        f"{share['sqlite_normal']:>10} / {share['postgres']} "
        f"(synchronous_commit=off: {share['postgres_async_commit']})"
    )
    for row in r["workers"]:
        label = f"queued fixture runs, {row['workers']} worker(s) x 4 (runs/s)"
        print(f"{label:<48} {row['runs_per_s']:>10}")
    print(f"(on {r['cpus']} CPUs)")


if __name__ == "__main__":
    sys.exit(main())
