"""The fixtures' travel world: a demo domain beside the core, which never imports it.

It implements the harness's world protocol (`world.py`: `TRAVEL`): its tools' semantic rules
(`rules.py`), the simulated hotel supplier (`supplier.py`), the scripted environment that plays a
fixture's tool outcomes (`environment.py`), its system prompt (`prompt.py`), where its bundled
contracts and fixtures are and its whole contract set (`bundled.py`), the tool catalogue for
tool retrieval (`catalogue.py`), the research sub-agent, a child-run tool (`research.py`),
approval fixtures played end to end (`approval_play.py`), and the harness's driver bound to it
under its old names (`scenario.py`). The faces (`runner.cli`, `runner.service`'s factories) wire
it to the harness; `tests/test_import_graph.py` keeps everything below it free of it.

May import: every layer below it, the harness included; never the faces.
"""

from __future__ import annotations

from ..harness.fixtures import TaskConstraints
from .bundled import contracts_dir, fixtures_dir, load_travel_contracts
from .prompt import SYSTEM_PROMPT
from .rules import SEMANTIC_RULES
from .world import TRAVEL, TravelWorld

__all__ = [
    "SEMANTIC_RULES",
    "SYSTEM_PROMPT",
    "TRAVEL",
    "TaskConstraints",
    "TravelWorld",
    "contracts_dir",
    "fixtures_dir",
    "load_travel_contracts",
]
