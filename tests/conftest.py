"""Shared test setup: no network, nothing written into the checkout, the travel contracts, and
the throwaway PostgreSQL cluster. What tests import lives in `tests/support/`."""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

from runner.tools.contracts import ContractSet
from runner.travel import load_travel_contracts
from tests.support.paths import ROOT

# Hypothesis keeps its caches in `./.hypothesis`, inside the checkout: they go to the system's temp
# folder instead, and there is no example database (a failure prints its example and seed, which
# reproduce it).
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "runner-tests-hypothesis")
settings.register_profile("runner", database=None)
settings.load_profile("runner")

_SCRATCH = frozenset(
    {".git", ".venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "build"}
)
"""What the tools around the tests keep in the checkout (all ignored by git), not the tests."""


def _checkout_files() -> set[Path]:
    found: set[Path] = set()
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [
            name for name in subfolders if name not in _SCRATCH and not name.endswith(".egg-info")
        ]
        found.update(Path(folder, name) for name in files)
    return found


_BEFORE = _checkout_files()
"""Taken when this file is imported: before collection, which may write too."""


@pytest.fixture(scope="session", autouse=True)
def _nothing_written_into_the_checkout() -> Iterator[None]:
    """No test leaves a file in the working tree (a `./runs.sqlite`, a log, a world, a cache)."""
    yield
    new = sorted(str(path.relative_to(ROOT)) for path in _checkout_files() - _BEFORE)
    assert not new, f"tests wrote into the checkout: {', '.join(new)}"


@pytest.fixture(autouse=True)
def _run_from_elsewhere(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test runs in a scratch directory, so a default path (`runs.sqlite`, `--log x.jsonl`)
    lands there and never in the user's checkout."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail fast on any outbound connection: the fixtures' world is simulated."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("tests must not open network connections")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


@pytest.fixture(autouse=True)
def _quiet_logging() -> Iterator[None]:
    """Transitions log at info; keep test output to warnings, and undo what the CLI configures."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="session")
def contracts() -> ContractSet:
    return load_travel_contracts()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the throwaway PostgreSQL cluster, through whichever fixture, is in the
    `pg` lane (a fixture that asks for it only at run time marks its parameter itself)."""
    for item in items:
        if "pg_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.pg)


# The throwaway PostgreSQL cluster (started only when a test asks for it).
from tests.support.pg import pg_cluster, pg_url  # noqa: E402, F401
