"""Operation keys and records: one key per logical write intent, bound to its parameters.

A key is scoped by tenant and operation (the tool) and minted from the run and the hash of the
canonical validated parameters, so a retry of the same intent reuses it and a new intent (other
parameters) gets a new one. The store binds each key to its parameter hash: a claim with the same
key and another hash is refused as `idempotency_mismatch`.

Status: `pending` (intent recorded, outcome not yet known) -> `committed` | `failed` | `unknown`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..base._jsonsafe import PLAIN_LEAVES
from ..core.states import OperationStatus
from ..models.transcript import render_json


def canonical(value: Any) -> Any:
    """`value` with every integral float written as the integer it is: JSON Schema (and the
    contracts' `integer`) count 4 and 4.0 as one value, so one write must get one key.

    A dict of plain leaves (no float) is canonical already and comes back as itself, not copied:
    callers hash or copy what they get, never change it."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:  # most leaves: as they are
        return value
    if kind is dict:
        if PLAIN_LEAVES.issuperset(map(type, value.values())):
            return value  # most arguments: a dict of such leaves, canonical as it is
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [canonical(item) for item in value]
    return value


def parameter_hash(arguments: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of validated parameters."""
    return hashlib.sha256(render_json(canonical(arguments)).encode()).hexdigest()


def mint_key(tenant: str, tool: str, run_id: str, params_hash: str, generation: int = 0) -> str:
    """The operation key for one write intent.

    `generation` stays 0 for the runner's own retries; only the naive simulation (`runner.core.sim`)
    bumps it, which is exactly the bug (a fresh key per retry) it exists to demonstrate.
    """
    seed = f"{tenant}\x1f{tool}\x1f{run_id}\x1f{params_hash}\x1f{generation}"
    return f"{tenant}:{tool}:{hashlib.sha256(seed.encode()).hexdigest()[:32]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """One write intent as the store keeps it."""

    key: str
    tenant: str
    tool: str
    run_id: str
    params_hash: str
    status: OperationStatus
    created_at: datetime
    expires_at: datetime
    """After this the key may be forgotten (the retry horizon)."""
    dispatch: int
    """Ordinal of the run's latest dispatch under this key: the intent is written before it, so
    a dispatch with no recorded outcome was in flight when the runner stopped."""
    result: dict[str, Any] | None = None
    """The committed result (e.g. the hold), when known."""
