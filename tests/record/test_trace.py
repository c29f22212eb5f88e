from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner.base.errors import LogFormatError
from runner.core.machine import Trigger
from runner.core.states import State
from runner.record.trace import RECORD_ADAPTER, TransitionRecord, read_log
from runner.store import FanoutStore, JsonlLog, MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.travel import make_fixture


def write_log(tmp_path: Path, contracts: ContractSet) -> Path:
    path = tmp_path / "log.jsonl"
    store = FanoutStore(MemoryStore(), JsonlLog(path))
    run_fixture(make_fixture(), contracts, store)
    store.close()
    return path


def test_log_round_trips(tmp_path: Path, contracts: ContractSet) -> None:
    path = tmp_path / "log.jsonl"
    memory = MemoryStore()
    store = FanoutStore(memory, JsonlLog(path))
    outcome = run_fixture(make_fixture(), contracts, store)
    store.close()
    [logged] = read_log(path)
    assert logged.transitions == memory.transitions(outcome.result.run_id)
    assert logged.summary is not None and logged.summary.terminal == "complete"
    assert logged.header.tenant == "optiverse"


def test_truncated_log_names_the_line(tmp_path: Path, contracts: ContractSet) -> None:
    path = write_log(tmp_path, contracts)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:2], lines[2][: len(lines[2]) // 2]]) + "\n")
    with pytest.raises(LogFormatError, match=r"line 3: not JSON"):
        read_log(path)


def test_edited_log_is_refused(tmp_path: Path, contracts: ContractSet) -> None:
    path = write_log(tmp_path, contracts)
    lines = path.read_text().splitlines()
    transitions = [i for i, line in enumerate(lines) if '"type": "transition"' in line]
    del lines[transitions[1]]  # drop the second transition: a gap in seq
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LogFormatError, match=r"transition seq 3, expected 2"):
        read_log(path)


def test_unknown_version_is_refused(tmp_path: Path, contracts: ContractSet) -> None:
    path = write_log(tmp_path, contracts)
    text = path.read_text().replace("runner-log/2", "runner-log/9", 1)
    path.write_text(text)
    with pytest.raises(LogFormatError, match="line 1: format"):
        read_log(path)


def test_a_record_is_built_as_its_dataclass_would_build_it() -> None:
    """`TransitionRecord`'s quicker `__init__` keeps the dataclass's contract: keyword-only,
    required fields required, unknown ones refused, defaults filled in, frozen, and equal to
    the record read back from its JSON."""
    at = datetime(2027, 3, 1, 9, tzinfo=UTC)
    record = TransitionRecord(
        run_id="r1", seq=1, time=at, from_state=State.PLAN, to_state=State.CALL,
        trigger=Trigger.PROPOSE, tokens_in=3,
    )  # fmt: skip
    assert record.tool is None and record.attempt == 0 and record.tokens_in == 3
    assert RECORD_ADAPTER.validate_json(RECORD_ADAPTER.dump_json(record)) == record
    assert dataclasses.replace(record, seq=2).seq == 2 and record.seq == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.seq = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        TransitionRecord(run_id="r1", seq=1, time=at)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        TransitionRecord(  # type: ignore[call-arg]
            run_id="r1", seq=1, time=at, from_state=State.PLAN, to_state=State.CALL,
            trigger=Trigger.PROPOSE, colour="red",
        )  # fmt: skip
    with pytest.raises(TypeError):
        TransitionRecord("r1", 1, at, State.PLAN, State.CALL, Trigger.PROPOSE)  # type: ignore[call-arg]
