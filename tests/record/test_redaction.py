"""Runtime credentials are redacted by value wherever they appear: in what the model sends, what a
tool answers, the store, the JSONL log, structlog events and spans; exact replay still holds."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import structlog

from runner.base.clock import FakeClock
from runner.base.tracing import REDACTED, ToolSpan
from runner.engine.engine import Engine
from runner.harness.fixtures import load_fixture
from runner.models.base import ModelRejected, ModelReply, TokenUsage
from runner.models.scripted import ScriptedModel, ScriptedTurn
from runner.proof.replay import Recording, describe, replay
from runner.record.redaction import Redactor
from runner.record.spec import RunSpec
from runner.store import FanoutStore, JsonlLog, SqliteStore
from runner.tools.contracts import ContractSet
from runner.tools.invocation import Principal, ToolInvocation, ToolResponse
from runner.tools.toolbox import FunctionTools
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES

SECRET = "tok-4f9a2c81e7d3"
STAY: dict[str, Any] = {
    "check_in": "2027-04-02",
    "check_out": "2027-04-06",
    "accessibility": "wheelchair",
    "guests": 4,
}


def test_the_redactor_replaces_every_occurrence_by_value_and_leaves_the_rest() -> None:
    redactor = Redactor([SECRET, "ab"])  # too short to redact safely: left alone
    value = {
        "plain": f"Bearer {SECRET}!",
        SECRET: [1, f"{SECRET}{SECRET}", None, 2.5, {"deep": (SECRET,)}],
        "ab": "ab",
    }
    assert redactor.value(value) == {
        "plain": f"Bearer {REDACTED}!",
        REDACTED: [1, f"{REDACTED}{REDACTED}", None, 2.5, {"deep": [REDACTED]}],
        "ab": "ab",
    }
    assert Redactor([]).value(value) is value  # no credentials: nothing to walk


class _Spans:
    def __init__(self) -> None:
        self.spans: list[ToolSpan] = []

    def tool_span(self, span: ToolSpan) -> None:
        self.spans.append(span)


def test_credentials_are_redacted_everywhere_and_the_run_replays_identical(
    tmp_path: Path, contracts: ContractSet
) -> None:
    received: list[ToolInvocation] = []

    async def search_hotels(invocation: ToolInvocation) -> ToolResponse:
        received.append(invocation)
        if len(received) == 2:
            raise ConnectionError(f"supplier refused credential {invocation.credentials['api']}")
        return ToolResponse(
            payload={
                "status": "ok",
                "source_timestamp": "2027-03-01T09:00:00Z",
                "options": [
                    {
                        "hotel_id": "H-1",
                        "name": f"echo {invocation.credentials['api']}",
                        "accessible_room_status": "reported_available",
                    }
                ],
            }
        )

    toolbox = FunctionTools()
    toolbox.register("search_hotels", search_hotels)
    script = [
        {"tool_calls": [{"name": "search_hotels", "args": {"city": f"Tokyo {SECRET}", **STAY}}]},
        {"tool_calls": [{"name": "search_hotels", "args": {"city": "Kyoto", **STAY}}]},
        {"tool_calls": [{"name": "search_hotels", "args": {"city": SECRET + "x" * 60, **STAY}}]},
        {"final": f"Done; the key was {SECRET}."},
    ]
    log = tmp_path / "runs.jsonl"
    store = FanoutStore(SqliteStore(tmp_path / "runs.sqlite"), JsonlLog(log))
    clock = FakeClock()
    sink = _Spans()
    engine = Engine(
        contracts=contracts,
        toolbox=toolbox,
        store=store,
        clock=clock,
        spans=[sink],
    )
    spec = RunSpec(
        task="Find an accessible hotel in Tokyo.",
        tenant="optiverse",
        principal=Principal(id="agent-7", scopes=frozenset({"travel.read"})),
        tools=("search_hotels",),
        credentials={"api": SECRET},
        name="redaction",
        seed=0,  # the engine's rng below; a replay seeds its own from the header
    )
    structlog.reset_defaults()
    with structlog.testing.capture_logs() as events:
        result = engine.run_sync(spec, ScriptedModel([ScriptedTurn(**t) for t in script]))
    recording = Recording.from_store(store, result.run_id)
    store.close()

    assert result.terminal.value == "complete"
    # The credential never left through the model's arguments, and nothing kept it.
    assert received[0].arguments["city"] == f"Tokyo {REDACTED}"
    assert result.answer == f"Done; the key was {REDACTED}."
    assert [r.result_class for r in result.transitions if r.trigger == "classify"] == [
        "ok",
        "transient",
        "ok",
        "invalid_arguments",
    ]
    for path in tmp_path.iterdir():
        assert SECRET.encode() not in path.read_bytes(), path.name
    assert SECRET not in repr(events) and events
    assert sink.spans and SECRET not in repr(sink.spans)
    assert any(REDACTED in repr(span.arguments) for span in sink.spans)
    again = replay(recording, contracts)
    assert again.identical, describe(again)


def test_fixture_runs_still_replay_identical_with_their_credential(
    tmp_path: Path, contracts: ContractSet
) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    fixture = load_fixture(FIXTURES / "hold_timeout_after_commit.yaml", contracts)
    outcome = run_fixture(fixture, contracts, store, world_dir=tmp_path / "world")
    again = replay(Recording.from_store(store, outcome.result.run_id), contracts)
    store.close()
    assert outcome.passed and again.identical


class _LeakyProvider:
    """A provider whose error message quotes the credential (as some echo a bad API key)."""

    async def generate(self, transcript: Any, tools: Any, tool_choice: Any) -> Any:
        raise ModelRejected(f"invalid key {SECRET}", status=401)


def test_a_model_error_quoting_a_credential_is_redacted_and_replays(
    tmp_path: Path, contracts: ContractSet
) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    engine = Engine(contracts=contracts, toolbox=FunctionTools(), store=store, clock=FakeClock())
    spec = RunSpec(
        task="Find an accessible hotel in Tokyo.",
        tenant="optiverse",
        principal=Principal(id="agent-7", scopes=frozenset({"travel.read"})),
        tools=("search_hotels",),
        credentials={"api": SECRET},
        seed=0,
    )
    result = engine.run_sync(spec, _LeakyProvider())
    recording = Recording.from_store(store, result.run_id)
    store.close()
    assert result.reason == f"model_rejected: 401 invalid key {REDACTED}"
    assert SECRET.encode() not in (tmp_path / "runs.sqlite").read_bytes()
    again = replay(recording, contracts)
    assert again.identical, describe(again)


class _KeyEchoingModel:
    """A live adapter with its own key (`secrets`), whose endpoint echoes it in the answer."""

    secrets = (SECRET,)

    async def generate(self, transcript: Any, tools: Any, tool_choice: Any) -> ModelReply:
        usage = TokenUsage(input_tokens=1, output_tokens=1)
        return ModelReply(text=f"key {SECRET}", tool_calls=(), usage=usage, stop_reason="end_turn")


def test_a_started_run_redacts_the_models_key_as_an_awaited_run_does(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """`engine.start` (a handle) redacted only the spec's credentials, not the adapter's key."""
    clock = FakeClock()
    store = SqliteStore(tmp_path / "runs.sqlite")
    engine = Engine(contracts=contracts, toolbox=FunctionTools(), store=store, clock=clock)
    spec = RunSpec(
        task="Say hello.",
        tenant="optiverse",
        principal=Principal(id="agent-7", scopes=frozenset({"travel.read"})),
        tools=("search_hotels",),
    )

    async def both() -> tuple[str | None, str | None]:
        started = await engine.start(spec, _KeyEchoingModel()).result()
        awaited = await engine.run(spec, _KeyEchoingModel())
        return started.answer, awaited.answer

    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        answers = runner.run(both())
    store.close()
    assert answers == (f"key {REDACTED}", f"key {REDACTED}")
    assert SECRET.encode() not in (tmp_path / "runs.sqlite").read_bytes()
