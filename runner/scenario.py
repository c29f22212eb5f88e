"""Run a fixture on its fake clock with its scripted tools and model; check its `expect`."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from .clock import FakeClock
from .contracts import ContractSet
from .engine import Engine, RunResult, RunSpec
from .environment import ScriptedEnvironment
from .fixtures import Expect, Fixture
from .models.scripted import ScriptedModel
from .policy import Policy
from .store.base import Store
from .tools import Principal


@dataclass(slots=True, kw_only=True)
class ScenarioRun:
    fixture: Fixture
    result: RunResult
    failures: list[str]
    environment: ScriptedEnvironment

    @property
    def passed(self) -> bool:
        return not self.failures


def spec_for(fixture: Fixture, seed: int | None) -> RunSpec:
    return RunSpec(
        task=fixture.task,
        tenant=fixture.tenant,
        principal=Principal(id=fixture.principal.id, scopes=frozenset(fixture.principal.scopes)),
        tools=tuple(fixture.tools),
        limits=fixture.budget,
        # The runtime's credential for the simulated suppliers; never shown to the model.
        credentials={"supplier_token": f"sim-{fixture.tenant}"},
        context={"task": fixture.constraints},
        name=fixture.name,
        seed=seed,
    )


def run_fixture(
    fixture: Fixture,
    contracts: ContractSet,
    store: Store,
    *,
    seed: int = 0,
    policy: Policy | None = None,
) -> ScenarioRun:
    """Run one fixture from a clean state on its own fake clock."""
    clock = FakeClock(fixture.clock.start)
    environment = ScriptedEnvironment(fixture.environment, fixture.tools, clock)
    engine = Engine(
        contracts=contracts,
        toolbox=environment,
        store=store,
        clock=clock,
        policy=policy,
        rng=random.Random(seed),
    )
    result = engine.run_sync(spec_for(fixture, seed), ScriptedModel(fixture.model))
    failures = check_expectations(fixture.expect, result) if fixture.expect else []
    return ScenarioRun(fixture=fixture, result=result, failures=failures, environment=environment)


def visited_states(result: RunResult) -> list[str]:
    if not result.transitions:
        return []
    return [result.transitions[0].from_state, *(r.to_state for r in result.transitions)]


def check_expectations(expect: Expect, result: RunResult) -> list[str]:
    """Every way `result` differs from `expect`, as readable lines (empty: all met)."""
    failures: list[str] = []

    def compare(label: str, wanted: Any, got: Any) -> None:
        if wanted is not None and wanted != got:
            failures.append(f"{label}: expected {wanted!r}, got {got!r}")

    compare("terminal", expect.terminal.value, result.terminal.value)
    compare("reason", expect.reason, result.reason)
    compare("attempts", expect.attempts, result.attempts)
    compare("model_steps", expect.model_steps, result.model_steps)
    if expect.waits_s is not None:
        compare(
            "waits_s", [round(w, 3) for w in expect.waits_s], [round(w, 3) for w in result.waits_s]
        )
    if expect.transitions is not None:
        compare("transitions", [s.value for s in expect.transitions], visited_states(result))
    for fragment in expect.answer_contains or ():
        if fragment not in (result.answer or ""):
            failures.append(f"answer: expected to contain {fragment!r}, got {result.answer!r}")
    return failures
