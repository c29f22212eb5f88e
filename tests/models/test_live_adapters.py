"""The OpenAI and Anthropic adapters over real HTTP: the official SDKs talk to a loopback server
that answers from recorded exchanges (tests/data/llm), and checks what the adapters send."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from itertools import pairwise
from typing import Any

import pytest

from runner.harness.fixtures import Fixture, collect_fixture_paths, load_fixture
from runner.harness.scenario import ScenarioRun
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.live_adapters import PROTOCOLS, adapter, sent
from tests.support.llm_server import RecordedLLMServer
from tests.support.paths import FIXTURES
from tests.support.travel import make_fixture

pytestmark = pytest.mark.slow

EMPTY = {"status": "ok", "options": [], "source_timestamp": "2027-03-01T09:00:00Z"}


def play(protocol: str, server: RecordedLLMServer, model: str, contracts: ContractSet,
         fallback: str | None = None, **fixture: Any) -> ScenarioRun:  # fmt: skip
    chosen = adapter(protocol, server.url, model, fallback)
    return run_fixture(make_fixture(**fixture), contracts, MemoryStore(), model=chosen)


def classes(outcome: ScenarioRun) -> list[str | None]:
    return [r.result_class for r in outcome.result.transitions if r.trigger == "classify"]


def check_pairing(protocol: str, body: dict[str, Any]) -> None:
    """Every tool call answered once, right after it, in call order, by its id."""
    if protocol == "openai":
        messages = body["messages"]
        for index, message in enumerate(messages):
            ids = [c["id"] for c in message.get("tool_calls") or []]
            if ids:
                answers = [m["tool_call_id"] for m in messages[index + 1 : index + 1 + len(ids)]]
                assert answers == ids
        answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    else:
        blocks = [(m["role"], b) for m in body["messages"] for b in m["content"]]
        proposed = [b["id"] for r, b in blocks if b["type"] == "tool_use"]
        answered = [b["tool_use_id"] for r, b in blocks if b["type"] == "tool_result"]
        assert answered == proposed[: len(answered)]
        roles = [m["role"] for m in body["messages"]]
        assert all(a != b for a, b in pairwise(roles))  # roles alternate
    assert len(answered) == len(set(answered))  # no duplicated results


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tool_calls_round_trip(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play(protocol, server, "tool_calls", contracts)
    assert outcome.result.terminal.value == "complete" and classes(outcome) == ["ok"]
    requests = sent(server, protocol, "tool_calls")
    assert len(requests) == 2
    first, second = requests
    choice = first["tool_choice"]
    assert choice in ("auto", {"type": "auto"})
    assert [t.get("name") or t["function"]["name"] for t in first["tools"]] == ["search_flights"]
    check_pairing(protocol, second)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_parallel_calls_are_answered_in_call_order(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    environment = {"search_flights": [
        {"latency_s": 2, "respond": EMPTY},
        {"respond": EMPTY},
    ]}  # fmt: skip
    outcome = play(protocol, server, "parallel_calls", contracts, environment=environment)
    assert classes(outcome) == ["empty", "empty"]
    final = sent(server, protocol, "parallel_calls")[-1]
    check_pairing(protocol, final)
    text = json.dumps(final)
    assert text.index('"c1"') < text.rindex('"c2"')


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_invalid_json_arguments_become_a_typed_error(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play(protocol, server, "invalid_json_args", contracts)
    assert classes(outcome) == ["invalid_arguments"]
    assert "not a JSON object" in (outcome.result.transitions[1].reason or "")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_invented_tool_is_unknown(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    assert classes(play(protocol, server, "invented_tool", contracts)) == ["unknown_tool"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_429_waits_its_retry_after_in_the_runner_not_the_sdk(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play(protocol, server, "rate_limited", contracts)
    assert outcome.result.terminal.value == "complete"
    assert outcome.result.waits_s == [2.0]
    assert len(sent(server, protocol, "rate_limited")) == 3  # 429, then two answers: no SDK retry


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_500_is_retried_once_by_the_policy(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play(protocol, server, "server_error", contracts)
    assert outcome.result.terminal.value == "complete"
    assert len(sent(server, protocol, "server_error")) == 2 and len(outcome.result.waits_s) == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_refusal_ends_the_run_with_that_reason(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play(protocol, server, "refusal", contracts)
    assert (outcome.result.terminal.value, outcome.result.reason) == ("abstain", "model_refused")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_401_is_not_retried(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play(protocol, server, "unauthorized", contracts)
    assert outcome.result.terminal.value == "abstain"
    assert outcome.result.reason.startswith("model_rejected: 401")
    assert len(sent(server, protocol, "unauthorized")) == 1
    assert "test-key" not in json.dumps([r.to_json() for r in outcome.result.transitions])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_503_falls_back_to_the_same_family_model(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play(protocol, server, "primary", contracts, fallback="secondary")
    assert outcome.result.terminal.value == "complete"
    assert len(sent(server, protocol, "primary")) == 3  # first try + max_retries (2)
    assert len(sent(server, protocol, "secondary")) == 1


PATHS = collect_fixture_paths([FIXTURES])


def _on_real_time(fixture: Fixture) -> Fixture:
    """A live run keeps real time, so a Retry-After HTTP-date written for the fixture's own clock
    is moved to the same distance from now (it still asks for a wait past the deadline)."""
    if fixture.name != "retry_after_past_deadline":
        return fixture
    document = json.dumps(fixture.model_dump(mode="json", exclude_unset=True))
    written = "Mon, 01 Mar 2027 09:05:00 GMT"
    assert written in document
    distance = parsedate_to_datetime(written) - fixture.clock.start
    moved = format_datetime(datetime.now(UTC) + distance, usegmt=True)
    return Fixture.model_validate(json.loads(document.replace(written, moved)))


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_fixture_end_to_end_through_the_adapter(
    protocol: str, path: Any, server: RecordedLLMServer, contracts: ContractSet, tmp_path: Any
) -> None:
    fixture = _on_real_time(load_fixture(path, contracts))
    model = f"fixture-{fixture.name}"
    chosen = adapter(protocol, server.url, model)
    outcome = run_fixture(fixture, contracts, MemoryStore(), model=chosen, world_dir=tmp_path)
    assert outcome.result.terminal.value in {"complete", "abstain", "escalate", "unknown"}
    assert outcome.failures == []
    requests = sent(server, protocol, model)
    assert len(requests) == outcome.result.model_steps  # one HTTP request per model step
    for body in requests:
        check_pairing(protocol, body)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cli_plans_with_a_live_model(
    protocol: str, server: RecordedLLMServer, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from runner.cli import main  # noqa: PLC0415  # beside the other CLI imports it would shadow

    url = f"{server.url}/v1" if protocol == "openai" else server.url
    args = [
        "run",
        str(FIXTURES / "read_only_success.yaml"),
        "--json",
        "--db",
        str(tmp_path / "r.db"),
    ]
    model = f"{protocol}:fixture-read_only_success"
    assert main([*args, "--model", model, "--base-url", url]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["terminal"] == "complete" and run["expect"]["passed"] is True


def test_a_missing_key_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    from runner.cli import main  # noqa: PLC0415

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = ["run", str(FIXTURES / "read_only_success.yaml"), "--db", str(tmp_path / "r.db")]
    assert main([*args, "--model", "openai:gpt-x"]) == 2
    assert "OPENAI_API_KEY is not set" in capsys.readouterr().err
