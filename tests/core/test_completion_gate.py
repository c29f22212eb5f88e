"""The completion gate: the completion fixtures end as declared and replay identical; what counts
as evidence is read from tool results only, and an unlisted value (`unknown`) never counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.core.evidence import EvidenceRequirement, missing_evidence
from runner.harness.fixtures import load_fixture
from runner.proof.api import replay_run_sync
from runner.store import SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES

GATE_FIXTURES = sorted((FIXTURES / "completion").glob("*.yaml"))
FLIGHT = EvidenceRequirement(
    name="flight",
    tool="search_flights",
    items="options",
    where={"assistance_status": ("reported_available",)},
)


@pytest.mark.parametrize("path", GATE_FIXTURES, ids=lambda p: p.stem)
def test_every_completion_fixture_ends_as_declared(
    path: Path, contracts: ContractSet, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        outcome = run_fixture(load_fixture(path, contracts), contracts, store)
        assert outcome.passed, outcome.failures
        replayed = replay_run_sync(store, outcome.result.run_id, contracts)
        assert replayed.identical, replayed.divergence
        insisted = [r for r in outcome.result.transitions if r.trigger == "insist"]
        assert len(insisted) <= 1  # told once, never twice
        if outcome.result.reason.startswith("missing_evidence"):
            assert outcome.result.answer  # the premature answer is kept as partial
    finally:
        store.close()


def _item(status: str, result_class: str = "ok", tool: str = "search_flights") -> dict[str, object]:
    return {
        "tool": tool,
        "result_class": result_class,
        "result": {"options": [{"flight_id": "NH7", "assistance_status": status}]},
    }


def test_only_an_accepted_value_from_the_named_tool_counts() -> None:
    assert missing_evidence([FLIGHT], [_item("reported_available")]) == []
    assert missing_evidence([FLIGHT], [_item("unknown")]) == ["flight"]
    assert missing_evidence([FLIGHT], [_item("reported_available", tool="search_hotels")]) == [
        "flight"
    ]
    assert missing_evidence([FLIGHT], [_item("reported_available", result_class="empty")]) == [
        "flight"
    ]
    assert missing_evidence([FLIGHT], []) == ["flight"]
    broken = {"tool": "search_flights", "result_class": "ok", "result": {"options": "NH7"}}
    assert missing_evidence([FLIGHT], [broken]) == ["flight"]
