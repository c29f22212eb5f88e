"""The one tool-free request after a bound is spent is still inside the run's deadline: a live
model that answers it slowly cannot stretch the run past `max_seconds`."""

from __future__ import annotations

import time

import pytest

from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.live_adapters import PROTOCOLS, adapter
from tests.support.llm_server import RecordedLLMServer
from tests.support.provider_replies import exchange
from tests.support.travel import make_fixture

# A token budget the first reply's usage spends, and a 1 s deadline.
TIGHT = {"max_attempts": 8, "max_model_steps": 16, "max_tokens": 1000, "max_seconds": 1}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_final_request_after_the_token_bound_is_cut_at_the_deadline(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """The first reply spends the token budget; the final request takes 3 s of real time under a
    1 s deadline: it is cut at the deadline, and the run ends `abstain (tokens)` with no answer
    inside its time, not 3 s later with the slow text."""
    server.serve(
        protocol,
        "greedy",
        exchange(protocol, calls=1, stop="tool_use", usage={"input": 5000, "output": 10}),
        {**exchange(protocol, content="Too late."), "delay_s": 3},
    )
    model = adapter(protocol, server.url, "greedy")
    began = time.monotonic()
    outcome = run_fixture(make_fixture(budget=TIGHT), contracts, MemoryStore(), model=model)
    took = time.monotonic() - began
    result = outcome.result
    assert (result.terminal.value, result.reason) == ("abstain", "tokens")
    assert result.elapsed_s < 1.5, result.elapsed_s
    assert result.answer is None
    assert took < 2.5
