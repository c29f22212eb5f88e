"""The output-token limit on the wire: what each adapter sends when the run's budget limits a
request's output, over real HTTP to the loopback server, and how a reply the budget cut off ends
the run."""

from __future__ import annotations

from typing import Any

import pytest

from runner.models.anthropic import AnthropicModel
from runner.models.openai import OpenAIChatModel
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.live_adapters import PROTOCOLS, adapter, sent
from tests.support.llm_server import RecordedLLMServer
from tests.support.provider_replies import exchange
from tests.support.travel import make_fixture

TEN_THIRTY = {"input_usd_per_mtok": 10.0, "output_usd_per_mtok": 30.0}
EMPTY = {"status": "ok", "options": [], "source_timestamp": "2027-03-01T09:00:00Z"}
# The final request is projected at the first reply's 5000 billed input tokens plus the 111 the
# transcript grew by since (the call and its result): $0.05111 of input, and
# (0.12 - 0.0503 - 0.05111) / $30 per million = 619 output tokens left.
CAPPED = {"max_cost_usd": 0.12}
FIRST = {"input": 5000, "output": 10}
LEFT = 619


def limit_sent(protocol: str, body: dict[str, Any], field: str = "max_completion_tokens") -> Any:
    return body["max_tokens"] if protocol == "anthropic" else body.get(field)


def capped_run(protocol: str, server: RecordedLLMServer, contracts: ContractSet,
               final: dict[str, Any], model: Any = None) -> Any:  # fmt: skip
    server.serve(protocol, "capped",
                 exchange(protocol, calls=1, stop="tool_use", usage=FIRST), final)  # fmt: skip
    fixture = make_fixture(budget=CAPPED, price=TEN_THIRTY,
                           environment={"search_flights": [{"respond": EMPTY}]})  # fmt: skip
    chosen = model or adapter(protocol, server.url, "capped")
    return run_fixture(fixture, contracts, MemoryStore(), model=chosen).result


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_request_carries_what_the_budget_leaves_for_output(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """The final request after the money bound is sent the 619 output tokens its cap leaves
    after its input; the first the least of the adapter's own (Anthropic's 1024) and the
    budget's. The reply comes back within it and the run stays under its cap."""
    answer = exchange(protocol, content="NH7 is all.", usage={"input": 5000, "output": 8})
    result = capped_run(protocol, server, contracts, answer)
    assert (result.terminal.value, result.reason) == ("abstain", "cost")
    first, final = sent(server, protocol, "capped")
    if protocol == "anthropic":
        assert first["max_tokens"] == 1024  # the adapter's own, lower than the budget's
    else:
        assert 0 < first["max_completion_tokens"] < 4000 and "max_tokens" not in first
    assert limit_sent(protocol, final) == LEFT
    assert result.answer == "NH7 is all."
    assert result.cost_usd is not None and result.cost_usd <= 0.12


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_final_answer_the_money_cuts_off_stays_under_the_cap(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """The provider stops at the limit it was sent (`max_tokens` / `length`, 619 tokens): the
    run ends `abstain (cost)` with the cut text as its partial answer, within its $0.12."""
    cut = exchange(protocol, content="NH7 and then", stop="max_tokens",
                   usage={"input": 5000, "output": LEFT})  # fmt: skip
    result = capped_run(protocol, server, contracts, cut)
    assert (result.terminal.value, result.reason) == ("abstain", "cost")
    assert result.answer == "NH7 and then"
    assert result.transitions[-1].result_class == "budget_exhausted"
    assert result.cost_usd == pytest.approx(0.0503 + 0.05 + LEFT * 30 / 1e6)
    assert result.cost_usd is not None and result.cost_usd <= 0.12


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_tool_call_the_budget_cuts_off_ends_the_run_on_that_bound(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """A reply stopped at the budget's limit is a bound reached, not a model fault: the run
    ends `abstain` with the bound named (`tokens` here) and `budget_exhausted`, and its cut
    tool call is never dispatched. The same stop below the budget's limit (the adapter's own,
    lower) stays `model_truncated`."""
    server.serve(protocol, "cut", exchange(protocol, calls=1, stop="max_tokens",
                                           usage={"input": 40, "output": 749}))  # fmt: skip
    model = adapter(protocol, server.url, "cut")
    fixture = make_fixture(budget={"max_tokens": 1000})  # Anthropic's own 1024 is above it
    result = run_fixture(fixture, contracts, MemoryStore(), model=model).result
    limit = limit_sent(protocol, sent(server, protocol, "cut")[0])
    assert limit == 749  # 1000 less the transcript's estimate (50) and the tools' manifest (201)
    assert (result.terminal.value, result.reason) == ("abstain", "tokens")
    assert result.transitions[-1].result_class == "budget_exhausted"
    assert result.attempts == 0
    server.serve(protocol, "own", exchange(protocol, calls=1, stop="max_tokens",
                                           usage={"input": 40, "output": 12}))  # fmt: skip
    own = run_fixture(fixture, contracts, MemoryStore(), model=adapter(protocol, server.url, "own"))
    assert own.result.reason == "model_truncated"


def test_openai_sends_max_tokens_to_a_server_that_reads_only_that(
    server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """Ollama and LM Studio ignore `max_completion_tokens`: `token_limit_field="max_tokens"`
    sends the limit where they read it; the adapter's own `max_tokens` caps it too."""
    model = OpenAIChatModel("capped", base_url=f"{server.url}/v1", api_key="k",
                            token_limit_field="max_tokens", max_tokens=300)  # fmt: skip
    answer = exchange("openai", content="NH7.", usage={"input": 5000, "output": 8})
    capped_run("openai", server, contracts, answer, model)
    first, final = sent(server, "openai", "capped")
    assert "max_completion_tokens" not in first and "max_completion_tokens" not in final
    assert (first["max_tokens"], final["max_tokens"]) == (300, 300)


def test_anthropic_never_sends_more_than_its_own_max_tokens(
    server: RecordedLLMServer, contracts: ContractSet
) -> None:
    model = AnthropicModel("capped", base_url=server.url, api_key="k", max_tokens=100)
    answer = exchange("anthropic", content="NH7.", usage={"input": 5000, "output": 8})
    capped_run("anthropic", server, contracts, answer, model)
    assert [body["max_tokens"] for body in sent(server, "anthropic", "capped")] == [100, 100]
