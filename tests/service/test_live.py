"""Live-model runs through the service, over real HTTP: `runner serve` (uvicorn) on a loopback
port and SQLite, its models at the loopback OpenAI/Anthropic-compatible server (`llm_server`).

The config's `live` section offers the tools of a world fixture written here, two providers whose
keys come from environment variables (never from the body or the config), and a budget ceiling.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from runner.models.base import ToolCall
from runner.store import SqliteStore
from tests.support.live_service import (
    ENV,
    KEYS,
    SEARCHES,
    live,
    live_settings,
    submit,
)
from tests.support.llm_recordings import ok, reply
from tests.support.llm_server import RecordedLLMServer, load_recordings
from tests.support.service_harness import A_READ, A, B, Service, loopback, read_events, serving

__all__ = ["loopback"]

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("loopback")]

HOTEL = {"city": "Tokyo", "check_in": "2027-04-02", "check_out": "2027-04-06",
         "accessibility": "wheelchair", "guests": 2}  # fmt: skip


def _slow_searches(protocol: str) -> list[dict[str, Any]]:
    """A model that searches hotels `SEARCHES` times, each reply after 0.3 s, then answers."""
    search = [
        {**ok(protocol, "hotels-again", reply(calls=(ToolCall(id=f"s{n}", name="search_hotels",
                                                               arguments=HOTEL),))),
         "delay_s": 0.3}
        for n in range(SEARCHES)
    ]  # fmt: skip
    return [*search, ok(protocol, "hotels-again", reply("Shiba Park Hotel."))]


@pytest.fixture(scope="module")
def llm() -> Iterator[RecordedLLMServer]:
    """Answers by where the conversation stands, so any number of runs get the same replies."""
    recordings = load_recordings()
    for protocol in ("openai", "anthropic"):
        recordings[(protocol, "hotels-again")] = _slow_searches(protocol)
    with RecordedLLMServer(recordings, by_turn=True) as server:
        yield server


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, llm: RecordedLLMServer) -> Iterator[Service]:
    folder = tmp_path_factory.mktemp("live")
    with serving(folder, env=ENV, **live_settings(folder, llm.url)) as running:
        yield running


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_live_run_goes_from_post_to_complete_on_the_models_tool_calls(
    service: Service, llm: RecordedLLMServer, protocol: str
) -> None:
    before = datetime.now(UTC)
    run_id = submit(service, live(f"{protocol}:fixture-read_only_success"))
    run = service.wait_ended(run_id)
    assert (run["state"], run["reason"], run["fixture"]) == ("complete", "model_final", "live")
    assert run["tenant"] == "optiverse"
    assert "NH7" in run["answer"]
    with service.client() as client:
        transitions = client.get(f"/v1/runs/{run_id}/transitions").json()["transitions"]
        events = read_events(client, run_id)
    assert [data["seq"] for kind, _, data in events if kind == "transition"] == [
        t["seq"] for t in transitions
    ]  # the events stream: every transition, in order, then the end
    assert events[-1][0] == "end" and events[-1][2]["terminal"] == "complete"
    called = [t["tool"] for t in transitions if t["trigger"] == "classify"]
    assert sorted(called) == ["search_flights", "search_hotels"]  # the model's calls
    assert [t["to"] for t in transitions][-1] == "complete"
    asked = llm.requests[(protocol, "fixture-read_only_success")]
    assert any("SFO to NRT" in json.dumps(request) for request in asked)  # the body's task
    # Live: the system clock, not the world fixture's (2027) nor any fake clock.
    started = datetime.fromisoformat(run["started_at"])
    assert before - timedelta(seconds=5) <= started <= datetime.now(UTC)
    header = _stored_header(service, run_id)
    assert header.model is not None and header.model.provider == protocol
    assert (header.tenant, header.principal) == ("optiverse", "agent-7")
    times = [datetime.fromisoformat(t["time"]) for t in transitions]
    assert all(started <= at <= datetime.now(UTC) for at in times)


def _stored_header(service: Service, run_id: str) -> Any:
    store = SqliteStore(service.db, read_only=True)
    try:
        return store.header(run_id)
    finally:
        store.close()


def test_the_providers_keys_appear_in_no_response_transition_store_or_log(
    service: Service,
) -> None:
    run_ids = [submit(service, live(f"{p}:fixture-read_only_success")) for p in KEYS]
    seen: list[str] = []
    with service.client() as client:
        for run_id in run_ids:
            service.wait_ended(run_id)
            seen.append(client.get(f"/v1/runs/{run_id}").text)
            seen.append(client.get(f"/v1/runs/{run_id}/transitions").text)
            seen.append(json.dumps(read_events(client, run_id)))
        seen += [client.get("/v1/runs").text, client.get("/openapi.json").text]
    stored = b"".join(p.read_bytes() for p in service.db.parent.rglob("*") if p.is_file())
    for key in KEYS.values():
        assert all(key not in text for text in seen)
        assert key.encode() not in stored  # store, world, config, serve.log
    assert "RUNNER_TEST_OPENAI_KEY" in (service.db.parent / "service.yaml").read_text()


def test_tenant_b_can_neither_read_stream_nor_cancel_tenant_as_live_run(service: Service) -> None:
    run_id = submit(service, live("openai:hotels-again", tools=["search_hotels"]))
    with service.client(B) as other:
        for path in ("", "/transitions", "/events"):
            response = other.get(f"/v1/runs/{run_id}{path}")
            assert response.status_code == 404 and response.json()["error"]["code"] == "no_run"
        assert other.post(f"/v1/runs/{run_id}/cancel").status_code == 404
        assert run_id not in {r["run_id"] for r in other.get("/v1/runs").json()["runs"]}
        own = other.post("/v1/runs", json=live()).json()["run_id"]
    assert service.wait_ended(own, key=B)["tenant"] == "othercorp"  # from B's key
    assert _stored_header(service, own).principal == "agent-9"
    with service.client() as client:
        assert client.get(f"/v1/runs/{own}").status_code == 404
        client.post(f"/v1/runs/{run_id}/cancel")
    service.wait_ended(run_id)


def test_cancel_ends_a_live_run_abstain_cancelled(service: Service) -> None:
    run_id = submit(service, live("anthropic:hotels-again", tools=["search_hotels"]))
    with service.client() as client:
        read_events(client, run_id, stop_after=2)  # it is going
        response = client.post(f"/v1/runs/{run_id}/cancel")
        assert response.status_code == 202, response.text
    run = service.wait_ended(run_id)
    assert (run["state"], run["reason"]) == ("abstain", "cancelled")
    assert run["model_steps"] < SEARCHES


@pytest.mark.parametrize(
    ("body", "key", "status", "code", "names"),
    [
        (live(tools=["search_flights", "book_flight"]), A, 422, "unknown_tool", "book_flight"),
        (live(tools=["lookup_hold"]), A, 422, "unknown_tool", "lookup_hold"),  # not offered
        (live(tools=["search_hotels", "search_hotels"]), A, 422, "duplicate_tool", "tools"),
        (live(tools=[]), A, 422, "invalid", "body.tools: List should have at least 1 item"),
        (live(tools="search_hotels"), A, 422, "invalid", "body.tools: Input should be a valid li"),
        (live(tools=[7]), A, 422, "invalid", "body.tools.0: Input should be a valid string"),
        (live("openai:gpt-unlisted"), A, 422, "unknown_model", "gpt-unlisted"),
        (live("mistral:large"), A, 422, "invalid", "body.model: String should match pattern"),
        (live("openai:"), A, 422, "invalid", "body.model"),
        (live(model=7), A, 422, "invalid", "body.model: Input should be a valid string"),
        (live(task=""), A, 422, "invalid", "body.task"),
        (live(task="   \n"), A, 422, "empty_task", "task"),
        (live(budget={"max_attempts": 21}), A, 422, "over_budget_ceiling", "max_attempts"),
        (live(budget={"max_seconds": 61}), A, 422, "over_budget_ceiling", "max_seconds"),
        (live(budget={"max_seconds": 10**12}), A, 422, "invalid_budget", "max_seconds"),
        (live(budget={"max_attempts": 0}), A, 422, "invalid_budget", "budget.max_attempts"),
        (live(budget={"max_attempts": -3}), A, 422, "invalid_budget", "budget.max_attempts"),
        (live(budget={"max_attempts": 2.5}), A, 422, "invalid_budget", "budget.max_attempts"),
        (live(budget={"max_retries": 3}), A, 422, "invalid_budget", "budget.max_retries"),
        (live(budget={"max_seconds": "soon"}), A, 422, "invalid_budget", "budget.max_seconds"),
        (live(budget={"max_seconds": "10"}), A, 422, "invalid_budget", "budget.max_seconds"),
        (live(budget={"max_seconds": True}), A, 422, "invalid_budget", "budget.max_seconds"),
        (live(budget={"max_tokens": 1e5}), A, 422, "invalid_budget", "budget.max_tokens"),
        (live(budget={"max_attempts": "3"}), A, 422, "invalid_budget", "budget.max_attempts"),
        (live(budget=[1]), A, 422, "invalid_budget", "body.budget"),
        (live(budget={"max_cost_usd": 1.0}), A, 422, "unpriced_model",
         "max_cost_usd: 1.0 needs a price for openai:fixture-read_only_success"),
        (live(tenant="othercorp"), A, 422, "invalid", "body.tenant: not taken from a body"),
        (live(principal={"id": "root", "scopes": ["*"]}), A, 422, "invalid", "body.principal"),
        (live(api_key="sk-from-the-body"), A, 422, "invalid", "body.api_key"),
        ({k: v for k, v in live().items() if k != "model"}, A, 422, "invalid",
         "body.model: Field required"),
        ({"model": "openai:hotels-again"}, A, 422, "invalid", "body.task: Field required"),
        ([live()], A, 422, "invalid", "a run is a JSON object"),
        ("a run", A, 422, "invalid", "a run is a JSON object"),  # JSON, but no object
        (live(), A_READ, 403, "forbidden", "role"),
        (live(), None, 401, "unauthorized", "Bearer"),
    ],
)  # fmt: skip
def test_a_bad_live_run_is_refused_with_the_one_error_shape_naming_its_problem(  # noqa: PLR0917
    service: Service, body: Any, key: str | None, status: int, code: str, names: str
) -> None:
    with service.client(key) as client:
        before = client.get("/v1/runs", headers={"Authorization": f"Bearer {A}"}).json()["total"]
        response = client.post("/v1/runs", json=body)
        after = client.get("/v1/runs", headers={"Authorization": f"Bearer {A}"}).json()["total"]
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error"}
    assert response.json()["error"]["code"] == code
    message = response.json()["error"]["message"]
    assert names in message, message
    assert "body.fixture" not in message and "LiveRun" not in message  # the body's own kind
    assert after == before  # nothing was run


def test_a_run_sent_as_text_is_refused_415_not_json(service: Service) -> None:
    with service.client() as client:
        response = client.post(
            "/v1/runs", content=json.dumps(live()), headers={"Content-Type": "text/plain"}
        )
    assert response.status_code == 415, response.text
    assert response.json()["error"]["code"] == "not_json"
    assert "application/json" in response.json()["error"]["message"]


def test_a_live_run_replays_identical_and_grades_from_its_store(
    service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    from runner.cli import main  # noqa: PLC0415  # beside the other CLI imports it would shadow

    run_id = submit(service, live("anthropic:fixture-read_only_success"))
    assert service.wait_ended(run_id)["state"] == "complete"
    capsys.readouterr()
    assert main(["replay", run_id, "--db", str(service.db), "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["identical"] is True, replayed
    assert main(["grade", "--stored", run_id, "--db", str(service.db), "--json"]) == 0
    graded = json.loads(capsys.readouterr().out)
    assert json.dumps(graded).count(run_id) >= 1
    store = SqliteStore(service.db, read_only=True)
    try:
        turns = store.turns(run_id)
    finally:
        store.close()
    assert len(turns) == 2 and all(turn.model_state is None for turn in turns)  # live replies


def test_a_run_waits_out_no_fake_time(service: Service) -> None:
    """The slow model's replies take real time, and the run's elapsed time is that time."""
    began = time.monotonic()
    budget = {"max_attempts": 15, "max_model_steps": 15, "max_seconds": 60}
    run_id = submit(service, live("openai:hotels-again", tools=["search_hotels"], budget=budget))
    run = service.wait_ended(run_id)
    took = time.monotonic() - began
    assert (run["state"], run["model_steps"]) == ("complete", SEARCHES + 1), run["reason"]
    assert SEARCHES * 0.3 <= run["elapsed_s"] <= took


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_live_hold_is_approved_through_the_api_and_the_model_goes_on_live(
    service: Service, llm: RecordedLLMServer, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from runner.cli import main  # noqa: PLC0415  # beside the other CLI imports it would shadow

    body = live(
        f"{protocol}:live-hold",
        task="Hold an accessible room at Shiba Park Hotel, Tokyo, 2027-04-02..06, for three.",
        tools=["search_hotels", "hold_room"],
    )
    run_id = submit(service, body)
    run = service.wait_ended(run_id)
    assert (run["state"], run["reason"], run["holds"]) == ("escalate", "approval_required", 0)
    pending = service.pending(run_id)
    assert len(pending) == 1 and pending[0]["tool"] == "hold_room"
    with service.client() as client:
        asked = len(llm.requests[(protocol, "live-hold")])
        decided = client.post(f"/v1/approvals/{pending[0]['approval_id']}/approve")
        assert decided.status_code == 200, decided.text
        deadline = time.monotonic() + 60
        while (continued := client.get(f"/v1/runs/{run_id}").json()["continued_as"]) is None:
            problem = client.get(f"/v1/runs/{run_id}").json()["continuation_error"]
            assert problem is None and time.monotonic() < deadline, problem
            time.sleep(0.05)
    final = service.wait_ended(continued)
    assert (final["state"], final["reason"], final["holds"]) == ("complete", "model_final", 1)
    assert final["answer"] == "Held a room at Shiba Park Hotel."  # the live model's last reply
    assert len(llm.requests[(protocol, "live-hold")]) == asked + 1  # asked once more, live
    commits = [t for t in final["transitions"] if t["tool"] == "hold_room"]
    assert len([t for t in commits if t["trigger"] == "classify"]) == 1
    started = datetime.fromisoformat(final["started_at"])
    assert abs(datetime.now(UTC) - started) < timedelta(minutes=2)  # the system clock
    capsys.readouterr()
    for stored in (run_id, continued):
        assert main(["replay", stored, "--db", str(service.db), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["identical"] is True


def test_live_runs_accepted_before_a_crash_go_on_live_after_the_restart(
    tmp_path: Path, llm: RecordedLLMServer
) -> None:
    settings = {**live_settings(tmp_path, llm.url), "workers": 1}
    slow = live(
        "openai:hotels-again",
        tools=["search_hotels"],
        budget={"max_attempts": SEARCHES + 2, "max_seconds": 60},
    )
    with serving(tmp_path, env=ENV, **settings) as first:
        cut_short = submit(first, slow)
        waiting = submit(first, live("anthropic:fixture-read_only_success"))
        with first.client() as client:
            read_events(client, cut_short, stop_after=4)  # searching; the other waits its turn
            assert client.get(f"/v1/runs/{waiting}").json()["status"] == "queued"
        first.process.kill()
        first.process.wait(10)
    with serving(tmp_path, env=ENV, **settings) as second:
        resumed, started = second.wait_ended(cut_short), second.wait_ended(waiting)
    assert (resumed["state"], resumed["answer"]) == ("complete", "Shiba Park Hotel."), resumed[
        "reason"
    ]
    assert (started["state"], started["reason"]) == ("complete", "model_final")
    seqs = [t["seq"] for t in resumed["transitions"]]
    assert seqs == list(range(1, len(seqs) + 1))
    searches = [t for t in resumed["transitions"] if t["trigger"] == "classify"]
    assert len(searches) == SEARCHES  # each search made once, across the two processes
    for run_id in (cut_short, waiting):
        header = _stored_header(second, run_id)
        assert header.model is not None and header.model.live


def test_a_provider_whose_sdk_is_not_installed_is_refused_409_and_warned_of_at_start(
    tmp_path: Path, llm: RecordedLLMServer
) -> None:
    """`pip install 'runner-fsm[service]'` alone: the openai SDK missing (blocked in the service
    process by a sitecustomize), its runs are refused at submit, never accepted to fail at their
    start."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(
        "import sys\nsys.modules['openai'] = None  # as if not installed\n", encoding="utf-8"
    )
    path = os.pathsep.join(p for p in (str(shim), os.environ.get("PYTHONPATH")) if p)
    folder = tmp_path / "service"
    folder.mkdir()
    with serving(folder, env={**ENV, "PYTHONPATH": path}, **live_settings(folder, llm.url)) as svc:
        with svc.client() as client:
            refused = client.post("/v1/runs", json=live("openai:fixture-read_only_success"))
            assert refused.status_code == 409, refused.text
            assert refused.json()["error"]["code"] == "no_model_sdk"
            assert "pip install 'runner-fsm[service,openai]'" in refused.json()["error"]["message"]
            assert client.get("/v1/runs").json()["total"] == 0  # nothing accepted
        run_id = submit(svc, live("anthropic:fixture-read_only_success"))  # its SDK is there
        assert svc.wait_ended(run_id)["state"] == "complete"
    logged = (folder / "serve.log").read_text()
    assert "its SDK is not installed" in logged and "openai" in logged
    assert "anthropic" not in logged.split("its SDK is not installed")[1].splitlines()[0]
