"""Usage too small to be true is not believed: a provider that reports 0/0 (or one token) for a
long reply would otherwise carry a run past its token and money caps with a record saying they
held. The runner estimates such counts (`usage_estimated`), so the bounds hold."""

from __future__ import annotations

from pathlib import Path

from runner import SqliteStore
from runner.core.budget import Bound
from runner.models.base import ModelReply, TokenUsage, ToolCall
from runner.models.openai import OpenAIChatModel
from runner.models.transcript import Transcript, UserMessage
from runner.proof.api import grade_run_sync, replay_run_sync
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.llm_recordings import ok
from tests.support.llm_server import RecordedLLMServer
from tests.support.travel import make_fixture

LONG = "word " * 10_000  # 50,000 characters: about 12,500 tokens at four a token


def _reply(text: str, tokens_in: int, tokens_out: int) -> ModelReply:
    usage = TokenUsage(input_tokens=tokens_in, output_tokens=tokens_out)
    return ModelReply(text=text, tool_calls=(), usage=usage, stop_reason="end_turn")


def test_a_long_reply_reported_as_no_tokens_stops_at_the_caps(
    server: RecordedLLMServer, contracts: ContractSet, tmp_path: Path
) -> None:
    server.serve("openai", "gpt-4o-mini", ok("openai", "gpt-4o-mini", _reply(LONG, 0, 0)))
    adapter = OpenAIChatModel("gpt-4o-mini", base_url=f"{server.url}/v1", api_key="k")
    fixture = make_fixture(
        budget={"max_tokens": 2000, "max_cost_usd": 0.05},
        price={"input_usd_per_mtok": 10, "output_usd_per_mtok": 30},
    )
    store = SqliteStore(tmp_path / "runs.db")
    result = run_fixture(fixture, contracts, store, model=adapter).result
    assert result.terminal.value == "abstain", (result.terminal, result.reason)
    assert result.reason in {Bound.TOKENS.value, Bound.COST.value}
    assert result.tokens_out > 2000  # counted as estimated, not the 0 reported
    [turn] = store.turns(result.run_id)
    assert turn.usage_estimated and turn.output_tokens >= len(LONG) // 64
    replayed = replay_run_sync(store, result.run_id, contracts)
    assert replayed.identical, replayed.divergence
    # The provider sent far past the output limit it was asked for (what the money left): the
    # runner cannot unsend that, so the record keeps the true cost and grading says so.
    assert result.cost_usd is not None and result.cost_usd > 0.05
    trial = grade_run_sync(store, result.run_id, contracts)
    assert [check.name for check in trial.failed] == ["cost_within_cap"], trial.failed


def test_which_counts_are_believed() -> None:
    from runner.models._usage import MAX_CHARS_PER_TOKEN, accounted  # noqa: PLC0415

    transcript = Transcript()
    transcript.append(UserMessage(text="Find flights SFO to NRT."))
    call = ToolCall(id="c1", name="search_flights", arguments={"origin": "SFO"})

    def estimated(reply: ModelReply) -> bool:
        return accounted(reply, transcript).usage.estimated

    assert not estimated(_reply("hello", 10, 2))
    assert not estimated(_reply("", 10, 0))  # nothing said: no token needed
    assert estimated(_reply("x" * (MAX_CHARS_PER_TOKEN + 1), 10, 1))
    assert not estimated(_reply("x" * MAX_CHARS_PER_TOKEN, 10, 1))
    with_call = ModelReply(text="", tool_calls=(call,), usage=TokenUsage(input_tokens=10,
                           output_tokens=0), stop_reason="tool_use")  # fmt: skip
    assert estimated(with_call)
    assert estimated(_reply("hello", 0, 2))  # a request that sent a task used input tokens
    assert not accounted(_reply("hello", 0, 2), Transcript()).usage.estimated
