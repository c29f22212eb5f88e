"""The service's reads of a run that is going read only what it appended since: an events poll,
a transitions page and `GET /v1/runs/{id}` fetch a number of rows that does not grow with the
run's length (counted on the store, a 5,000-transition run against a 50-transition one)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.record.recording import RecordedTurn
from runner.record.trace import RunSummary, TransitionRecord
from runner.service.config import ServiceConfig
from runner.service.runs import RunService
from runner.store import SqliteStore
from runner.travel import TRAVEL, load_travel_contracts
from tests.support.service_harness import KEYS, A
from tests.support.store_contract import header, record

pytestmark = pytest.mark.slow


def summary(run_id: str, transitions: int) -> RunSummary:
    return RunSummary(
        run_id=run_id,
        terminal="complete",
        reason="model_final",
        attempts=transitions,
        model_steps=1,
        tokens_in=1,
        tokens_out=1,
        elapsed_s=1.0,
        waits_s=[],
        answer="done",
        operations=[],
    )


def answered(seq: int, run_id: str) -> TransitionRecord:
    """The run's terminal transition: the model answered (with the reason its summary says)."""
    return dataclasses.replace(
        record(seq, run_id),
        to_state="complete",
        trigger="answer",
        tool=None,
        args=None,
        reason="model_final",
    )


class CountingStore(SqliteStore):
    """A SQLite store that counts the transition rows it hands out, and its reads of turns."""

    fetched = 0
    turn_reads = 0

    def turns(self, run_id: str) -> list[RecordedTurn]:
        self.turn_reads += 1
        return super().turns(run_id)

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        found = super().transitions(run_id)
        self.fetched += len(found)
        return found

    def transitions_after(self, run_id: str, after: int, limit: int) -> list[TransitionRecord]:
        found = super().transitions_after(run_id, after, limit)
        self.fetched += len(found)
        return found


@pytest.fixture
def store(tmp_path: Path) -> CountingStore:
    made = CountingStore(tmp_path / "runs.sqlite")
    for run_id, length in (("long", 5000), ("short", 50)):
        made.begin_run(header(run_id))
        made.append_all([(record(seq, run_id), ()) for seq in range(1, length + 1)])
    return made


@pytest.fixture
def service(store: CountingStore, tmp_path: Path) -> RunService:
    config = ServiceConfig.model_validate(
        {"api_keys": [{"key": key, **value} for key, value in KEYS.items()]}
    )
    return RunService(config, tmp_path / "runs.sqlite", load_travel_contracts(), None, world=TRAVEL,
                      shared=store)  # fmt: skip


def _rows(store: CountingStore, read: Callable[[], object]) -> int:
    """How many transition rows `read` fetched from the store."""
    before = store.fetched
    read()
    return store.fetched - before


@pytest.mark.parametrize("run_id, length", [("short", 50), ("long", 5000)])
def test_a_poll_at_the_end_of_a_run_reads_what_follows_alone(
    service: RunService, store: CountingStore, run_id: str, length: int
) -> None:
    key = service.config.key_for(A)
    assert key is not None
    assert _rows(store, lambda: service.events_after(run_id, length)) == 0  # nothing new
    store.append(record(length + 1, run_id))
    assert _rows(store, lambda: service.events_after(run_id, length)) == 1
    page = service.transitions(key, run_id, length - 5, 3)
    assert [t["seq"] for t in page["transitions"]] == [length - 4, length - 3, length - 2]
    assert _rows(store, lambda: service.transitions(key, run_id, length - 5, 3)) == 3


def test_reading_a_going_run_again_fetches_only_its_new_transitions(
    service: RunService, store: CountingStore
) -> None:
    key = service.config.key_for(A)
    assert key is not None
    assert _rows(store, lambda: service.run(key, "long")) == 5000  # the first read reads it all
    for _ in range(5):  # a page polling the run while it goes
        assert _rows(store, lambda: service.run(key, "long")) == 0
    store.append(record(5001, "long"))
    store.append(record(5002, "long"))
    assert _rows(store, lambda: service.run(key, "long")) == 2
    run = service.run(key, "long")
    assert [t["seq"] for t in run["transitions"]] == list(range(1, 5003))
    assert run["status"] == "running"
    assert _rows(store, lambda: service.list_runs(key, 0, 10)) == 50  # the short one, once
    assert _rows(store, lambda: service.list_runs(key, 0, 10)) == 0


def test_an_ended_run_polled_again_reads_its_turns_once(
    service: RunService, store: CountingStore
) -> None:
    """The output limits `GET /v1/runs/{id}` shows come from the run's turns: read on every poll
    while the run goes, and once for a run that has ended (they can no longer change)."""
    key = service.config.key_for(A)
    assert key is not None
    service.run(key, "short")
    service.run(key, "short")
    assert store.turn_reads == 2  # going: read each time
    store.append(answered(51, "short"))
    store.end_run(summary("short", 51))
    for _ in range(5):  # the page polls an ended run while its continuation starts
        assert service.run(key, "short")["context"]["max_output_tokens_per_step"] == []
    assert store.turn_reads == 3
    assert _rows(store, lambda: service.last_seq("short", 999)) == 0  # from what was read
    assert service.last_seq("short", 999) == 51


class EndingStore(SqliteStore):
    """Ends the run (its last transition, then its summary) right after a transitions read, as
    a run in another thread may between two reads of one poll."""

    def __init__(self, path: Path, run_id: str, last: int) -> None:
        super().__init__(path)
        self.ending: tuple[str, int] | None = (run_id, last)

    def transitions_after(self, run_id: str, after: int, limit: int) -> list[TransitionRecord]:
        found = super().transitions_after(run_id, after, limit)
        if self.ending is not None:
            run_id, last = self.ending
            self.ending = None
            self.append(answered(last + 1, run_id))
            self.end_run(summary(run_id, last + 1))
        return found


def test_a_poll_never_reports_the_end_before_the_last_transition(
    store: CountingStore, tmp_path: Path
) -> None:
    ending = EndingStore(tmp_path / "runs.sqlite", "short", 50)
    config = ServiceConfig.model_validate(
        {"api_keys": [{"key": key, **value} for key, value in KEYS.items()]}
    )
    service = RunService(config, tmp_path / "runs.sqlite", load_travel_contracts(), None,
                         world=TRAVEL, shared=ending)  # fmt: skip
    delivered: list[int] = []
    for _ in range(3):  # what the events stream does: the end only after a poll with nothing new
        records, end = service.events_after("short", delivered[-1] if delivered else 50)
        delivered.extend(r["seq"] for r in records)
        if end is not None and not records:
            break
    assert end is not None and end["terminal"] == "complete"
    assert delivered == [51]  # the run's last transition was streamed before its end
