"""Typed records (issue 10, item 4): a recorded model turn keeps everything a `ModelReply` has;
transition records keep enums, in memory and read back from SQLite and the JSONL log."""

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.core.machine import Decision, Trigger
from runner.core.result_classes import CLASSES
from runner.core.states import State
from runner.harness.fixtures import load_fixture
from runner.models.base import ModelReply, TokenUsage, ToolCall
from runner.record.recording import TURN_ADAPTER, RecordedTurn
from runner.record.trace import TransitionRecord, read_log
from runner.store.fanout import FanoutStore
from runner.store.jsonl import JsonlLog
from runner.store.sqlite import SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES

_text = st.text(max_size=20)
_calls = st.lists(
    st.builds(
        ToolCall,
        id=_text,
        name=_text,
        arguments=st.dictionaries(_text, st.integers() | _text, max_size=3),
        arguments_error=st.none() | _text,
    ),
    max_size=3,
)
_replies = st.builds(
    ModelReply,
    text=_text,
    tool_calls=_calls.map(tuple),
    usage=st.builds(
        TokenUsage,
        input_tokens=st.integers(0, 10**6),
        output_tokens=st.integers(0, 10**6),
        estimated=st.booleans(),
    ),
    stop_reason=st.sampled_from(["tool_use", "end_turn", "max_tokens", "refusal", "malformed"]),
)


@settings(max_examples=100)
@given(reply=_replies)
def test_a_recorded_turn_gives_back_the_reply_it_recorded(reply: ModelReply) -> None:
    turn = RecordedTurn.of(
        run_id="r",
        ordinal=1,
        tool_choice="auto",
        reply=reply,
        started_at=0.0,
        ended_at=1.0,
        transcript_digest="d",
        model_state=None,
    )
    assert turn.reply() == reply
    stored = TURN_ADAPTER.validate_python(TURN_ADAPTER.dump_python(turn, mode="json"))
    assert stored.reply() == reply  # and so does the turn read back from a store or a log


def _typed(records: list[TransitionRecord]) -> None:
    assert records
    for record in records:
        assert isinstance(record.from_state, State) and isinstance(record.to_state, State)
        assert isinstance(record.trigger, Trigger)
        assert record.decision is None or isinstance(record.decision, Decision)
        assert record.result_class is None or record.result_class in CLASSES


def test_transition_records_keep_enums_in_the_run_the_store_and_the_log(
    tmp_path: Path, contracts: ContractSet
) -> None:
    fixture = load_fixture(FIXTURES / "hold_not_committed.yaml", contracts)
    sqlite = SqliteStore(tmp_path / "runs.sqlite")
    log = JsonlLog(tmp_path / "runs.jsonl")
    result = run_fixture(fixture, contracts, FanoutStore(sqlite, log)).result
    log.close()
    _typed(result.transitions)
    stored = sqlite.transitions(result.run_id)
    _typed(stored)
    (logged,) = read_log(tmp_path / "runs.jsonl")
    _typed(logged.transitions)
    assert stored == logged.transitions == result.transitions
    # Stored as their string values: a log line reads as it always did.
    lines = [json.loads(t) for t in (tmp_path / "runs.jsonl").read_text().splitlines()]
    line = next(item for item in lines if item.get("type") == "transition")
    assert line["trigger"] == "propose" and line["from"] == "plan"
