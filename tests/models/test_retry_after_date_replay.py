"""A live run that waited for a Retry-After given as an HTTP-date replays exactly: the date is read
against the moment the failed response was recorded, which the replay's clock reproduces, not
against whenever the engine got round to it after storing the turn."""

from __future__ import annotations

import email.utils
import time
from pathlib import Path

import pytest

from runner.proof.replay import Recording, describe, replay
from runner.store import SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.live_adapters import PROTOCOLS, adapter
from tests.support.llm_recordings import error
from tests.support.llm_server import RecordedLLMServer
from tests.support.provider_replies import exchange
from tests.support.travel import make_fixture


@pytest.mark.slow
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_retry_after_date_wait_replays_exactly(
    protocol: str, server: RecordedLLMServer, contracts: ContractSet, tmp_path: Path
) -> None:
    model = adapter(protocol, server.url, "dated")  # built first: building one can take a second
    soon = email.utils.formatdate(time.time() + 3, usegmt=True)
    server.serve(
        protocol,
        "dated",
        error(protocol, 429, "slow down", {"retry-after": soon}),
        exchange(protocol, content="NH7 is available."),
    )
    store = SqliteStore(tmp_path / "runs.sqlite")
    outcome = run_fixture(make_fixture(), contracts, store, model=model)
    assert outcome.result.terminal.value == "complete"
    assert len(outcome.result.waits_s) == 1 and 0 < outcome.result.waits_s[0] <= 3
    replayed = replay(Recording.from_store(store, outcome.result.run_id), contracts)
    assert replayed.identical, describe(replayed)
