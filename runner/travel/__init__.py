"""The fixtures' travel world: a demo domain beside the core, which never imports it.

Its tools' semantic rules (`rules.py`), the simulated hotel supplier (`supplier.py`), the scripted
environment that plays a fixture's tool outcomes (`environment.py`), the fixture format
(`fixtures.py`), running and resuming a fixture in this world (`scenario.py`), its system prompt
(`prompt.py`) and where its bundled contracts and fixtures are (`bundled.py`). The command line
(`runner.cli`) wires it to the core; `tests/test_import_graph.py` keeps the core free of it.

May import: every layer but the faces (`cli`, `service`, `distributed`).
"""

from __future__ import annotations

from .bundled import contracts_dir, fixtures_dir, load_travel_contracts
from .prompt import SYSTEM_PROMPT
from .rules import SEMANTIC_RULES, TaskConstraints

__all__ = [
    "SEMANTIC_RULES",
    "SYSTEM_PROMPT",
    "TaskConstraints",
    "contracts_dir",
    "fixtures_dir",
    "load_travel_contracts",
]
