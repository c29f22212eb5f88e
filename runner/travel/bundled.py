"""Where the travel world's contracts and fixtures are, in a checkout or in a plain install, and
the world's whole contract set.

The top-level `contracts/` and `fixtures/` folders stay where the repository keeps them. A wheel
ships copies of them inside this package (`bundled_contracts/`, `bundled_fixtures/`, mapped in
`pyproject.toml`), so an installed `runner` finds them from any directory. A checkout (and an
editable install of it) has no copies and reads the folders themselves.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ..tools.contracts import ContractSet, load_contracts
from .catalogue import catalogue_contracts
from .research import research_contracts
from .rules import SEMANTIC_RULES

_HERE = Path(__file__).resolve().parent


def _bundled(name: str) -> Path:
    installed = _HERE / f"bundled_{name}"
    return installed if installed.is_dir() else _HERE.parent.parent / name


def contracts_dir() -> Path:
    """The travel contracts folder (the checkout's `contracts/`, or the installed copy)."""
    return _bundled("contracts")


def fixtures_dir() -> Path:
    """The bundled fixtures folder (the checkout's `fixtures/`, or the installed copy)."""
    return _bundled("fixtures")


@functools.cache
def load_travel_contracts() -> ContractSet:
    """The travel world's contracts, compiled once per process: the bundled contract files with
    their semantic rules, the tool catalogue beside them (`catalogue.py`: travel look-alikes and
    other domains' tools, for tool retrieval) and the research sub-agent (`research.py`: a
    child-run tool). The fixtures in `fixtures/features/` use the last two."""
    files = load_contracts(contracts_dir(), SEMANTIC_RULES)
    return ContractSet([*files.values(), *catalogue_contracts(), *research_contracts()])
