"""Typed records (issue 10, item 4): a recorded model turn keeps everything a `ModelReply` has."""

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.models.base import ModelReply, TokenUsage, ToolCall
from runner.recording import TURN_ADAPTER, RecordedTurn

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
