"""The harness plays a fixture in whatever world it is given: the world's prompt, credentials and
place, nothing of the travel world's; the travel world's old names still lead to the harness."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from runner.base.clock import Clock
from runner.harness import Fixture, World, load_fixture, run_fixture
from runner.harness import scenario as harness_scenario
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.environment import ScriptedEnvironment
from tests.support.paths import FIXTURES


class _Place:
    """A place that leaves nothing to count, and says when it is closed."""

    def __init__(self) -> None:
        self.closed = False

    def toolbox(
        self, fixture: Fixture, clock: Clock, consumed: Mapping[str, int]
    ) -> ScriptedEnvironment:
        return ScriptedEnvironment(fixture.environment, fixture.tools, clock, None, consumed)

    def holds(self) -> int | None:
        return None

    def close(self) -> None:
        self.closed = True


class QuietWorld:
    """A world of one's own: its prompt, its credential, one place per run."""

    system_prompt = "You plan tool calls in a quiet test world."

    def __init__(self) -> None:
        self.places: list[_Place] = []

    def fixtures_dir(self) -> Path:
        return FIXTURES

    def credentials(self, fixture: Fixture) -> dict[str, str]:
        return {"quiet_token": f"q-{fixture.tenant}"}

    def stage(self, fixture: Fixture, world_dir: Path | None) -> tuple[_Place, dict[str, Any]]:
        self.places.append(_Place())
        return self.places[-1], {"place": len(self.places)}

    def restage(self, run_id: str, recorded: Mapping[str, Any], store_dir: Path | None) -> _Place:
        return _Place()

    def recorded_holds(
        self, recorded: Mapping[str, Any], store_dir: Path | None, *, must_exist: bool = False
    ) -> int | None:
        return None


def test_a_fixture_runs_in_the_world_it_is_given(contracts: ContractSet) -> None:
    world: World = QuietWorld()
    fixture = load_fixture(FIXTURES / "access_denied.yaml", contracts)
    store = MemoryStore()
    outcome = run_fixture(fixture, contracts, store, world=world)
    assert outcome.passed, outcome.failures
    header = store.header(outcome.result.run_id)
    assert header is not None
    assert header.system_prompt == QuietWorld.system_prompt
    assert header.annotations["world"] == {"place": 1}
    (call,) = outcome.environment.tools["search_flights"].invocations
    assert call.credentials == {"quiet_token": "q-optiverse"}
    assert outcome.holds is None
    assert isinstance(world, QuietWorld) and world.places[0].closed


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("ScenarioRun", "runner.harness.scenario"),
        ("stored_world", "runner.harness.scenario"),
        ("check_expectations", "runner.harness.expectations"),
    ],
)
def test_a_name_the_travel_scenario_had_is_the_harness_one_with_a_warning(
    name: str, home: str
) -> None:
    travel = importlib.import_module("runner.travel.scenario")
    with pytest.warns(DeprecationWarning, match=f"runner.travel.scenario.{name} moved to {home}"):
        found = getattr(travel, name)
    assert found is getattr(importlib.import_module(home), name)


def test_the_travel_scenario_runs_in_the_travel_world(contracts: ContractSet) -> None:
    from runner.travel import TRAVEL  # noqa: PLC0415
    from runner.travel.scenario import spec_for  # noqa: PLC0415

    fixture = load_fixture(FIXTURES / "access_denied.yaml", contracts)
    assert spec_for(fixture, 0) == harness_scenario.spec_for(fixture, 0, world=TRAVEL)
    assert spec_for(fixture, 0).system_prompt == TRAVEL.system_prompt
