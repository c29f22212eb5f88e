"""The service over real HTTP: `runner serve` (uvicorn) on a loopback port, a SQLite store.

One server for the module (its runs pace 0.05 s per transition, so a cancel can land midway);
each test submits its own runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.cli import main
from runner.store import SqliteStore
from tests.support.paths import ROOT
from tests.support.service_harness import (
    A_READ,
    LONG,
    A,
    B,
    Service,
    loopback,
    read_events,
    serving,
)

__all__ = ["loopback"]

pytestmark = pytest.mark.usefixtures("loopback")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with serving(tmp_path_factory.mktemp("service"), pace_s=0.05, max_body_bytes=2048) as running:
        yield running


def test_a_fixture_run_goes_from_post_to_complete(service: Service) -> None:
    run_id = service.submit("read_only_success")
    run = service.wait_ended(run_id)
    assert (run["status"], run["state"], run["terminal"], run["reason"]) == (
        "ended",
        "complete",
        "complete",
        "model_final",
    )
    assert run["tenant"] == "optiverse"
    with service.client() as client:
        page = client.get(f"/v1/runs/{run_id}/transitions", params={"limit": 2}).json()
        rest = client.get(
            f"/v1/runs/{run_id}/transitions", params={"after": page["next_after"]}
        ).json()
        listed = client.get("/v1/runs").json()
    seqs = [t["seq"] for t in page["transitions"] + rest["transitions"]]
    assert len(page["transitions"]) == 2 and seqs == sorted(set(seqs))
    assert rest["transitions"][-1]["to"] == "complete"
    assert run_id in {item["run_id"] for item in listed["runs"]}
    stored = SqliteStore(service.db, read_only=True)  # what the API says is what is stored
    try:
        assert [r.seq for r in stored.transitions(run_id)] == seqs
    finally:
        stored.close()


def test_a_run_read_through_the_api_is_what_runner_show_json_prints(
    service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    """`GET /v1/runs/ID` is `runner show --json`'s object plus the service's own keys."""
    run_id = service.submit("read_only_success")
    served = service.wait_ended(run_id)
    assert main(["show", run_id, "--db", str(service.db), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in served.items() if k in shown and k != "holds"} == {
        k: v for k, v in shown.items() if k != "holds"
    }
    assert served["started_as"]["durability"] == "transition"
    assert len(served["context"]["max_output_tokens_per_step"]) == served["model_steps"]


def test_every_bundled_fixture_can_be_named_json_ones_too(service: Service) -> None:
    """The fixtures a run may name are those `runner run FOLDER` reads in each bundled folder,
    the injection fixtures (JSON) included, and the config's own (`long_search`); an injection
    fixture is run to its expected end."""
    with service.client() as client:
        listed = set(client.get("/v1/fixtures").json()["fixtures"])
    on_disk = {p.stem for p in (ROOT / "fixtures").rglob("*") if p.suffix in {".yaml", ".json"}}
    assert listed == on_disk | {LONG} and len(on_disk) == 51  # every name its own
    run = service.wait_ended(service.submit("budget_raised_in_result"))
    assert (run["state"], run["reason"]) == ("abstain", "attempts"), run


def test_the_events_stream_delivers_every_transition_in_order_and_resumes(
    service: Service,
) -> None:
    run_id = service.submit("transient_timeout_retry")
    with service.client() as client:
        first = read_events(client, run_id, stop_after=2)
        assert [event for event, _, _ in first] == ["transition", "transition"]
        resumed = read_events(client, run_id, last_event_id=first[-1][1])  # a reconnect
        stored = client.get(f"/v1/runs/{run_id}/transitions", params={"limit": 1000}).json()
    events = first + resumed
    assert events[-1][0] == "end" and events[-1][2]["terminal"] == "complete"
    seqs = [data["seq"] for event, _, data in events if event == "transition"]
    assert seqs == [t["seq"] for t in stored["transitions"]]  # all, in order, none twice
    assert [ident for event, ident, _ in events if event == "transition"] == [str(s) for s in seqs]
    assert events[-1][1] == str(seqs[-1])  # the end carries the last seq
    with service.client() as client:  # a reconnect from past the end, or from the very end
        past = read_events(client, run_id, last_event_id=str(seqs[-1] + 50))
        at_end = read_events(client, run_id, last_event_id=str(seqs[-1]))
    assert [(event, ident) for event, ident, _ in past + at_end] == [("end", str(seqs[-1]))] * 2


def test_a_hold_needing_approval_is_approved_through_the_api_and_commits_once(
    service: Service,
) -> None:
    run_id = service.submit("hold_approved")
    run = service.wait_ended(run_id)
    assert (run["state"], run["reason"], run["holds"]) == ("escalate", "approval_required", 0)
    pending = service.pending(run_id)
    assert len(pending) == 1 and pending[0]["tool"] == "hold_room"
    approval_id = pending[0]["approval_id"]
    with service.client(A_READ) as reader:
        refused = reader.post(f"/v1/approvals/{approval_id}/approve")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    with service.client() as client:
        decided = client.post(f"/v1/approvals/{approval_id}/approve", json={"note": "ok"})
        assert decided.status_code == 200, decided.text
        assert decided.json() == {
            "approval_id": approval_id,
            "run_id": run_id,
            "verdict": "approved",
            "approver": "agent-7",  # the key's principal, never the body's
        }
        again = client.post(f"/v1/approvals/{approval_id}/approve")
        assert again.status_code == 409 and again.json()["error"]["code"] == "decided"
        deadline = time.monotonic() + 60
        while (continued := client.get(f"/v1/runs/{run_id}").json()["continued_as"]) is None:
            assert time.monotonic() < deadline, "the approved run was never continued"
            time.sleep(0.05)
    final = service.wait_ended(continued)
    assert (final["state"], final["reason"], final["holds"]) == ("complete", "model_final", 1)
    assert final["continues"] == run_id
    commits = [
        t for t in final["transitions"] if t["tool"] == "hold_room" and t["trigger"] == "classify"
    ]
    assert len(commits) == 1  # sent once, under the proposed key
    with service.client() as client:
        assert approval_id not in {
            p["approval_id"] for p in client.get("/v1/approvals").json()["approvals"]
        }


def test_cancel_ends_the_run_abstain_cancelled(service: Service) -> None:
    run_id = service.submit(LONG)
    with service.client() as client:
        read_events(client, run_id, stop_after=1)  # it is going
        response = client.post(f"/v1/runs/{run_id}/cancel")
        assert response.status_code == 202, response.text
        assert response.json() == {"run_id": run_id, "cancel_requested": True}
    run = service.wait_ended(run_id)
    assert (run["state"], run["reason"]) == ("abstain", "cancelled")
    assert run["model_steps"] < 13  # it stopped before its script's end
    with service.client() as client:
        again = client.post(f"/v1/runs/{run_id}/cancel")
    assert again.status_code == 409 and again.json()["error"]["code"] == "ended"


def test_tenant_b_can_neither_read_stream_cancel_nor_approve_tenant_as_runs(
    service: Service,
) -> None:
    waiting = service.submit("hold_approved")
    service.wait_ended(waiting)
    with service.client() as client:
        approval = next(
            p["approval_id"]
            for p in client.get("/v1/approvals").json()["approvals"]
            if p["run_id"] == waiting
        )
    missing = "00000000-0000-0000-0000-000000000000"
    with service.client(B) as other:
        for path in ("", "/transitions", "/events"):
            theirs, nobodys = (
                other.get(f"/v1/runs/{waiting}{path}"),
                other.get(f"/v1/runs/{missing}{path}"),
            )
            assert theirs.status_code == nobodys.status_code == 404
            assert theirs.json()["error"]["code"] == nobodys.json()["error"]["code"] == "no_run"
        assert other.post(f"/v1/runs/{waiting}/cancel").status_code == 404
        for verb in ("approve", "deny"):
            refused = other.post(f"/v1/approvals/{approval}/{verb}")
            assert refused.status_code == 404 and refused.json()["error"]["code"] == "no_approval"
        assert waiting not in {r["run_id"] for r in other.get("/v1/runs").json()["runs"]}
        assert other.get("/v1/approvals").json()["approvals"] == []
        own = other.post("/v1/runs", json={"fixture": "read_only_success"}).json()["run_id"]
    assert service.wait_ended(own, key=B)["tenant"] == "othercorp"  # from the key, not the fixture
    with service.client() as client:
        assert client.get(f"/v1/runs/{own}").status_code == 404
        still = client.get("/v1/approvals").json()["approvals"]
    assert approval in {p["approval_id"] for p in still}  # B's attempts decided nothing


@pytest.mark.parametrize(
    ("method", "path", "key", "body", "status", "code"),
    [
        ("GET", "/v1/runs", None, None, 401, "unauthorized"),
        ("GET", "/v1/runs", "not-a-configured-key", None, 401, "unauthorized"),
        ("POST", "/v1/runs", A_READ, {"fixture": "read_only_success"}, 403, "forbidden"),
        ("POST", "/v1/runs", A, {"fixture": "no_such_fixture"}, 404, "no_fixture"),
        ("POST", "/v1/runs", A, b"{not json", 400, "bad_json"),
        ("POST", "/v1/runs", A, {"fixture": 7}, 422, "invalid"),
        ("POST", "/v1/runs", A, {"fixture": "x", "tenant": "evil"}, 422, "invalid"),
        ("POST", "/v1/runs", A, {"task": "t", "tools": ["x"], "model": "openai:m"}, 422,
         "live_runs_unavailable"),
        ("POST", "/v1/runs", A, b'{"fixture": "' + b"x" * 4096 + b'"}', 413, "too_large"),
        ("GET", "/v1/runs?limit=0", A, None, 422, "invalid"),
        ("GET", "/v1/nowhere", A, None, 404, "not_found"),
        ("DELETE", "/v1/runs", A, None, 405, "method_not_allowed"),
        ("POST", "/v1/approvals/nonsense/approve", A, None, 404, "no_approval"),
        ("GET", "/v1/runs/bad%20id", A, None, 422, "invalid"),
    ],
)  # fmt: skip
def test_errors_have_one_shape_and_the_right_status(  # noqa: PLR0917
    service: Service,
    method: str,
    path: str,
    key: str | None,
    body: dict[str, object] | bytes | None,
    status: int,
    code: str,
) -> None:
    with service.client(key) as client:
        if isinstance(body, bytes):
            response = client.request(
                method, path, content=body, headers={"Content-Type": "application/json"}
            )
        else:
            response = client.request(method, path, json=body)
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error"}
    assert response.json()["error"]["code"] == code
    assert isinstance(response.json()["error"]["message"], str)


@pytest.mark.parametrize(
    "sent",
    ["seven", "9223372036854775808", "18446744073709551616", "99999999999999999999",
     "1000000001", "-2", "1.5", "+3", "0x10"],
)  # fmt: skip
def test_a_last_event_id_that_is_no_seq_within_the_bound_is_400_in_the_one_shape(
    service: Service, sent: str
) -> None:
    """Over `?after=`'s bound (10^9), or not a whole number: refused as `?after=` is, never a
    500 (a value past 2^63 reached SQLite as an integer it cannot hold)."""
    run_id = service.submit("read_only_success")
    with service.client() as client:
        response = client.get(f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": sent})
    assert response.status_code == 400, response.text
    assert set(response.json()) == {"error"}
    assert response.json()["error"]["code"] == "bad_last_event_id"
    assert "1000000000" in response.json()["error"]["message"]


def test_a_last_event_id_at_the_bound_past_the_run_s_end_streams_on_from_there(
    service: Service,
) -> None:
    """Within the bound but past the last transition: the stream goes on from there (what a
    reconnecting client relies on), ending with the run's last seq."""
    run_id = service.submit("read_only_success")
    last = service.wait_ended(run_id)["transitions"][-1]["seq"]
    with service.client() as client:
        events = read_events(client, run_id, last_event_id="1000000000")
        from_start = read_events(client, run_id, last_event_id="-1")
    assert [(event, ident) for event, ident, _ in events] == [("end", str(last))]
    assert [ident for _, ident, _ in from_start] == [str(s) for s in range(1, last + 1)] + [
        str(last)
    ]


