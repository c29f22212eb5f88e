"""The output-token limit of each model request: what is left of the token and money budgets
after the request's projected input, told to the adapter, so a long reply cannot carry a run
past its caps; a reply the limit cuts off ends the run on that bound."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner import Limits, MemoryStore, SqliteStore
from runner.engine.effects import takes_output_limit
from runner.models.base import ModelReply, TokenUsage
from runner.models.scripted import ScriptedModel, ScriptedTurn
from runner.models.transcript import Transcript
from runner.proof.api import replay_run_sync
from runner.record.spec import RunResult
from runner.testing import FunctionModel
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.travel import FLIGHT_ARGS, FLIGHTS_OK, make_fixture

SEARCH = {"name": "search_flights", "args": FLIGHT_ARGS}
EMPTY = {"status": "ok", "options": [], "source_timestamp": "2027-03-01T09:00:00Z"}
WORDS = "Nothing is confirmed for the family; NH7 reported assistance, HND was not checked. "


def _answer(chars: int) -> str:
    return (WORDS * (chars // len(WORDS) + 1))[:chars]


def test_a_scripted_reply_longer_than_the_limit_comes_back_cut_off() -> None:
    """Usage at the limit, stop reason `max_tokens`, the text up to it, no calls; a reply within
    the limit is the reply as scripted."""
    final = ScriptedTurn(final=_answer(400), usage={"input": 50, "output": 100})  # type: ignore[arg-type]
    calls = ScriptedTurn.model_validate({"tool_calls": [SEARCH]})
    model = ScriptedModel([calls, final])
    cut = asyncio.run(model.generate(Transcript(), (), "auto", max_output_tokens=0))
    assert (cut.tool_calls, cut.usage.output_tokens, cut.stop_reason) == ((), 0, "max_tokens")
    reply = asyncio.run(model.generate(Transcript(), (), "none", max_output_tokens=30))
    assert (reply.usage, reply.stop_reason) == (TokenUsage(input_tokens=50, output_tokens=30),
                                                "max_tokens")  # fmt: skip
    assert reply.text == _answer(120)
    whole = ScriptedModel([final])
    assert asyncio.run(whole.generate(Transcript(), (), "none", max_output_tokens=100)).text == (
        _answer(400)
    )


def test_an_adapter_written_without_the_limit_is_asked_without_it(
    contracts: ContractSet,
) -> None:
    """The runner passes `max_output_tokens` only to a `generate` that names it or takes any
    keyword: a user's adapter written against the three-argument protocol still runs."""

    class Plain:
        async def generate(self, transcript: Any, tools: Any, tool_choice: Any) -> ModelReply:
            raise AssertionError

    class Positional:
        async def generate(self, *args: Any) -> ModelReply:
            raise AssertionError

    class Keywords:
        async def generate(self, *args: Any, **kwargs: Any) -> ModelReply:
            raise AssertionError

    assert not takes_output_limit(Plain()) and not takes_output_limit(Positional())
    assert takes_output_limit(Keywords()) and takes_output_limit(ScriptedModel([]))
    assert not takes_output_limit(object())
    inner = FunctionModel(lambda transcript, tools: "NH7.")

    class ThreeArguments:  # an adapter written before the limit existed
        async def generate(self, transcript: Any, tools: Any, tool_choice: Any) -> ModelReply:
            return await inner.generate(transcript, tools, tool_choice)

    model = ThreeArguments()
    assert not takes_output_limit(model) and takes_output_limit(inner)
    result = run_fixture(make_fixture(), contracts, MemoryStore(), model=model).result
    assert result.terminal.value == "complete"
    assert inner.output_limits == [None]  # asked without it


