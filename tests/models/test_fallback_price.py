"""The fallback model's requests are priced at the fallback's price, looked up as the primary's
when the run starts and kept in its header beside it: its output limit is worked out at that
price, its cost recorded on its transitions, and `max_cost_usd` checked against it. Over real
HTTP (the official SDK against the loopback server), with the genai-prices table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import genai_prices
import pytest

from runner import Limits, SqliteStore
from runner.base.errors import ConfigError
from runner.harness.scenario import ScenarioRun
from runner.models.base import ModelReply, TokenUsage
from runner.models.openai import OpenAIChatModel
from runner.models.pricing import ModelPrice
from runner.proof.api import grade_run_sync, replay_run_sync
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.llm_recordings import call, error, ok
from tests.support.llm_server import RecordedLLMServer
from tests.support.travel import make_fixture

PRIMARY, FALLBACK = "gpt-4o-mini", "o1"
SPENT = TokenUsage(input_tokens=1000, output_tokens=300)


def _price(model: str) -> ModelPrice:
    found = genai_prices.calc_price(genai_prices.Usage(input_tokens=1), model, provider_id="openai")
    rates = found.model_price
    return ModelPrice(
        input_usd_per_mtok=float(rates.input_mtok),  # type: ignore[arg-type]
        output_usd_per_mtok=float(rates.output_mtok),  # type: ignore[arg-type]
    )


def _answer(model: str, *, calls: bool, usage: tuple[int, int] | None = None) -> dict[str, Any]:
    spent = SPENT if usage is None else TokenUsage(input_tokens=usage[0], output_tokens=usage[1])
    if calls:
        reply = ModelReply(text="", tool_calls=(call("c1"),), usage=spent, stop_reason="tool_use")
    else:
        reply = ModelReply(text="NH7.", tool_calls=(), usage=spent, stop_reason="end_turn")
    return ok("openai", model, reply)


def _play(
    server: RecordedLLMServer,
    tmp_path: Path,
    contracts: ContractSet,
    *,
    fallback: str = FALLBACK,
    **budget: Any,
) -> tuple[ScenarioRun, SqliteStore]:
    adapter = OpenAIChatModel(PRIMARY, base_url=f"{server.url}/v1", api_key="k",
                              fallback_model=fallback)  # fmt: skip
    store = SqliteStore(tmp_path / "runs.sqlite")
    fixture = make_fixture(budget={"max_seconds": 30, **budget})
    return run_fixture(fixture, contracts, store, model=adapter), store


def _checked(store: SqliteStore, run_id: str, contracts: ContractSet) -> None:
    """The record alone reproduces the run, its costs included, and grades clean."""
    replayed = replay_run_sync(store, run_id, contracts)
    assert replayed.identical, replayed.divergence
    trial = grade_run_sync(store, run_id, contracts)
    assert trial.passed, trial.failed


def _down(server: RecordedLLMServer) -> None:
    """The primary answers 500 to the first try and both retries."""
    server.serve("openai", PRIMARY, *[error("openai", 500, "internal error")] * 3)


def test_the_fallback_is_held_to_the_cap_at_its_own_price(
    server: RecordedLLMServer, tmp_path: Path, contracts: ContractSet
) -> None:
    """The stranger's run: three 500s from gpt-4o-mini, then o1 under a small cap ($0.008: its
    $0.002 no longer pays for o1's first request once the tools' manifest is projected). The
    output limit o1 is sent is what the money left pays for at o1's price (7 tokens; at the
    primary's, over 10,000), its reply costs o1's price times its tokens, and the final answer
    it could not afford is not asked for: `abstain (cost)` under the cap."""
    _down(server)
    server.serve("openai", FALLBACK, _answer(FALLBACK, calls=True, usage=(400, 5)))
    outcome, store = _play(server, tmp_path, contracts, max_cost_usd=0.008)
    result = outcome.result
    assert (result.terminal.value, result.reason) == ("abstain", "cost")
    assert len(server.requests[("openai", PRIMARY)]) == 3
    (asked,) = server.requests[("openai", FALLBACK)]
    assert asked["max_completion_tokens"] == 7
    cost = float(_price(FALLBACK).cost(400, 5))
    assert [r.cost_usd for r in result.transitions if r.tokens_in is not None] == [cost]
    assert result.cost_usd == cost <= 0.008
    header = store.header(result.run_id)
    assert header is not None and header.fallback_price is not None
    assert header.fallback_price.source.endswith(f" {FALLBACK}")
    _checked(store, result.run_id, contracts)


def test_a_fallback_billing_past_its_limit_is_recorded_at_its_price(
    server: RecordedLLMServer, tmp_path: Path, contracts: ContractSet
) -> None:
    """The stranger's provider bills 1,000 tokens in and 300 out whatever it is sent: the run
    records what that cost at o1's price ($0.033, not the $0.00033 of the primary's), stops
    there (`abstain (cost)`, o1 asked once, not twice), and grading says the cap was passed."""
    _down(server)
    server.serve("openai", FALLBACK, _answer(FALLBACK, calls=True), _answer(FALLBACK, calls=False))
    outcome, store = _play(server, tmp_path, contracts, max_cost_usd=0.008)
    result = outcome.result
    assert (result.terminal.value, result.reason) == ("abstain", "cost")
    assert len(server.requests[("openai", FALLBACK)]) == 1
    assert result.cost_usd == float(_price(FALLBACK).cost_of(SPENT)) == pytest.approx(0.033)
    replayed = replay_run_sync(store, result.run_id, contracts)
    assert replayed.identical, replayed.divergence
    trial = grade_run_sync(store, result.run_id, contracts)
    assert [(c.name, c.detail) for c in trial.failed] == [
        ("cost_within_cap", "$0.033000 spent, cap $0.008")
    ]


def test_the_fallbacks_requests_cost_its_price_times_its_tokens(
    server: RecordedLLMServer, tmp_path: Path, contracts: ContractSet
) -> None:
    """Under a $0.12 cap o1 answers twice: each of its transitions records o1's price times its
    tokens ($0.033), the total is their sum, and the output limit sent to o1 is what the money
    left pays for at o1's price (at the primary's it was the token budget's, ~49,000)."""
    _down(server)
    server.serve("openai", FALLBACK, _answer(FALLBACK, calls=True), _answer(FALLBACK, calls=False))
    outcome, store = _play(server, tmp_path, contracts, max_cost_usd=0.12)
    result = outcome.result
    assert (result.terminal.value, result.reason) == ("complete", "model_final")
    each = float(_price(FALLBACK).cost_of(SPENT))
    assert each == pytest.approx(0.033)
    steps = [r for r in result.transitions if r.tokens_in is not None]
    assert [r.cost_usd for r in steps] == [each, each]
    assert result.cost_usd == pytest.approx(2 * each)
    sent = [body["max_completion_tokens"] for body in server.requests[("openai", FALLBACK)]]
    assert len(sent) == 2 and all(limit <= 0.12 / 60e-6 for limit in sent), sent
    header = store.header(result.run_id)
    assert header is not None and header.price == _price(PRIMARY).model_copy(
        update={"source": header.price.source}
    )
    turns = store.turns(result.run_id)
    assert [t.max_output_tokens for t in turns if t.output_tokens] == sent
    _checked(store, result.run_id, contracts)


