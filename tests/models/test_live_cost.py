"""The cost of a recorded live-adapter run matches the genai-prices table (the `prices` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import genai_prices
import pytest

from runner import SqliteStore
from runner.models.anthropic import AnthropicModel
from runner.models.openai import OpenAIChatModel
from runner.proof.api import replay_run_sync
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.llm_recordings import call, ok, reply
from tests.support.llm_server import RecordedLLMServer
from tests.support.travel import make_fixture

LIVE = [
    ("openai", "gpt-4o-mini"),
    ("anthropic", "claude-3-5-haiku-latest"),
    ("anthropic", "claude-sonnet-4-6"),  # tiered past 200k tokens: priced at its base rates
]


@pytest.mark.parametrize(("protocol", "model"), LIVE)
def test_a_live_adapter_runs_cost_matches_the_price_table(
    protocol: str, model: str, server: RecordedLLMServer, contracts: ContractSet, tmp_path: Path
) -> None:
    """Through the official SDK over loopback HTTP, each request's recorded cost is the
    genai-prices table's price of the usage the provider reported, and the total their sum;
    the stored run replays with the same costs."""
    proposed = reply(calls=(call("c1"),))
    final = reply("NH7 with assistance reported available.")
    server.serve(protocol, model, ok(protocol, model, proposed), ok(protocol, model, final))
    if protocol == "openai":
        adapter: Any = OpenAIChatModel(model, base_url=f"{server.url}/v1", api_key="k")
    else:
        adapter = AnthropicModel(model, base_url=server.url, api_key="k")
    store = SqliteStore(tmp_path / "runs.db")
    outcome = run_fixture(make_fixture(), contracts, store, model=adapter)
    result = outcome.result
    assert result.terminal.value == "complete"
    steps = [r for r in result.transitions if r.tokens_in is not None]
    assert len(steps) == 2
    table = [
        genai_prices.calc_price(
            genai_prices.Usage(input_tokens=r.tokens_in, output_tokens=r.tokens_out),
            model,
            provider_id=protocol,
        ).total_price
        for r in steps
    ]
    assert [r.cost_usd for r in steps] == [float(price) for price in table]
    assert result.cost_usd == pytest.approx(float(sum(table)))
    header = store.header(result.run_id)
    assert header is not None and header.price is not None
    assert header.price.source.startswith("genai-prices")
    replayed = replay_run_sync(store, result.run_id, contracts)
    assert replayed.identical, replayed.divergence