def test_the_testing_kits_function_model_is_told_the_limit_and_cut_at_it(
    contracts: ContractSet,
) -> None:
    """`FunctionModel` takes the limit as a provider does: it keeps what each request was sent,
    and a reply past it comes back cut off, so a long answer cannot carry a test run past its
    token cap (it ends on the bound, as a live run would)."""
    model = FunctionModel(lambda transcript, tools: _answer(20_000))  # about 5,000 tokens
    store = MemoryStore()
    fixture = make_fixture(budget={"max_tokens": 1000})
    result = run_fixture(fixture, contracts, store, model=model).result
    assert (result.terminal.value, result.reason) == ("abstain", "tokens")
    assert result.tokens_in + result.tokens_out <= 1000
    turns = store.turns(result.run_id)
    assert model.output_limits == [turn.max_output_tokens for turn in turns]
    assert turns[0].stop_reason == "max_tokens" and turns[0].output_tokens == model.output_limits[0]


def test_a_tool_call_cut_off_by_the_budget_ends_the_run_on_that_bound(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """A tool-proposing reply cut at what `max_tokens` leaves is the bound reached, not a model
    fault: `abstain (tokens)`, `budget_exhausted`, the cut call never dispatched, and the record
    shows it (the turn stopped at `max_tokens`, its output at the limit); it replays exactly."""
    store = SqliteStore(tmp_path / "r.db")
    fixture = make_fixture(
        model=[{"tool_calls": [SEARCH], "usage": {"input": 40, "output": 5000}}, {"final": "NH7."}],
        budget={"max_tokens": 1000},
    )
    result = run_fixture(fixture, contracts, store).result
    assert (result.terminal.value, result.reason) == ("abstain", "tokens")
    assert result.attempts == 0
    last = store.transitions(result.run_id)[-1]
    assert (last.result_class, last.reason, last.decision) == (
        "budget_exhausted",
        "tokens",
        "abstain",
    )
    (turn,) = store.turns(result.run_id)
    assert turn.stop_reason == "max_tokens" and last.tokens_out == turn.reply().usage.output_tokens
    assert 40 + last.tokens_out <= 1000
    replayed = replay_run_sync(store, result.run_id, contracts)
    assert replayed.identical, replayed.divergence


def _money_cut_run(tmp_path: Path, contracts: ContractSet) -> tuple[SqliteStore, RunResult]:
    """A search, then a 6,000-character final answer the money cap ($0.006) cuts off."""
    store = SqliteStore(tmp_path / "r.db")
    fixture = make_fixture(
        model=[{"tool_calls": [SEARCH]}, {"final": _answer(6000)}],
        budget={"max_cost_usd": 0.006},
    )
    result = run_fixture(fixture, contracts, store).result
    assert (result.terminal.value, result.reason) == ("abstain", "cost")
    return store, result


def test_a_cut_run_replays_exactly(tmp_path: Path, contracts: ContractSet) -> None:
    """The limit is derived from what the run recorded: a replay derives it again, and a reply
    the money cut off replays as it was."""
    store, result = _money_cut_run(tmp_path, contracts)
    assert result.answer is not None and len(result.answer) < 6000
    assert result.cost_usd is not None and result.cost_usd <= 0.006
    replayed = replay_run_sync(store, result.run_id, contracts)
    assert replayed.identical, replayed.divergence


def test_a_counterfactual_replay_under_a_smaller_cap_cuts_the_recorded_reply(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """Replayed under a cap whose limit a recorded reply passes, the reply is cut there, as the
    live model would have been (its text, not recorded, is stood in for): the replayed run
    stays under the smaller cap."""
    store = SqliteStore(tmp_path / "r.db")
    fixture = make_fixture(model=[{"tool_calls": [SEARCH]}, {"final": _answer(6000)}])
    result = run_fixture(fixture, contracts, store).result
    assert result.terminal.value == "complete" and result.cost_usd is not None
    cap = result.cost_usd / 2
    replayed = replay_run_sync(store, result.run_id, contracts, limits=Limits(max_cost_usd=cap))
    run = replayed.replayed.result
    assert run is not None and (run.terminal.value, run.reason) == ("abstain", "cost")
    assert run.cost_usd is not None and run.cost_usd <= cap


_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
_RUNS = st.fixed_dictionaries(
    {
        "searches": st.integers(0, 5),
        "final_chars": st.integers(1, 8000),
        "found": st.booleans(),
    }
)


def _fixture(run: dict[str, Any], budget: dict[str, Any]) -> Any:
    """Turns without stated usage: each request is billed for the runner's estimate, which is
    never more than what it projected (the estimate of the transcript sent)."""
    searches = run["searches"]
    respond = FLIGHTS_OK if run["found"] else EMPTY
    turn = {"tool_calls": [SEARCH]}
    return make_fixture(
        model=[turn] * searches + [{"final": _answer(run["final_chars"])}],
        environment={"search_flights": [{"respond": respond}] * max(1, searches)},
        budget={"max_attempts": 8, **budget},
    )


@_SETTINGS
@given(run=_RUNS, cap=st.integers(1, 400).map(lambda n: n / 10_000))
def test_the_money_cap_is_never_passed(
    contracts: ContractSet, run: dict[str, Any], cap: float
) -> None:
    """Over caps from $0.0001 to $0.04 and final answers up to 8000 characters (the old
    projection passed 9 caps of 300 by up to 79%): what the run spent is never above its cap
    when each request is billed for no more input than projected."""
    result = run_fixture(_fixture(run, {"max_cost_usd": cap}), contracts, MemoryStore()).result
    assert result.cost_usd is not None and result.cost_usd <= cap, (result.cost_usd, cap)


@_SETTINGS
@given(run=_RUNS, cap=st.integers(60, 4000))
def test_no_reply_carries_a_run_past_its_token_cap(
    contracts: ContractSet, run: dict[str, Any], cap: int
) -> None:
    """What the README says of the token cap: a request's output is limited to what
    `max_tokens` leaves after its projected input (or before it, when that input fills it), so
    the cap is passed only by input; and only the final tool-free request after the token bound
    is made with no token left (outside the cap, as it is outside the model-step cap)."""
    result = run_fixture(_fixture(run, {"max_tokens": cap}), contracts, MemoryStore()).result
    requests = [r for r in result.transitions if r.tokens_in is not None]
    spent = 0
    for index, request in enumerate(requests):
        assert request.tokens_in is not None and request.tokens_out is not None
        if spent >= cap:  # no token left: only the final request after the token bound
            assert index == len(requests) - 1 and result.reason == "tokens"
        else:
            assert spent + request.tokens_out <= cap, (spent, request.tokens_out, cap)
        spent += request.tokens_in + request.tokens_out
    assert spent == result.tokens_in + result.tokens_out


def test_the_limit_sent_is_recorded_and_a_replay_must_work_out_the_same(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """Each turn records the limit its request was sent with; a stored limit that the re-drive
    does not work out again is a divergence."""
    path = tmp_path / "r.db"
    store = SqliteStore(path)
    fixture = make_fixture(
        model=[{"tool_calls": [SEARCH], "usage": {"input": 40, "output": 5000}}, {"final": "NH7."}],
        budget={"max_tokens": 1000},
    )
    run_id = run_fixture(fixture, contracts, store).result.run_id
    (turn,) = store.turns(run_id)
    # what the cap leaves after the projected input (the transcript's estimate and the offered
    # tools' manifest), and the scripted 5,000-token reply came back cut there
    assert turn.max_output_tokens is not None and 700 < turn.max_output_tokens < 1000
    assert turn.output_tokens == turn.max_output_tokens and turn.stop_reason == "max_tokens"
    store.close()

    conn = sqlite3.connect(path)
    body = json.loads(conn.execute("SELECT turn FROM turns").fetchone()[0])
    body["max_output_tokens"] += 1
    conn.execute("UPDATE turns SET turn = ?", (json.dumps(body),))
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    replayed = replay_run_sync(store, run_id, contracts)
    assert not replayed.identical and replayed.divergence is not None
    assert "output limit" in str(replayed.divergence)
    store.close()


def test_a_reply_cut_by_an_adapter_not_told_the_limit_is_its_own_truncation(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """An adapter whose `generate` takes no limit was not asked to stop there: a reply it cut
    off is `model_truncated`, however long, never the budget's bound. Its turn is stored with
    no limit, as every turn was before the runner sent limits, and replays as it ran."""

    class Plain:
        async def generate(self, transcript: Any, tools: Any, tool_choice: Any) -> ModelReply:
            return ModelReply(
                text="NH7 is",
                tool_calls=(),
                usage=TokenUsage(input_tokens=40, output_tokens=5000),
                stop_reason="max_tokens",
            )

    store = SqliteStore(tmp_path / "r.db")
    fixture = make_fixture(budget={"max_tokens": 1000})
    result = run_fixture(fixture, contracts, store, model=Plain()).result
    assert result.reason == "model_truncated", result.reason
    assert result.transitions[-1].result_class != "budget_exhausted"
    (turn,) = store.turns(result.run_id)
    assert turn.max_output_tokens is None
    conn = sqlite3.connect(tmp_path / "r.db")
    assert "max_output_tokens" not in conn.execute("SELECT turn FROM turns").fetchone()[0]
    conn.close()
    replayed = replay_run_sync(store, result.run_id, contracts)
    assert replayed.identical, replayed.divergence


def test_a_reply_cut_by_the_budget_is_not_known_under_a_larger_one(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """A counterfactual replay under a larger budget does not pass off the recorded cut as the
    model's own truncation: what the model would have said past it is outside the recording.
    Under the same budget it replays as recorded."""
    store, result = _money_cut_run(tmp_path, contracts)
    larger = replay_run_sync(store, result.run_id, contracts, limits=Limits(max_cost_usd=0.2))
    assert larger.replayed.result is None and larger.replayed.outside == "model request 2"
    same = replay_run_sync(store, result.run_id, contracts, limits=Limits(max_cost_usd=0.006))
    assert same.replayed.result is not None and same.replayed.result.reason == "cost"


def test_an_adapter_told_the_limit_that_goes_past_it_ends_the_run_on_the_bound(
    contracts: ContractSet,
) -> None:
    """An adapter that takes the limit but answers longer (its own stop reason, or none) has
    carried the run past the budget: the run does not end `complete` as if within it, but on the
    bound, its answer kept."""

    class Overrunning:
        async def generate(
            self, transcript: Any, tools: Any, tool_choice: Any, *, max_output_tokens: int | None
        ) -> ModelReply:
            assert max_output_tokens is not None
            return ModelReply(
                text="NH7, assistance reported.",
                tool_calls=(),
                usage=TokenUsage(input_tokens=40, output_tokens=max_output_tokens + 500),
                stop_reason="end_turn",
            )

    fixture = make_fixture(budget={"max_tokens": 1000})
    result = run_fixture(fixture, contracts, MemoryStore(), model=Overrunning()).result
    assert (result.terminal.value, result.reason) == ("abstain", "tokens")
    assert result.answer == "NH7, assistance reported."
    assert result.transitions[-1].result_class == "budget_exhausted"


def test_a_request_whose_input_fills_the_token_cap_may_answer_one_token(
    contracts: ContractSet,
) -> None:
    """When the projected input alone fills what `max_tokens` leaves, the request is still made
    (the cap is checked on tokens spent) but its reply may add one token, not what was left: a
    tighter cap never lets a run spend more."""
    spent = {}
    for cap in (20, 54, 55, 60, 80):
        fixture = make_fixture(
            model=[{"final": _answer(4000), "usage": {"input": 54, "output": 1000}}],
            budget={"max_tokens": cap},
        )
        summary = run_fixture(fixture, contracts, MemoryStore()).result.summary()
        spent[cap] = summary.tokens_in + summary.tokens_out
    assert list(spent.values()) == sorted(spent.values()), spent
    assert spent[20] == 54 + 1  # the input passes the cap; the reply adds one token
