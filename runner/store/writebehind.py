"""How the engine writes to an awaited store (`AsyncStore`, e.g. PostgreSQL) without awaiting
in its synchronous moves.

The engine's moves stay synchronous (a move is a pure step plus a record). With an awaited
store, each write a move makes is queued per run, in order, and the engine awaits the queue at
the points where durability is owed: before each phase of the run (so everything a step recorded
is stored before the next model request or tool dispatch), before each write intent is claimed
(the claim itself is awaited: its answer decides whether to dispatch), and when the run ends.
A synchronous store (memory, SQLite) is written in place as before: nothing here is on its path.
Inputs stored before their transition (`append_inputs`) are queued like any write; the engine
flushes the run's queue at once after them (they are stored to survive a crash meanwhile).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from ..base.errors import StoreError
from ..core.states import OperationStatus
from ..record.operations import Operation
from ..record.recording import Recorded, RecordedOutput, RecordedTurn
from ..record.trace import RunHeader, RunSummary, TransitionRecord
from ._early import HeldInputs
from .approvals import ApprovalDecision, AsyncApprovalLedger, Proposal
from .base import AsyncStore, RunListing, UnreadableRun

Write = Callable[[], Awaitable[None]]


class PendingWrites:
    """The `Store` the engine writes to when its store is awaited: writes queue per run and go
    out, in order, at `flush`. Reading through it is refused (the engine reads the store itself)."""

    __slots__ = ("_early", "_key_runs", "_queues", "store")

    def __init__(self, store: AsyncStore) -> None:
        self.store = store
        self._queues: dict[str, deque[Write]] = {}
        self._key_runs: dict[str, str] = {}
        """The run each claimed key belongs to (a settle names only the key)."""
        self._early = HeldInputs()
        """Inputs for a store that takes none alone, until the run's next transition."""

    def _queue(self, run_id: str, write: Write) -> None:
        queue = self._queues.get(run_id)
        if queue is None:
            queue = self._queues[run_id] = deque()
        queue.append(write)

    async def flush(self, run_id: str) -> None:
        """Store every write queued for `run_id`, oldest first; the first failure is raised and
        the writes after it are dropped with it (the run stops there, as with a sync store)."""
        queue = self._queues.get(run_id)
        if not queue:
            return
        try:
            while queue:
                await queue.popleft()()
        finally:
            queue.clear()

    async def claim_awaited(self, operation: Operation) -> Operation:
        """What came before is stored first, then the intent is claimed."""
        await self.flush(operation.run_id)
        stored = await self.store.claim(operation)
        self._key_runs[operation.key] = operation.run_id
        return stored

    def adopt(self, key: str, run_id: str) -> None:
        """Know `key` as `run_id`'s (claimed before a resume; its settle may come first)."""
        self._key_runs[key] = run_id

    def forget(self, run_id: str) -> None:
        """Drop a finished run's bookkeeping (after its last flush)."""
        self._queues.pop(run_id, None)
        for key in [k for k, r in self._key_runs.items() if r == run_id]:
            del self._key_runs[key]

    # -- the writes the engine's synchronous moves make ------------------------------------------

    def begin_run(self, header: RunHeader) -> None:
        self._queue(header.run_id, lambda: self.store.begin_run(header))

    def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None:
        if self._early.runs:
            inputs = self._early.ahead(record.run_id, inputs)
        inputs = tuple(inputs)  # the caller's list is reused
        self._queue(record.run_id, lambda: self.store.append(record, inputs))

    def append_inputs(self, run_id: str, inputs: Sequence[Recorded]) -> None:
        take = getattr(self.store, "append_inputs", None)
        if take is None:
            self._early.hold(run_id, inputs)
            return
        kept = tuple(inputs)
        self._queue(run_id, lambda: take(run_id, kept))

    def end_run(self, summary: RunSummary) -> None:
        self._queue(summary.run_id, lambda: self.store.end_run(summary))

    def settle(
        self, key: str, status: OperationStatus, result: dict[str, Any] | None = None
    ) -> None:
        run_id = self._key_runs.get(key)
        if run_id is None:
            raise StoreError(f"no operation under key {key} claimed by this engine")
        self._queue(run_id, lambda: self.store.settle(key, status, result))

    @property
    def keeps_approvals(self) -> bool:
        return isinstance(self.store, AsyncApprovalLedger)

    def propose(self, proposal: Proposal) -> Proposal:
        """Queued with the run's writes: stored before the run's end is (admission proposes
        while the run decides, and the proposal is what the run then waits for)."""
        ledger = self.store
        if not isinstance(ledger, AsyncApprovalLedger):
            raise StoreError(f"{type(ledger).__name__} keeps no approvals")

        async def write() -> None:
            await ledger.propose(proposal)

        self._queue(proposal.run_id, write)
        return proposal

    def proposals(self, run_id: str | None = None) -> list[Proposal]:
        raise self._refused()

    def decide(self, run_id: str, operation_key: str, decision: ApprovalDecision) -> Proposal:
        raise self._refused()

    def use_token(self, token_id: str, run_id: str, at: datetime) -> None:
        raise self._refused()

    def close(self) -> None:
        """The store is the caller's to close (`await store.close()`)."""

    # -- reads: the engine awaits the store for these -----------------------------------------

    def _refused(self) -> StoreError:
        return StoreError("read an awaited store with await, not through the engine's queue")

    def header(self, run_id: str) -> RunHeader | None:
        raise self._refused()

    def summary(self, run_id: str) -> RunSummary | None:
        raise self._refused()

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        raise self._refused()

    def transitions_after(self, run_id: str, after: int, limit: int) -> list[TransitionRecord]:
        raise self._refused()

    def turns(self, run_id: str) -> list[RecordedTurn]:
        raise self._refused()

    def outputs(self, run_id: str) -> list[RecordedOutput]:
        raise self._refused()

    def runs(self) -> list[RunListing | UnreadableRun]:
        raise self._refused()

    def operations(self, run_id: str) -> list[Operation]:
        raise self._refused()

    def claim(self, operation: Operation) -> Operation:
        raise StoreError("claim through an awaited store is awaited: claim_awaited")
