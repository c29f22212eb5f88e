"""Where a waiting run's continuation stands, and when its tokens are checked, on the SQLite
service over real HTTP.

The service's wall clock is injected (`build_app(..., clock=)`): served in this process
(`serving_here`), a test moves it past a token's expiry between the decision and the start of
its continuation. The engine's own runs keep their clocks (a fixture's is virtual).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.base.clock import FakeClock
from runner.engine.approvals import DEFAULT_TTL, ledger_of
from runner.service.continuations import ContinuationFacts, continuation_view
from runner.store import SqliteStore
from runner.store.base import RunListing
from tests.support.service_harness import (
    LONG,
    TWO_HOLDS,
    Service,
    loopback,
    read_events,
    serving,
    serving_here,
    two_holds_fixtures,
)

__all__ = ["loopback"]

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("loopback")]


def _until(service: Service, run_id: str, done: Any, timeout_s: float = 60.0) -> dict[str, Any]:
    """The run's view once `done(view)` holds."""
    deadline = time.monotonic() + timeout_s
    with service.client() as client:
        while not done(run := client.get(f"/v1/runs/{run_id}").json()):
            assert time.monotonic() < deadline, run
            time.sleep(0.05)
    result: dict[str, Any] = run
    return result


def _approve(service: Service, approval_id: str) -> httpx.Response:
    with service.client() as client:
        return client.post(f"/v1/approvals/{approval_id}/approve")


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
            queued = client.get(f"/v1/runs/{waiting}").json()
            clock.advance(DEFAULT_TTL.total_seconds() + 1)  # expired before it can start
            assert client.post(f"/v1/runs/{busy}/cancel").status_code == 202
        run = _until(service, waiting, lambda r: r["continuation_error"] or r["continued_as"])
        assert service.wait_ended(busy)["reason"] == "cancelled"
    assert queued["continuation"] == {"state": "queued", "waiting_for": 0, "run_id": None}
    assert queued["continuation_error"] is None
    assert run["continuation"] == {"state": "failed", "waiting_for": 0, "run_id": None}
    assert run["continued_as"] is None and run["holds"] == 0, run
    assert "expired" in run["continuation_error"], run
    assert _continuations(service.db, waiting) == []  # nothing stored, nothing sent
    store = SqliteStore(service.db, read_only=True)
    try:
        (proposal,) = ledger_of(store).proposals(waiting)
        assert proposal.status == "approved"  # decided once; the token was never used
    finally:
        store.close()


def test_a_waiting_run_says_how_many_decisions_it_waits_for_and_no_refusal_is_an_error(
    tmp_path: Path,
) -> None:
    """Approving the first of two holds tried the continuation at once: refused (the second
    still waited), and `continuation_error` kept saying so after the second was approved and
    the run had continued. The view says where the continuation stands now."""
    with serving(tmp_path, pace_s=0.1, fixtures=two_holds_fixtures(tmp_path)) as service:
        waiting = service.submit(TWO_HOLDS)
        run = service.wait_ended(waiting)
        assert (run["reason"], run["continuation_error"]) == ("approval_required", None)
        assert run["continuation"] == {"state": "waiting", "waiting_for": 2, "run_id": None}
        first, second = service.pending(waiting)
        assert _approve(service, first["approval_id"]).status_code == 200
        time.sleep(0.3)  # what a continuation tried at once would have said by now
        run = service.wait_ended(waiting)
        assert run["continuation"] == {"state": "waiting", "waiting_for": 1, "run_id": None}
        assert run["continuation_error"] is None and run["continued_as"] is None
        assert _approve(service, second["approval_id"]).status_code == 200
        seen = []
        with service.client() as client:
            deadline = time.monotonic() + 60
            while (view := client.get(f"/v1/runs/{waiting}").json())["continuation"][
                "state"
            ] != "ended":
                assert time.monotonic() < deadline, view
                assert view["continuation_error"] is None, view
                seen.append((view["continuation"]["state"], view["continuation"]["run_id"]))
                time.sleep(0.02)
        continued = view["continued_as"]
        final = service.wait_ended(continued)
    assert view["continuation"] == {"state": "ended", "waiting_for": 0, "run_id": continued}
    assert view["continuation_error"] is None
    assert ("running", continued) in seen  # it paces 0.1 s a transition: seen going
    order = ["queued", "running"]
    assert [order.index(state) for state, _ in seen] == sorted(order.index(s) for s, _ in seen)
    assert (final["state"], final["holds"]) == ("complete", 2)
    assert _continuations(service.db, waiting) == [continued]


