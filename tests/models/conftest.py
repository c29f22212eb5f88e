"""The loopback model server for the adapter tests (test_live_adapters.py keeps its own copy)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from ..llm_server import RecordedLLMServer, load_recordings


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordedLLMServer]:
    """Loopback only: the no-network guard is lifted for 127.0.0.1 and nothing else."""
    monkeypatch.undo()  # drop the suite's blanket guard, then allow loopback alone

    original = socket.socket.connect

    def loopback_only(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if host not in {"127.0.0.1", "localhost", "::1"}:
            raise AssertionError(f"tests may only connect to loopback, not {host}")
        return original(self, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    with RecordedLLMServer(load_recordings()) as running:
        yield running
