"""The bundled `fixtures/features/` folder: tool retrieval over the 60-tool catalogue, a child run
on its parent's budget and a money budget, from the fixtures alone; a fixture's child-run tools
(`children:`) are checked when it loads, and its children are resumed with it after a crash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.base.errors import FixtureError
from runner.harness.fixtures import collect_fixture_paths, load_fixture
from runner.proof.api import grade_run_sync, replay_run_sync
from runner.store import MemoryStore, SqliteStore
from runner.tools.children import family_ids
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES

FEATURES = FIXTURES / "features"
PATHS = collect_fixture_paths([FEATURES])
FAMILY = FEATURES / "child_run_shared_budget.yaml"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_a_feature_fixture_meets_its_expectations_three_times(
    path: Path, contracts: ContractSet
) -> None:
    fixture = load_fixture(path, contracts)
    outcomes = [run_fixture(fixture, contracts, MemoryStore()) for _ in range(3)]
    assert [o.failures for o in outcomes] == [[], [], []]
    shapes = {
        tuple((r.to_state, r.tool, r.result_class) for r in o.result.transitions) for o in outcomes
    }
    assert len(shapes) == 1


def test_retrieval_offers_four_of_the_catalogue_at_every_request(contracts: ContractSet) -> None:
    fixture = load_fixture(FEATURES / "tool_retrieval.yaml", contracts)
    result = run_fixture(fixture, contracts, MemoryStore()).result
    offers = [r.offered for r in result.transitions if r.trigger == "propose"]
    assert len(fixture.tools) == 60 and offers and all(len(o or ()) == 4 for o in offers)
    called = [r.tool for r in result.transitions if r.trigger == "classify"]
    assert all(tool in offer for tool, offer in zip(called, offers, strict=True) if offer)


def test_the_child_is_carved_from_what_its_parent_has_left(
    tmp_path: Path, contracts: ContractSet
) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    outcome = run_fixture(load_fixture(FAMILY, contracts), contracts, store)
    [child] = outcome.children
    header = store.header(child.run_id)
    assert header is not None and header.limits["max_attempts"] == 2  # 6 of its own, 2 left
    assert outcome.result.attempts == 4 and child.attempts == 2  # charged to the parent
    for run_id in family_ids(store, outcome.result.run_id):
        assert replay_run_sync(store, run_id, contracts).identical
        assert grade_run_sync(store, run_id, contracts).passed
    store.close()


def _family(tmp_path: Path, children: str, tools: str = "[research_trip]") -> Path:
    path = tmp_path / "f.yaml"
    path.write_text(
        "name: f\ndescription: d\ntask: t\ntenant: t\nprincipal: {id: a, scopes: [travel.read]}\n"
        f"tools: {tools}\nmodel: [{{final: done}}]\n{children}"
    )
    return path


@pytest.mark.parametrize(
    ("children", "tools", "problem"),
    [
        ("", "[research_trip]", "research_trip is a child-run tool: script its child"),
        ("children: {search_flights: {task: x, tools: [search_flights], model: [{final: a}]}}",
         "[search_flights]", "children.search_flights: search_flights is not a child-run tool"),
        ("children: {research_trip: {task: 'About {topic}', tools: [search_flights], "
         "model: [{final: a}]}}", "[research_trip]",
         "children.research_trip.task names topic, not arguments of research_trip"),
        ("children: {research_trip: {task: x, tools: [research_trip], model: [{final: a}]}}",
         "[research_trip]", "children.research_trip.tools: research_trip is a child-run tool"),
        ("children: {research_trip: {task: x, tools: [no_such_tool], model: [{final: a}]}}",
         "[research_trip]", "tools without a contract: no_such_tool"),
    ],
    ids=["unscripted", "not_a_child_tool", "unknown_argument", "nested", "unknown_child_tool"],
)  # fmt: skip
def test_a_fixtures_children_are_checked_when_it_loads(
    tmp_path: Path, contracts: ContractSet, children: str, tools: str, problem: str
) -> None:
    with pytest.raises(FixtureError, match=r"f\.yaml") as raised:
        load_fixture(_family(tmp_path, children, tools), contracts)
    assert problem in str(raised.value)


@pytest.mark.slow
@pytest.mark.parametrize("commits", [5, 14, 20])
def test_a_family_killed_mid_run_resumes_to_its_expectations(tmp_path: Path, commits: int) -> None:
    """Killed while the parent runs, while its child runs, and after the child ended:
    `runner resume` of the parent goes on (resuming the child) and meets both expectations."""
    runner = [sys.executable, "-m", "runner"]
    env = {**os.environ, "RUNNER_KILL_AFTER_COMMITS": str(commits)}
    killed = subprocess.run(
        [*runner, "run", str(FAMILY), "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stdout + killed.stderr
    store = SqliteStore(tmp_path / "runs.sqlite", read_only=True)
    [parent] = [
        item.header.run_id
        for item in store.runs()
        if getattr(item, "header", None) is not None
        and item.header.name == "child_run_shared_budget"
    ]
    store.close()
    resumed = subprocess.run(
        [*runner, "resume", parent],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "expect: met" in resumed.stdout and "child research_trip:child" in resumed.stdout
