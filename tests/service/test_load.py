"""A bounded load test on loopback: 200 fixture runs submitted at once to `runner serve`, every
one ends declared and none is lost; p50/p99 latency of submit and of read are reported (printed,
and written to `service-load.json` under `$RUNNER_TEST_ARTIFACTS`, default the system temp
folder's `runner-service-screenshots`). Bounded: 200 runs, 4 run threads, 180 s at most."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from runner.core.states import TERMINAL
from runner.store import SqliteStore
from tests.support.service_harness import A, loopback, serving

pytestmark = [pytest.mark.slow, pytest.mark.serial]

__all__ = ["loopback"]

RUNS = 200
BOUND_S = 180.0


def _percentiles(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50_ms": round(cuts[49] * 1000, 1), "p99_ms": round(cuts[98] * 1000, 1)}


async def _timed(
    client: httpx.AsyncClient, method: str, path: str, **kw: object
) -> tuple[float, httpx.Response]:
    began = time.perf_counter()
    response = await client.request(method, path, **kw)  # type: ignore[arg-type]
    return time.perf_counter() - began, response


@pytest.mark.usefixtures("loopback")
def test_200_runs_submitted_at_once_all_end_declared_none_lost(tmp_path: Path) -> None:
    began = time.monotonic()
    with serving(tmp_path, workers=4) as service:

        async def load() -> tuple[list[str], list[float], list[float]]:
            # No connection reuse: a kept-alive connection the server closes (its keep-alive
            # timeout) just as a request goes out on it is a ReadError on the client's side.
            limits = httpx.Limits(max_connections=RUNS, max_keepalive_connections=0)
            async with httpx.AsyncClient(
                base_url=service.url,
                headers={"Authorization": f"Bearer {A}"},
                timeout=60,
                limits=limits,
            ) as client:
                submitted = await asyncio.gather(
                    *(
                        _timed(client, "POST", "/v1/runs", json={"fixture": "read_only_success"})
                        for _ in range(RUNS)
                    )
                )
                assert [r.status_code for _, r in submitted] == [202] * RUNS
                ids = [r.json()["run_id"] for _, r in submitted]
                reads: list[float] = []
                pending = set(ids)
                while pending:
                    assert time.monotonic() - began < BOUND_S, f"{len(pending)} runs never ended"
                    polled = await asyncio.gather(
                        *(_timed(client, "GET", f"/v1/runs/{run_id}") for run_id in sorted(pending))
                    )
                    for elapsed, response in polled:
                        assert response.status_code == 200
                        reads.append(elapsed)
                        run = response.json()
                        if run["status"] == "ended":
                            pending.discard(run["run_id"])
                    await asyncio.sleep(0.2)
                return ids, [e for e, _ in submitted], reads

        ids, submits, reads = asyncio.run(load())
        with service.client() as client:
            listed = client.get("/v1/runs", params={"limit": 500}).json()
    assert len(set(ids)) == RUNS
    assert listed["total"] == RUNS and {r["run_id"] for r in listed["runs"]} == set(ids)
    store = SqliteStore(service.db, read_only=True)
    try:
        summaries = [store.summary(run_id) for run_id in ids]
    finally:
        store.close()
    assert all(s is not None and s.terminal in TERMINAL for s in summaries)  # declared, one each
    assert {(s.terminal, s.reason) for s in summaries if s} == {("complete", "model_final")}
    report = {
        "runs": RUNS,
        "seconds": round(time.monotonic() - began, 1),
        "submit": _percentiles(submits),
        "read": _percentiles(reads),
        "reads": len(reads),
    }
    folder = Path(
        os.environ.get("RUNNER_TEST_ARTIFACTS")
        or Path(tempfile.gettempdir()) / "runner-service-screenshots"
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "service-load.json").write_text(json.dumps(report, indent=2))
    print(f"\nservice load: {json.dumps(report)}")
