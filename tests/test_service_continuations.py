"""Where a waiting run's continuation stands, and when its tokens are checked, on the SQLite
service over real HTTP.

The service's wall clock is injected (`build_app(..., clock=)`): served in this process
(`serving_here`), a test moves it past a token's expiry between the decision and the start of
its continuation. The engine's own runs keep their clocks (a fixture's is virtual).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from runner.approvals import DEFAULT_TTL, ledger_of
from runner.clock import FakeClock
from runner.store import SqliteStore
from runner.store.base import RunListing
from tests.service_harness import LONG, Service, loopback, read_events, serving_here

__all__ = ["loopback"]

pytestmark = pytest.mark.usefixtures("loopback")


def _until(service: Service, run_id: str, done: Any, timeout_s: float = 60.0) -> dict[str, Any]:
    """The run's view once `done(view)` holds."""
    deadline = time.monotonic() + timeout_s
    with service.client() as client:
        while not done(run := client.get(f"/v1/runs/{run_id}").json()):
            assert time.monotonic() < deadline, run
            time.sleep(0.05)
    result: dict[str, Any] = run
    return result


def _continuations(db: Path, waiting: str) -> list[str]:
    """The stored runs that continue `waiting`."""
    store = SqliteStore(db, read_only=True)
    try:
        return [
            item.header.run_id
            for item in store.runs()
            if isinstance(item, RunListing)
            and (item.header.continues or {}).get("run_id") == waiting
        ]
    finally:
        store.close()


def test_a_token_that_expires_while_its_continuation_waits_for_a_thread_is_refused(
    tmp_path: Path,
) -> None:
    """The decision's time was handed to the continuation: one that started after the token's
    TTL, every run thread busy meanwhile, still went ahead and sent the write. Its tokens are
    checked against the service's clock when it starts."""
    clock = FakeClock(datetime.now(UTC))
    with serving_here(tmp_path, clock=clock, workers=1, pace_s=0.05) as service:
        waiting = service.submit("hold_approved")
        assert service.wait_ended(waiting)["reason"] == "approval_required"
        busy = service.submit(LONG)  # holds the one run thread
        with service.client() as client:
            read_events(client, busy, stop_after=2)  # it is going
            (pending,) = service.pending(waiting)
            decided = client.post(f"/v1/approvals/{pending['approval_id']}/approve")
            assert decided.status_code == 200, decided.text
            clock.advance(DEFAULT_TTL.total_seconds() + 1)  # expired before it can start
            assert client.post(f"/v1/runs/{busy}/cancel").status_code == 202
        run = _until(service, waiting, lambda r: r["continuation_error"] or r["continued_as"])
        assert service.wait_ended(busy)["reason"] == "cancelled"
    assert run["continued_as"] is None and run["holds"] == 0, run
    assert "expired" in run["continuation_error"], run
    assert _continuations(service.db, waiting) == []  # nothing stored, nothing sent
    store = SqliteStore(service.db, read_only=True)
    try:
        (proposal,) = ledger_of(store).proposals(waiting)
        assert proposal.status == "approved"  # decided once; the token was never used
    finally:
        store.close()
