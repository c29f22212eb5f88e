"""The fixture harness, for any world: the fixture format (`fixtures.py`), the world protocol a
world implements (`world.py`), the scenario driver that runs, resumes and continues a fixture in
its world (`scenario.py`), what its `expect` checks (`expectations.py`) and the script checks of
`runner fixtures check` (`checks.py`). It knows no world: the travel demo (`runner.travel`)
implements the protocol, and the faces (command line, service) say which world to use.

May import: every layer below it (`base` to `proof`); never `travel` or the faces.
"""

from __future__ import annotations

from .fixtures import Expect, Fixture, collect_fixture_paths, load_fixture, parse_fixture
from .scenario import ScenarioRun, continue_fixture, resume_fixture, run_fixture
from .world import ScriptedTools, Stage, World

__all__ = [
    "Expect",
    "Fixture",
    "ScenarioRun",
    "ScriptedTools",
    "Stage",
    "World",
    "collect_fixture_paths",
    "continue_fixture",
    "load_fixture",
    "parse_fixture",
    "resume_fixture",
    "run_fixture",
]
