import asyncio

from runner.models.scripted import ScriptedModel, ScriptedTurn
from runner.models.transcript import ToolResultMessage, Transcript


def turns(*raw: dict[str, object]) -> list[ScriptedTurn]:
    return [ScriptedTurn.model_validate(t) for t in raw]


def ask(model: ScriptedModel, transcript: Transcript, choice: str = "auto"):  # type: ignore[no-untyped-def]
    return asyncio.run(model.generate(transcript, (), choice))  # type: ignore[arg-type]


def test_turns_play_in_order_with_generated_ids() -> None:
    model = ScriptedModel(
        turns({"tool_calls": [{"name": "a"}, {"name": "b", "id": "mine"}]}, {"final": "done"})
    )
    first = ask(model, Transcript())
    assert [c.id for c in first.tool_calls] == ["call_1_0", "mine"]
    assert ask(model, Transcript()).text == "done"


def test_when_skips_turns_that_do_not_match() -> None:
    model = ScriptedModel(
        turns(
            {"when": "invalid_arguments", "tool_calls": [{"name": "fix"}]},
            {"final": "fine"},
        )
    )
    transcript = Transcript()
    transcript.append(
        ToolResultMessage(call_id="c", tool="t", result_class="ok", content="{}", is_error=False)
    )
    assert ask(model, transcript).text == "fine"


def test_when_plays_a_matching_turn() -> None:
    model = ScriptedModel(
        turns({"when": ["rate_limited", "invalid_arguments"], "tool_calls": [{"name": "fix"}]})
    )
    transcript = Transcript()
    transcript.append(
        ToolResultMessage(
            call_id="c", tool="t", result_class="invalid_arguments", content="{}", is_error=True
        )
    )
    assert ask(model, transcript).tool_calls[0].name == "fix"


def test_tool_choice_none_skips_to_the_next_final() -> None:
    model = ScriptedModel(turns({"tool_calls": [{"name": "a"}]}, {"final": "partial"}))
    reply = ask(model, Transcript(), "none")
    assert reply.text == "partial" and reply.tool_calls == ()


def test_exhausted_script_says_so() -> None:
    reply = ask(ScriptedModel(turns({"final": "x"})), Transcript(), "none")
    assert ask(ScriptedModel([]), Transcript()).stop_reason == "script_exhausted"
    assert reply.text == "x"


def test_stated_usage_wins_over_the_estimate() -> None:
    model = ScriptedModel(turns({"final": "x", "usage": {"input": 11, "output": 3}}))
    reply = ask(model, Transcript())
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (11, 3)


def test_a_fixed_turn_plays_one_reply_built_once() -> None:
    """A turn that states its usage and every call's id plays the same (frozen) reply in every
    run; a turn whose ids come from the step is built per run, numbered by that run's step."""
    usage = {"input": 7, "output": 2}
    script = turns(
        {"tool_calls": [{"name": "a", "id": "c1", "args": {"q": 1}}], "usage": usage},
        {"tool_calls": [{"name": "b"}], "usage": usage},
        {"final": "done", "usage": {"input": 9, "output": 1}},
    )
    first, second = ScriptedModel(script), ScriptedModel(script)
    replies = [ask(first, Transcript()) for _ in range(3)]
    again = [ask(second, Transcript()) for _ in range(3)]
    assert replies[0] is again[0] and replies[2] is again[2]
    assert replies[0].tool_calls[0].arguments == {"q": 1}
    assert (replies[0].usage.input_tokens, replies[0].stop_reason) == (7, "tool_use")
    assert replies[1].tool_calls[0].id == "call_2_0" and replies[1] is not again[1]
    assert (replies[2].text, replies[2].stop_reason, replies[2].usage.output_tokens) == (
        "done",
        "end_turn",
        1,
    )
    assert script[0] == ScriptedTurn.model_validate(script[0].model_dump())  # not a field
    assert script[2].model_copy(update={"final": "other"}).fixed_reply.text == "other"  # type: ignore[union-attr]
    assert script[2].model_copy().fixed_reply is replies[2]
