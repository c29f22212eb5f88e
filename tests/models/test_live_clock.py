"""A live model puts real time in the loop: the run keeps time on the system clock, the deadline
bounds the real request, and every recorded wait really happened. Replaying such a run re-drives
it on a fake clock from its recorded times."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.base.clock import FakeClock
from runner.engine.engine import Engine
from runner.proof.replay import Recording, describe, replay
from runner.store import MemoryStore, SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.environment import ScriptedEnvironment
from runner.travel.scenario import run_fixture, spec_for
from tests.support.live_adapters import PROTOCOLS, adapter
from tests.support.llm_recordings import error
from tests.support.llm_server import RecordedLLMServer
from tests.support.paths import FIXTURES
from tests.support.provider_replies import exchange
from tests.support.travel import make_fixture

FAST = {"max_attempts": 8, "max_model_steps": 16, "max_tokens": 50_000, "max_seconds": 1}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_deadline_bounds_the_real_model_request(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """A request that takes 3 s of real time under a 1 s deadline times out at 1 s."""
    server.serve(protocol, "slow", {**exchange(protocol, content="Too late."), "delay_s": 3})
    model = adapter(protocol, server.url, "slow")
    began = time.monotonic()
    outcome = run_fixture(make_fixture(budget=FAST), contracts, MemoryStore(), model=model)
    took = time.monotonic() - began
    result = outcome.result
    assert (result.terminal.value, result.reason) == ("abstain", "deadline")
    assert 1.0 <= result.elapsed_s < 2.0
    assert took < 2.5


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_retry_after_wait_is_a_wait_that_happened(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """After a 529 with Retry-After: 1 the request is sent again only after 1 real second."""
    server.serve(
        protocol,
        "overloaded",
        error(protocol, 529, "overloaded", {"retry-after": "1"}),
        exchange(protocol, content="NH7 is available."),
    )
    outcome = run_fixture(
        make_fixture(), contracts, MemoryStore(), model=adapter(protocol, server.url, "overloaded")
    )
    assert outcome.result.terminal.value == "complete"
    assert outcome.result.waits_s == [1.0]
    first, second = server.arrivals[(protocol, "overloaded")]
    assert second - first >= 1.0
    assert outcome.result.elapsed_s >= 1.0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_fake_clock_counts_the_real_time_of_a_live_request(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet
) -> None:
    """Embedded on a fake clock, a live request still spends its real time against the deadline."""
    server.serve(protocol, "slow", {**exchange(protocol, content="Too late."), "delay_s": 3})
    clock, fixture = FakeClock(), make_fixture(budget=FAST)
    environment = ScriptedEnvironment(fixture.environment, fixture.tools, clock, None, {})
    engine = Engine(contracts=contracts, toolbox=environment, store=MemoryStore(), clock=clock)
    result = engine.run_sync(spec_for(fixture, 0), adapter(protocol, server.url, "slow"))
    assert (result.terminal.value, result.reason) == ("abstain", "deadline")
    assert 1.0 <= result.elapsed_s < 2.0


def test_scripted_fixtures_keep_their_fake_clock(contracts: ContractSet) -> None:
    """Without a live model nothing real is in the loop: scripted latencies take no real time."""
    environment = {"search_flights": [{"latency_s": 5, "respond": {"status": "ok", "options": [],
                                       "source_timestamp": "2027-03-01T09:00:00Z"}}]}  # fmt: skip
    began = time.monotonic()
    outcome = run_fixture(make_fixture(environment=environment), contracts, MemoryStore())
    assert outcome.result.elapsed_s == 5.0
    assert time.monotonic() - began < 2.0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cli_live_run_times_out_in_real_time(
    protocol: str,
    server: RecordedLLMServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from runner.cli import main  # noqa: PLC0415  # beside the other CLI imports it would shadow

    document = yaml.safe_load((FIXTURES / "read_only_success.yaml").read_text())
    document["budget"] = FAST
    document.pop("expect", None)
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(document))
    server.serve(protocol, "slow", {**exchange(protocol, content="Too late."), "delay_s": 3})
    url = f"{server.url}/v1" if protocol == "openai" else server.url
    args = ["run", str(path), "--json", "--db", str(tmp_path / "r.db")]
    main([*args, "--model", f"{protocol}:slow", "--base-url", url])
    run = json.loads(capsys.readouterr().out)
    assert (run["terminal"], run["reason"]) == ("abstain", "deadline")


CASES: dict[str, Any] = {
    "retry_after": lambda protocol: [
        error(protocol, 529, "overloaded", {"retry-after": "1"}),
        exchange(protocol, calls=1, stop="tool_use"),
        exchange(protocol, content="NH7 is available."),
    ],
    "deadline": lambda protocol: [{**exchange(protocol, content="Too late."), "delay_s": 2}],
    "truncated": lambda protocol: [exchange(protocol, calls=1, stop="max_tokens")],
    "estimated": lambda protocol: [
        exchange(protocol, calls=1, stop="tool_use", usage={"input": math.nan, "output": -1}),
        exchange(protocol, content="NH7 is available.", usage=None),
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_live_run_replays_exactly_on_a_fake_clock(
    protocol: str, case: str, server: RecordedLLMServer, contracts: ContractSet, tmp_path: Path
) -> None:
    """The recorded times of a system-clock run (real waits, a real timeout) re-drive it."""
    server.serve(protocol, case, *CASES[case](protocol))
    store = SqliteStore(tmp_path / "runs.db")
    fixture = make_fixture(budget=FAST) if case == "deadline" else make_fixture()
    outcome = run_fixture(fixture, contracts, store, model=adapter(protocol, server.url, case))
    run_id = outcome.result.run_id
    replayed = replay(Recording.from_store(store, run_id), contracts)
    assert replayed.identical, describe(replayed)
    assert replayed.replayed.result is not None
    assert replayed.replayed.result.waits_s == outcome.result.waits_s
    assert replayed.replayed.result.terminal == outcome.result.terminal
