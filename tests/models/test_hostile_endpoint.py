"""A hostile model endpoint over real HTTP (the loopback server, both protocols): cut-off replies,
untrusted usage, odd content shapes, and redirects to another host. Whatever it sends, the run
ends in a declared state, dispatches nothing it cannot trust, and records only what happened."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from runner.core.budget import Limits
from runner.harness.scenario import ScenarioRun
from runner.store import MemoryStore, SqliteStore
from runner.store.base import Store
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.live_adapters import PROTOCOLS, adapter
from tests.support.llm_recordings import error
from tests.support.llm_server import RecordedLLMServer
from tests.support.provider_replies import anthropic_exchange, exchange, openai_exchange
from tests.support.travel import make_fixture


def play(
    protocol: str,
    server: RecordedLLMServer,
    contracts: ContractSet,
    *exchanges: dict[str, Any],
    store: Store | None = None,
    **fixture: Any,
) -> ScenarioRun:
    model = f"hostile-{len(server.queues)}"
    server.serve(protocol, model, *exchanges)
    chosen = adapter(protocol, server.url, model)
    return run_fixture(make_fixture(**fixture), contracts, store or MemoryStore(), model=chosen)


# -- replies the adapter cannot trust whole ---------------------------------------------------

CUT_OFF = [
    ("max_tokens", "model_truncated"),
    ("pause_turn", "model_incomplete"),
    ("a_stop_reason_from_the_future", "model_incomplete"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("stop", "reason"), CUT_OFF)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cut_off_reply_never_dispatches_its_tool_calls(
    protocol: str, stop: str, reason: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play(protocol, server, contracts, exchange(protocol, calls=1, stop=stop))
    result = outcome.result
    assert (result.terminal.value, result.reason) == ("abstain", reason)
    assert result.attempts == 0
    assert outcome.environment.tools["search_flights"].invocations == []


@pytest.mark.parametrize(("stop", "reason"), CUT_OFF)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cut_off_text_is_not_a_final_answer(
    protocol: str, stop: str, reason: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play(protocol, server, contracts, exchange(protocol, content="NH7 is", stop=stop))
    assert (outcome.result.terminal.value, outcome.result.reason) == ("abstain", reason)


def test_a_content_filter_stop_dispatches_nothing(
    server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play("openai", server, contracts, openai_exchange(calls=1, finish="content_filter"))
    assert outcome.result.terminal.value == "abstain" and outcome.result.attempts == 0


# -- usage is untrusted input -----------------------------------------------------------------

HOSTILE_USAGE: dict[str, Any] = {
    "negative": {"input": -6_999_965, "output": 3},
    "nan": {"input": math.nan, "output": 3},
    "infinite": {"input": 40, "output": math.inf},
    "float": {"input": 40.5, "output": 3},
    "string": {"input": "40", "output": 3},
    "boolean": {"input": True, "output": 3},
    "null": {"input": None, "output": 3},
    "huge": {"input": 10**30, "output": 3},
    "missing": None,
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(HOSTILE_USAGE))
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_untrusted_usage_is_replaced_by_the_runners_estimate(
    protocol: str, case: str, server: RecordedLLMServer, contracts: ContractSet, tmp_path: Path
) -> None:
    usage = HOSTILE_USAGE[case]
    store = SqliteStore(tmp_path / "runs.db")
    outcome = play(
        protocol, server, contracts,
        exchange(protocol, calls=1, stop="tool_use", usage=usage),
        exchange(protocol, content="NH7 is available.", usage=usage),
        store=store,
    )  # fmt: skip
    result = outcome.result
    assert result.terminal.value == "complete"
    for count in (result.tokens_in, result.tokens_out, *result.prefill_per_step):
        assert type(count) is int and 0 < count < 10**9
    run_id = result.run_id
    turns = store.turns(run_id)
    assert [turn.usage_estimated for turn in turns] == [True, True]
    summary = store.summary(run_id)  # the store stays readable
    assert summary is not None and summary.tokens_in == result.tokens_in


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_trusted_usage_is_kept_and_not_marked_estimated(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    outcome = play(protocol, server, contracts, exchange(protocol, content="NH7."), store=store)
    assert (outcome.result.tokens_in, outcome.result.tokens_out) == (40, 12)
    assert [turn.usage_estimated for turn in store.turns(outcome.result.run_id)] == [False]


@pytest.mark.parametrize(
    ("cache", "tokens_in"),
    [({"cache_read_input_tokens": 900, "cache_creation_input_tokens": 60}, 1000),
     ({"cache_read_input_tokens": None}, 40)],
)  # fmt: skip
def test_anthropic_cached_input_tokens_count(
    cache: dict[str, Any], tokens_in: int, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """Prompt-cache reads and writes are input too (Anthropic reports them apart)."""
    usage = {"input": 40, "output": 12, **cache}
    outcome = play("anthropic", server, contracts, anthropic_exchange(content="NH7.", usage=usage))
    assert outcome.result.tokens_in == tokens_in


def test_a_cache_count_that_cannot_be_believed_is_estimated(
    server: RecordedLLMServer, contracts: ContractSet, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    usage = {"input": 40, "output": 12, "cache_read_input_tokens": -900}
    reply = anthropic_exchange(content="NH7.", usage=usage)
    outcome = play("anthropic", server, contracts, reply, store=store)
    assert [t.usage_estimated for t in store.turns(outcome.result.run_id)] == [True]


@pytest.mark.parametrize("case", ["negative", "nan", "missing"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_token_budget_holds_whatever_usage_says(
    protocol: str, case: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """The estimate stands in for usage that cannot be believed, so the budget still trips."""
    usage = HOSTILE_USAGE[case]
    searches = [exchange(protocol, calls=1, stop="tool_use", usage=usage) for _ in range(6)]
    limits = Limits(max_tokens=400)
    outcome = play(
        protocol, server, contracts, *searches, exchange(protocol, content="done", usage=usage),
        budget=limits.model_dump(), environment={"search_flights": [{"respond": {
            "status": "ok", "options": [], "source_timestamp": "2027-03-01T09:00:00Z"}}] * 6},
    )  # fmt: skip
    result = outcome.result
    assert (result.terminal.value, result.reason) == ("abstain", "tokens")
    assert result.prefill_per_step[0] == 50  # the transcript's estimate, not what usage said


# -- content the adapter must classify --------------------------------------------------------

OPENAI_CONTENT: list[tuple[Any, str]] = [
    ([{"type": "text", "text": "NH7 "}, {"type": "text", "text": "is available."}], "complete"),
    (42, "model_malformed"),
    ({"text": "NH7"}, "model_malformed"),
    ([{"type": "image_url", "image_url": {"url": "x"}}], "model_malformed"),
    (["NH7"], "model_malformed"),
]


@pytest.mark.parametrize(("content", "ending"), OPENAI_CONTENT)
def test_openai_content_of_any_shape_is_classified(
    content: Any, ending: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play("openai", server, contracts, openai_exchange(content=content))
    result = outcome.result
    if ending == "complete":
        assert (result.terminal.value, result.answer) == ("complete", "NH7 is available.")
    else:
        assert (result.terminal.value, result.reason) == ("abstain", ending)


THINKING = {"type": "thinking", "thinking": "...", "signature": "s"}
ANTHROPIC_BLOCKS: list[tuple[list[Any], str]] = [
    ([THINKING, {"type": "text", "text": "NH7 is available."}], "complete"),
    ([{"type": "hologram", "data": "?"}, {"type": "text", "text": "NH7."}], "model_malformed"),
    ([{"type": "text", "text": 42}], "model_malformed"),
    ([{"type": "tool_use", "id": 7, "name": "search_flights", "input": {}}], "model_malformed"),
    (["NH7"], "model_malformed"),
    ([{"type": ["text"], "text": "NH7."}], "model_malformed"),
]


@pytest.mark.parametrize(("blocks", "ending"), ANTHROPIC_BLOCKS)
def test_anthropic_blocks_of_any_type_are_classified(
    blocks: list[Any], ending: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    outcome = play("anthropic", server, contracts, anthropic_exchange(content=blocks))
    result = outcome.result
    if ending == "complete":
        assert (result.terminal.value, result.answer) == ("complete", "NH7 is available.")
    else:
        assert (result.terminal.value, result.reason) == ("abstain", ending)
    assert result.attempts == 0


# -- redirects --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [307, 308])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_redirect_to_another_host_is_not_followed(
    protocol: str, status: int, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """The transcript (and the key) never reach the host a redirect points at."""
    with RecordedLLMServer({}) as elsewhere:
        path = "/v1/chat/completions" if protocol == "openai" else "/v1/messages"
        moved = {"status": status, "headers": {"location": f"{elsewhere.url}{path}"},
                 "body": {}}  # fmt: skip
        outcome = play(protocol, server, contracts, moved)
        assert not elsewhere.requests
    result = outcome.result
    assert result.terminal.value == "abstain"
    assert result.reason.startswith(f"model_rejected: {status}")


@pytest.mark.parametrize("digits", [400, 5000])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_endless_retry_after_is_never_waited_for(
    protocol: str, digits: int, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """A Retry-After too long for a float (or for `int()`) outlasts any deadline: no wait."""
    overloaded = error(protocol, 529, "overloaded", {"retry-after": "9" * digits})
    outcome = play(protocol, server, contracts, overloaded)
    result = outcome.result
    assert (result.terminal.value, result.reason, result.waits_s) == ("abstain", "deadline", [])


# -- the provider key is a runtime credential too -----------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_provider_echoing_the_api_key_never_gets_it_recorded(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet, tmp_path: Path
) -> None:
    """An endpoint that echoes the key (in a reply, or in a 401's message, as some
    OpenAI-compatible servers do) put it in the answer, the reason, the store and the log."""
    key = "test-key"  # the key `adapter` gives the SDK
    store = SqliteStore(tmp_path / "runs.db")
    echoed = play(
        protocol, server, contracts, exchange(protocol, content=f"your key is {key}"), store=store
    )
    rejected = play(
        protocol, server, contracts, error(protocol, 401, f"Incorrect API key: {key}"), store=store
    )
    assert echoed.result.answer == "your key is [redacted]"
    assert rejected.result.reason is not None and "401" in rejected.result.reason
    for result in (echoed.result, rejected.result):
        assert key not in (result.answer or "") and key not in (result.reason or "")
    store.close()
    assert key.encode() not in (tmp_path / "runs.db").read_bytes()
    assert all(key.encode() not in wal.read_bytes() for wal in tmp_path.glob("runs.db-*"))


def test_tool_arguments_with_a_number_too_long_to_read_are_invalid_not_a_model_error() -> None:
    """OpenAI sends arguments as a JSON string: a 5000-digit integer in it raised a bare
    ValueError from json (not a JSONDecodeError), which ended the whole run as a model error."""
    from runner.models._wire import parse_arguments  # noqa: PLC0415  # the seam under test

    arguments, why = parse_arguments('{"max_results": ' + "9" * 5000 + "}")
    assert arguments == {} and why is not None and "too long" in why