def test_a_fallback_with_no_price_is_refused_with_a_cost_cap(
    server: RecordedLLMServer, tmp_path: Path, contracts: ContractSet
) -> None:
    """As a primary with no price: a money budget cannot bound what it answers; refused before
    anything is stored or sent."""
    refused = "needs a price for the fallback model openai:no-such-model, and none was found"
    with pytest.raises(ConfigError, match=refused):
        _play(server, tmp_path, contracts, fallback="no-such-model", max_cost_usd=1.0)
    assert sum(len(r) for r in server.requests.values()) == 0
    assert SqliteStore(tmp_path / "runs.sqlite").runs() == []


def test_without_a_cap_an_unpriced_fallbacks_requests_have_no_cost(
    server: RecordedLLMServer, tmp_path: Path, contracts: ContractSet
) -> None:
    """The run is priced until its fallback answers: those requests record no cost, and the
    run's total is not known (not the primary's share alone)."""
    _down(server)
    spare = "no-such-model"
    server.serve("openai", spare, _answer(spare, calls=True), _answer(spare, calls=False))
    outcome, store = _play(server, tmp_path, contracts, fallback=spare)
    result = outcome.result
    assert result.terminal.value == "complete"
    steps = [r for r in result.transitions if r.tokens_in is not None]
    assert [r.cost_usd for r in steps] == [None, None]
    assert result.cost_usd is None
    header = store.header(result.run_id)
    assert header is not None and header.price is not None and header.fallback_price is None
    _checked(store, result.run_id, contracts)
    capped = Limits(max_seconds=30, max_cost_usd=1.0)  # nothing can bound what it answered
    with pytest.raises(ConfigError, match="fallback model no-such-model was not priced"):
        replay_run_sync(store, result.run_id, contracts, limits=capped)


def test_a_retry_after_past_the_deadline_asks_the_fallback_at_once(
    server: RecordedLLMServer, tmp_path: Path, contracts: ContractSet
) -> None:
    """A 429 asking for 100 s on a 30 s budget: the primary's wait does not fit, so the fallback
    is asked now (the run ended `abstain (deadline)` after 0.09 s, never asking it)."""
    server.serve("openai", PRIMARY, error("openai", 429, "slow down", {"retry-after": "100"}))
    server.serve("openai", "gpt-4o", _answer("gpt-4o", calls=True), _answer("gpt-4o", calls=False))
    outcome, store = _play(server, tmp_path, contracts, fallback="gpt-4o")
    result = outcome.result
    assert (result.terminal.value, result.reason) == ("complete", "model_final")
    assert len(server.requests[("openai", PRIMARY)]) == 1
    assert len(server.requests[("openai", "gpt-4o")]) == 2
    assert result.waits_s == [] and result.elapsed_s < 30
    each = float(_price("gpt-4o").cost_of(SPENT))
    assert [r.cost_usd for r in result.transitions if r.tokens_in is not None] == [each, each]
    _checked(store, result.run_id, contracts)
