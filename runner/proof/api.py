"""Reading a store from a service: a run's status, the list of runs, replay and grading.

Every function reads only the store (and, for replay, re-drives the recording without any live
model or tool). `replay_run` and `grade_run` are `async` so a service can call them from its own
event loop; `replay_run_sync` and `grade_run_sync` are the same for scripts.

A replay runs on a clock of its own (virtual time: a recorded 30 s backoff takes no time), which
needs its own event loop; `replay_run` drives it in a worker thread, so the caller's loop keeps
serving meanwhile.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..base.errors import ConfigError, LoadError
from ..core.budget import Limits
from ..core.policy import Policy
from ..core.states import State
from ..engine.engine import outside_a_loop
from ..record.trace import RunHeader, RunSummary, TransitionRecord
from ..store.adapters import as_async, is_async_store
from ..store.base import AsyncStore, RunListing, Store, UnreadableRun
from ..tools.contracts import ContractSet
from .grading import Expect, Trial, grade
from .replay import Recording, Replay, replay

__all__ = [
    "Expect",
    "Replay",
    "RunStatus",
    "Trial",
    "UnreadableRun",
    "grade_run",
    "grade_run_sync",
    "list_runs",
    "replay_run",
    "replay_run_sync",
    "run_status",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStatus:
    """Where a stored run stands, from its header, summary and transitions alone."""

    run_id: str
    name: str
    tenant: str
    started_at: datetime
    status: Literal["running", "ended"]
    """`ended`: the run has its one terminal record. `running`: not yet; a run still going, or
    one whose process stopped before it ended (resume it with `Engine.resume`)."""
    state: State
    """The state of its latest transition (`plan` before the first); terminal once ended."""
    reason: str | None
    """Why it ended (`model_final`, `deadline`, `cancelled`, ...); None while running."""
    transitions: int
    """How many transitions are stored."""

    @property
    def terminal(self) -> bool:
        return self.status == "ended"


def _status(
    records: list[TransitionRecord], header: RunHeader, summary: RunSummary | None
) -> RunStatus:
    if summary is not None:
        state, reason = State(summary.terminal), summary.reason
    else:
        state = State(records[-1].to_state) if records else State.PLAN
        reason = None
    return RunStatus(
        run_id=header.run_id,
        name=header.name,
        tenant=header.tenant,
        started_at=header.started_at,
        status="ended" if summary is not None else "running",
        state=state,
        reason=reason,
        transitions=len(records),
    )


def run_status(store: Store, run_id: str) -> RunStatus:
    """The status of one stored run; `LoadError` when the store has no such run."""
    _not_awaited(store, "run_status")
    header = store.header(run_id)
    if header is None:
        raise LoadError(f"no run {run_id} in the store")
    return _status(store.transitions(run_id), header, store.summary(run_id))


def list_runs(store: Store) -> list[RunStatus | UnreadableRun]:
    """Every stored run, oldest first; a run whose rows cannot be read is named, not fatal."""
    _not_awaited(store, "list_runs")
    return [
        _status(store.transitions(item.header.run_id), item.header, item.summary)
        if isinstance(item, RunListing)
        else item
        for item in store.runs()
    ]


def _not_awaited(store: object, name: str) -> None:
    if is_async_store(store):  # its reads are coroutines: say what to call instead
        raise ConfigError(f"{type(store).__name__} is awaited: use `await {name}_async(...)`")


async def run_status_async(store: Store | AsyncStore, run_id: str) -> RunStatus:
    """`run_status` awaited, for any store (PostgreSQL's is awaited); `LoadError` when the store
    has no such run."""
    awaited = as_async(store)
    header = await awaited.header(run_id)
    if header is None:
        raise LoadError(f"no run {run_id} in the store")
    return _status(await awaited.transitions(run_id), header, await awaited.summary(run_id))


async def list_runs_async(store: Store | AsyncStore) -> list[RunStatus | UnreadableRun]:
    """`list_runs` awaited, for any store (PostgreSQL's is awaited)."""
    awaited = as_async(store)
    return [
        _status(await awaited.transitions(item.header.run_id), item.header, item.summary)
        if isinstance(item, RunListing)
        else item
        for item in await awaited.runs()
    ]


async def _recording(store: Store | AsyncStore, run_id: str) -> Recording:
    awaited = as_async(store)  # a synchronous store is read inline, in the caller's thread
    header = await awaited.header(run_id)
    if header is None:
        raise LoadError(f"no run {run_id} in the store")
    return Recording(
        header=header,
        transitions=await awaited.transitions(run_id),
        turns=await awaited.turns(run_id),
        outputs=await awaited.outputs(run_id),
        summary=await awaited.summary(run_id),
    )


async def replay_run(
    store: Store | AsyncStore,
    run_id: str,
    contracts: ContractSet,
    *,
    policy: Policy | None = None,
    limits: Limits | None = None,
) -> Replay:
    """Replay a stored run: exactly (no `policy`/`limits`), or counterfactually under them.

    `replay.identical` tells whether the record is proven; `replay.divergence` says where not.
    """
    recording = await _recording(store, run_id)  # read here: a store keeps to its thread
    return await asyncio.to_thread(replay, recording, contracts, policy=policy, limits=limits)


def replay_run_sync(
    store: Store,
    run_id: str,
    contracts: ContractSet,
    *,
    policy: Policy | None = None,
    limits: Limits | None = None,
) -> Replay:
    """`replay_run` for synchronous code (no event loop may be running in this thread)."""
    return replay(Recording.from_store(store, run_id), contracts, policy=policy, limits=limits)


async def grade_run(
    store: Store | AsyncStore, run_id: str, contracts: ContractSet, expect: Expect | None = None
) -> Trial:
    """Grade a stored run from its record alone: the runner's promises (every call answered in
    order, no retry after access denied, waits within the deadline, ...), that the record
    replays as recorded (`replays_as_recorded`: the record's claims proven, not read), and
    `expect`'s outcome checks when given. `trial.passed`, `trial.failed` say how it went. The
    checks run in a thread, as `replay_run`'s replay does: the loop goes on serving meanwhile."""
    recording = await _recording(store, run_id)  # read here: a store keeps to its thread
    return await asyncio.to_thread(grade, recording, contracts, expect, None)


def grade_run_sync(
    store: Store, run_id: str, contracts: ContractSet, expect: Expect | None = None
) -> Trial:
    """`grade_run` for synchronous code (no event loop may be running in this thread: the
    replay it makes would fail, and the run be graded as failing)."""
    outside_a_loop("grade_run_sync", "await runner.proof.api.grade_run(...)")
    return grade(Recording.from_store(store, run_id), contracts, expect, None)