def test_the_openapi_document_says_what_last_event_id_may_be(service: Service) -> None:
    with service.client() as client:
        document = client.get("/openapi.json").json()
    operation = document["paths"]["/v1/runs/{run_id}/events"]["get"]
    (header,) = [p for p in operation["parameters"] if p["in"] == "header"]
    assert header["name"] == "last-event-id" and "1000000000" in header["description"]
    refused = operation["responses"]["400"]
    assert "Last-Event-ID" in refused["description"]
    assert refused["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorBody"
    }


def test_a_full_queue_is_429(tmp_path: Path) -> None:
    with serving(tmp_path, workers=1, max_queued=1, pace_s=0.2) as small:
        codes = []
        with small.client() as client:
            for _ in range(4):
                codes.append(client.post("/v1/runs", json={"fixture": "read_only_success"}))
        statuses = [r.status_code for r in codes]
        assert statuses[0] == 202 and 429 in statuses
        refused = next(r for r in codes if r.status_code == 429)
        assert refused.json()["error"]["code"] == "queue_full"
        accepted = [r.json()["run_id"] for r in codes if r.status_code == 202]
        assert all(small.wait_ended(run)["state"] == "complete" for run in accepted)
        with small.client() as client:
            assert client.get("/v1/runs").json()["total"] == len(accepted)  # none of the refused


