"""At a budget that falls due within float noise of a recorded moment, counterfactual replay
either predicts what the real run does or says it cannot tell; it never guesses confidently."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from runner.harness.fixtures import load_fixture
from runner.proof.replay import Recording, describe, replay
from runner.record.spec import RunResult
from runner.record.trace import states_visited
from runner.store.memory import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES


def _ending(result: RunResult) -> tuple[object, ...]:
    writes = sorted(Counter((op.tool, op.status) for op in result.operations).items())
    return result.terminal.value, result.reason, writes, states_visited(result.transitions)


@pytest.mark.parametrize(
    "name", ["transient_timeout_retry", "parallel_calls", "hold_not_committed", "hold_slow_commit"]
)
def test_a_deadline_a_hair_after_the_run_ended_is_never_a_confident_wrong_prediction(
    name: str, tmp_path: Path, contracts: ContractSet
) -> None:
    """The run's last call takes no time and ends at T. Under max_seconds T + 1e-7 (or T, or
    within a microsecond either side) the real run may still finish; the replay said
    `abstain (deadline)` there because it counted any latency within 1e-6 s of the timeout as
    cut, a zero latency included."""
    fixture = load_fixture(FIXTURES / f"{name}.yaml", contracts)
    store = MemoryStore()
    recorded = run_fixture(fixture, contracts, store, world_dir=tmp_path)
    recording = Recording.from_store(store, recorded.result.run_id)
    ended = recorded.result.elapsed_s
    for offset in (-2e-6, -5e-7, -1e-9, 0.0, 1e-9, 1e-7, 5e-7, 2e-6):
        limits = fixture.budget.model_copy(update={"max_seconds": ended + offset})
        real = run_fixture(fixture.model_copy(update={"budget": limits}), contracts,
                           MemoryStore(), world_dir=tmp_path)  # fmt: skip
        predicted = replay(recording, contracts, limits=limits)
        result = predicted.replayed.result
        if result is None:
            continue  # it says it cannot tell: honest
        assert _ending(result) == _ending(real.result), (offset, describe(predicted))
