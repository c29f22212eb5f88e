"""Loopback for the tests of real local servers (the suite refuses every connection otherwise)."""

from __future__ import annotations

import socket
from typing import Any

import pytest


def allow_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lift the no-network guard for loopback alone (tests of real local servers)."""
    monkeypatch.undo()  # drop the blanket guard, then allow 127.0.0.1, localhost and ::1
    original = socket.socket.connect

    def loopback_only(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if host not in {"127.0.0.1", "localhost", "::1"}:
            raise AssertionError(f"tests may only connect to loopback, not {host}")
        return original(self, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