def test_the_sample_config_loads_and_keys_map_to_tenants() -> None:
    from runner.service import ServiceConfig  # noqa: PLC0415

    config = ServiceConfig.load(ROOT / "examples" / "service.yaml")
    key = config.key_for("change-me-optiverse")
    assert key is not None and (key.tenant, key.principal.id) == ("optiverse", "agent-7")
    assert config.key_for("change-me") is None
    assert "change-me-optiverse" not in repr(config)  # keys never shown


def test_a_chunked_body_over_the_limit_is_413_and_one_under_it_is_served(
    service: Service,
) -> None:
    def oversized() -> Iterator[bytes]:  # no Content-Length: sent chunked
        yield b'{"fixture": "'
        yield from (b"x" * 500 for _ in range(10))
        yield b'"}'

    headers = {"Content-Type": "application/json"}
    with service.client() as client:
        refused = client.post("/v1/runs", content=oversized(), headers=headers)
        served = client.post(
            "/v1/runs", content=iter([b'{"fixture": "read_only_success"}']), headers=headers
        )
    assert refused.status_code == 413 and refused.json()["error"]["code"] == "too_large"
    assert served.status_code == 202
    assert service.wait_ended(served.json()["run_id"])["state"] == "complete"


def test_the_openapi_document_describes_where_a_run_s_continuation_stands(
    service: Service,
) -> None:
    with service.client() as client:
        document = client.get("/openapi.json").json()
    answer = document["paths"]["/v1/runs/{run_id}"]["get"]["responses"]["200"]
    assert answer["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/RunDetail"
    }
    schemas = document["components"]["schemas"]
    detail = schemas["RunDetail"]
    assert detail["additionalProperties"] is True  # the rest of `runner show --json`
    assert {"continuation", "continuation_error", "continued_as"} <= set(detail["properties"])
    assert detail["properties"]["continuation"]["anyOf"] == [
        {"$ref": "#/components/schemas/Continuation"},
        {"type": "null"},
    ]
    state = schemas["Continuation"]["properties"]["state"]
    assert set(state["enum"]) == {"waiting", "queued", "running", "ended", "failed"}
    assert set(schemas["Continuation"]["required"]) == {"state", "waiting_for", "run_id"}
