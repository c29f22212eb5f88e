"""Running, resuming and continuing a fixture in the travel world: the harness's driver
(`runner.harness.scenario`) with `TRAVEL` as its world, under the names and signatures these
always had. The driver's own names (`ScenarioRun`, `check_expectations`, `stored_fixture`, ...)
moved to the harness and are still found here for one release, with a `DeprecationWarning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.confirm import ApprovalSecret
from ..core.policy import Policy
from ..engine.handle import RunHandle
from ..harness import expectations as _expectations
from ..harness import scenario as _harness
from ..harness.fixtures import Fixture
from ..models.base import ModelAdapter
from ..record.spec import RunSpec
from ..record.trace import Durability
from ..store.base import Store
from ..tools.contracts import ContractSet
from ..tools.mcp import McpConfig, McpTools
from ..tools.retrieval import RetrieverFactory
from .world import SUPPLIER_TOOLS, TRAVEL

if TYPE_CHECKING:  # at run time, found by `__getattr__` below, with its warning
    from ..harness.scenario import ScenarioRun

__all__ = ["SUPPLIER_TOOLS", "continue_fixture", "resume_fixture", "run_fixture", "spec_for"]


def spec_for(fixture: Fixture, seed: int | None, world: dict[str, Any] | None = None) -> RunSpec:
    """The spec of a run of `fixture` in the travel world (`world`: where its place is)."""
    return _harness.spec_for(fixture, seed, world, world=TRAVEL)


def run_fixture(
    fixture: Fixture,
    contracts: ContractSet,
    store: Store,
    *,
    seed: int = 0,
    policy: Policy | None = None,
    world_dir: Path | None = None,
    model: ModelAdapter | None = None,
    retrievers: Mapping[str, RetrieverFactory] | None = None,
    mcp: McpTools | None = None,
    run_id: str | None = None,
    durability: Durability = "transition",
    started: Callable[[RunHandle], None] | None = None,
) -> ScenarioRun:
    """`runner.harness.scenario.run_fixture` in the travel world."""
    return _harness.run_fixture(
        fixture,
        contracts,
        store,
        world=TRAVEL,
        seed=seed,
        policy=policy,
        world_dir=world_dir,
        model=model,
        retrievers=retrievers,
        mcp=mcp,
        run_id=run_id,
        durability=durability,
        started=started,
    )


def resume_fixture(
    run_id: str,
    contracts: ContractSet,
    store: Store,
    *,
    model: ModelAdapter | None = None,
    store_dir: Path | None = None,
    mcp: McpConfig | None = None,
    durability: Durability | None = None,
    started: Callable[[RunHandle], None] | None = None,
) -> ScenarioRun:
    """`runner.harness.scenario.resume_fixture` in the travel world."""
    return _harness.resume_fixture(
        run_id,
        contracts,
        store,
        world=TRAVEL,
        model=model,
        store_dir=store_dir,
        mcp=mcp,
        durability=durability,
        started=started,
    )


def continue_fixture(
    run_id: str,
    contracts: ContractSet,
    store: Store,
    *,
    secret: ApprovalSecret,
    now: datetime,
    token: str | None = None,
    tenant: str | None = None,
    policy: Policy | None = None,
    store_dir: Path | None = None,
    mcp: McpConfig | None = None,
    model: ModelAdapter | None = None,
    started: Callable[[RunHandle], None] | None = None,
) -> ScenarioRun:
    """`runner.harness.scenario.continue_fixture` in the travel world."""
    return _harness.continue_fixture(
        run_id,
        contracts,
        store,
        world=TRAVEL,
        secret=secret,
        now=now,
        token=token,
        tenant=tenant,
        policy=policy,
        store_dir=store_dir,
        mcp=mcp,
        model=model,
        started=started,
    )


_MOVED_NAMES = {
    "ScenarioRun": "runner.harness.scenario",
    "stored_fixture": "runner.harness.scenario",
    "stored_world": "runner.harness.scenario",
    "check_expectations": "runner.harness.expectations",
    "preserved_key": "runner.harness.expectations",
}


def __getattr__(name: str) -> Any:
    """A name of the driver's, moved to the harness: found, with a warning naming where."""
    where = _MOVED_NAMES.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"{__name__}.{name} moved to {where}: import it from there",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(_harness if where.endswith("scenario") else _expectations, name)
