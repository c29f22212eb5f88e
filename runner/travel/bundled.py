"""Where the travel world's contracts and fixtures are, in a checkout or in a plain install.

The top-level `contracts/` and `fixtures/` folders stay where the repository keeps them. A wheel
ships copies of them inside this package (`bundled_contracts/`, `bundled_fixtures/`, mapped in
`pyproject.toml`), so an installed `runner` finds them from any directory. A checkout (and an
editable install of it) has no copies and reads the folders themselves.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ..tools.contracts import ContractSet, load_contracts
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
    """The bundled travel contracts with their semantic rules, compiled once per process."""
    return load_contracts(contracts_dir(), SEMANTIC_RULES)
