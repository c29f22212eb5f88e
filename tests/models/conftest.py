"""The loopback model server for the adapter tests (test_live_adapters.py keeps its own copy)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..conftest import allow_loopback_only
from ..llm_server import RecordedLLMServer, load_recordings


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordedLLMServer]:
    """Loopback only: the no-network guard is lifted for 127.0.0.1 and nothing else."""
    allow_loopback_only(monkeypatch)
    with RecordedLLMServer(load_recordings()) as running:
        yield running