def test_both_approved_at_once_continue_once_and_leave_no_error(tmp_path: Path) -> None:
    """Both decisions at once each continued the run: one went on, the other left `StoreError:
    run ... already ended` or `approval refused (continued)` on the waiting run."""
    with serving(tmp_path, fixtures=two_holds_fixtures(tmp_path)) as service:
        waiting = service.submit(TWO_HOLDS)
        assert service.wait_ended(waiting)["reason"] == "approval_required"
        pending = service.pending(waiting)
        answers: list[int] = []
        deciders = [
            threading.Thread(
                target=lambda a=p["approval_id"]: answers.append(_approve(service, a).status_code)
            )
            for p in pending
        ]
        for decider in deciders:
            decider.start()
        for decider in deciders:
            decider.join(60)
        view = _until(service, waiting, lambda r: r["continuation"]["state"] in {"ended", "failed"})
        final = service.wait_ended(view["continued_as"])
        time.sleep(0.5)  # a second continuation, had one been tried, has failed by now
        with service.client() as client:
            again = client.get(f"/v1/runs/{waiting}").json()
    assert answers == [200, 200]
    assert view["continuation"] == {"state": "ended", "waiting_for": 0,
                                    "run_id": final["run_id"]}  # fmt: skip
    assert (again["continuation"], again["continuation_error"]) == (view["continuation"], None)
    assert (final["state"], final["holds"]) == ("complete", 2)
    assert _continuations(service.db, waiting) == [final["run_id"]]


@pytest.mark.parametrize(
    ("facts", "state", "error"),
    [
        (dict(pending=2), "waiting", None),
        (dict(pending=1, failure="ApprovalRefused: still waits"), "waiting", None),
        (dict(in_hand=True), "queued", None),
        (dict(in_hand=True, continuation="c"), "running", None),
        (dict(in_hand=True, failure="TokenExpired: expired"), "queued", None),
        (dict(failure="TokenExpired: expired"), "failed", "TokenExpired: expired"),
        (dict(continuation="c", ended=True, failure="StoreError: ended"), "ended", None),
        (dict(continuation="c"), "running", None),
        (dict(), "queued", None),
    ],
)
def test_only_the_state_that_holds_now_is_shown_and_an_error_only_while_it_is_the_truth(
    facts: dict[str, Any], state: str, error: str | None
) -> None:
    given = {"pending": 0, "continuation": None, "ended": False, "in_hand": False,
             "failure": None, **facts}  # fmt: skip
    view = continuation_view(ContinuationFacts(**given))
    assert (view.state, view.error) == (state, error)
    assert view.waiting_for == given["pending"] if state == "waiting" else view.waiting_for == 0
    assert view.as_json() == {"state": state, "waiting_for": view.waiting_for,
                              "run_id": given["continuation"]}  # fmt: skip


def test_a_running_continuation_can_be_cancelled_on_the_service_that_drives_it(
    tmp_path: Path,
) -> None:
    """A continuation this service started was not among the runs it knew to cancel: the cancel
    answered 409 `not_here` and the run went on to `complete`."""
    with serving(tmp_path, pace_s=0.3) as service:
        waiting = service.submit("hold_approved")
        assert service.wait_ended(waiting)["reason"] == "approval_required"
        (proposal,) = service.pending(waiting)
        assert _approve(service, proposal["approval_id"]).status_code == 200
        view = _until(service, waiting, lambda r: r["continuation"]["state"] == "running")
        continued = view["continuation"]["run_id"]
        with service.client() as client:
            response = client.post(f"/v1/runs/{continued}/cancel")
        assert response.status_code == 202, response.text
        assert response.json() == {"run_id": continued, "cancel_requested": True}
        final = service.wait_ended(continued)
        with service.client() as client:
            again = client.post(f"/v1/runs/{continued}/cancel")
    steps = [(t["seq"], t["trigger"], t.get("result_class")) for t in final["transitions"]]
    assert (final["state"], final["reason"]) == ("abstain", "cancelled"), steps
    assert again.status_code == 409 and again.json()["error"]["code"] == "ended"
