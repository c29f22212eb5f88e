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

from .budget import Limits
from .contracts import ContractSet
from .errors import LoadError
from .grading import Expect, Trial, grade
from .policy import Policy
from .replay import Recording, Replay, replay
from .states import State
from .store.base import RunListing, Store, UnreadableRun
from .trace import RunHeader, RunSummary

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


def _status(store: Store, header: RunHeader, summary: RunSummary | None) -> RunStatus:
    records = store.transitions(header.run_id)
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
    header = store.header(run_id)
    if header is None:
        raise LoadError(f"no run {run_id} in the store")
    return _status(store, header, store.summary(run_id))


def list_runs(store: Store) -> list[RunStatus | UnreadableRun]:
    """Every stored run, oldest first; a run whose rows cannot be read is named, not fatal."""
    return [
        _status(store, item.header, item.summary) if isinstance(item, RunListing) else item
        for item in store.runs()
    ]


async def replay_run(
    store: Store,
    run_id: str,
    contracts: ContractSet,
    *,
    policy: Policy | None = None,
    limits: Limits | None = None,
) -> Replay:
    """Replay a stored run: exactly (no `policy`/`limits`), or counterfactually under them.

    `replay.identical` tells whether the record is proven; `replay.divergence` says where not.
    """
    recording = Recording.from_store(store, run_id)  # read here: a store keeps to its thread
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
    store: Store, run_id: str, contracts: ContractSet, expect: Expect | None = None
) -> Trial:
    """Grade a stored run from its record alone: the runner's promises (every call answered in
    order, no retry after access denied, waits within the deadline, ...), and `expect`'s
    outcome checks when given. `trial.passed`, `trial.failed` say how it went."""
    return grade_run_sync(store, run_id, contracts, expect)


def grade_run_sync(
    store: Store, run_id: str, contracts: ContractSet, expect: Expect | None = None
) -> Trial:
    """`grade_run` for synchronous code."""
    return grade(Recording.from_store(store, run_id), contracts, expect, None)
