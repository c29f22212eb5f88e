"""The loopback model server for the adapter tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.llm_server import RecordedLLMServer, load_recordings
from tests.support.network import allow_loopback_only


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordedLLMServer]:
    """Loopback only: the no-network guard is lifted for 127.0.0.1 and nothing else."""
    allow_loopback_only(monkeypatch)
    with RecordedLLMServer(load_recordings()) as running:
        yield running
