"""Bridges between the synchronous `Store` and the awaited `AsyncStore`.

`as_async` serves a synchronous store (memory, SQLite: local, fast, no network) through the
awaited protocol by calling it inline: no thread hop, so SQLite's per-transition cost stays what
it was. `BlockingStore` goes the other way, for the reading commands of the command line: it runs
an awaited store (PostgreSQL) on an event loop of its own in a background thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import Future
from datetime import datetime, timedelta
from typing import Any, TypeGuard, TypeVar

from ..base.errors import ConfigError, StoreError
from ..core.states import OperationStatus
from ..record.operations import Operation
from ..record.recording import Recorded, RecordedOutput, RecordedTurn
from ..record.trace import RunHeader, RunSummary, TransitionRecord
from ._early import HeldInputs, pass_on
from .approvals import ApprovalDecision, AsyncApprovalLedger, Proposal
from .base import AsyncStore, CancelRequests, Lease, Leases, RunListing, Store, UnreadableRun

T = TypeVar("T")


class AsyncAdapter:
    """A synchronous `Store` (with `Leases`, where it keeps them) as an `AsyncStore`."""

    __slots__ = ("_early", "store")

    def __init__(self, store: Store) -> None:
        self.store = store
        self._early = HeldInputs()
        """Inputs for a store that takes none alone, until the run's next transition."""

    def _leases(self) -> Leases:
        if not isinstance(self.store, Leases):
            raise StoreError(f"{type(self.store).__name__} keeps no run leases")
        return self.store

    async def begin_run(self, header: RunHeader) -> None:
        self.store.begin_run(header)

    async def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None:
        if self._early.runs:
            inputs = self._early.ahead(record.run_id, inputs)
        self.store.append(record, inputs)

    async def append_inputs(self, run_id: str, inputs: Sequence[Recorded]) -> None:
        pass_on(self.store, self._early, run_id, inputs)

    async def end_run(self, summary: RunSummary) -> None:
        self.store.end_run(summary)

    async def close(self) -> None:
        self.store.close()

    async def header(self, run_id: str) -> RunHeader | None:
        return self.store.header(run_id)

    async def summary(self, run_id: str) -> RunSummary | None:
        return self.store.summary(run_id)

    async def transitions(self, run_id: str) -> list[TransitionRecord]:
        return self.store.transitions(run_id)

    async def transitions_after(
        self, run_id: str, after: int, limit: int
    ) -> list[TransitionRecord]:
        return self.store.transitions_after(run_id, after, limit)

    async def turns(self, run_id: str) -> list[RecordedTurn]:
        return self.store.turns(run_id)

    async def outputs(self, run_id: str) -> list[RecordedOutput]:
        return self.store.outputs(run_id)

    async def runs(self) -> list[RunListing | UnreadableRun]:
        return self.store.runs()

    async def claim(self, operation: Operation) -> Operation:
        return self.store.claim(operation)

    async def settle(
        self, key: str, status: OperationStatus, result: dict[str, Any] | None = None
    ) -> None:
        self.store.settle(key, status, result)

    async def operations(self, run_id: str) -> list[Operation]:
        return self.store.operations(run_id)

    async def acquire_lease(
        self, run_id: str, owner: str, now: datetime, ttl: timedelta
    ) -> Lease | None:
        return self._leases().acquire_lease(run_id, owner, now, ttl)

    async def renew_lease(self, lease: Lease, now: datetime, ttl: timedelta) -> Lease:
        return self._leases().renew_lease(lease, now, ttl)

    async def release_lease(self, lease: Lease) -> None:
        self._leases().release_lease(lease)


def as_async(store: Store | AsyncStore) -> AsyncStore:
    """`store` as an `AsyncStore` (itself when it is one already). A `BlockingStore` is served
    as the synchronous store it is: its awaited store belongs to its own loop."""
    if is_async_store(store):
        return store
    return AsyncAdapter(store)  # type: ignore[arg-type]  # not awaited: the sync protocol


def is_async_store(store: object) -> TypeGuard[AsyncStore]:
    """Whether `store` is awaited (an `AsyncStore`) rather than a synchronous `Store`."""
    return asyncio.iscoroutinefunction(getattr(store, "append", None))


class BlockingStore:
    """An `AsyncStore` served synchronously (the `Store` protocol), on its own event loop in a
    daemon thread. For code that cannot await (the command line's reading commands); never for
    the engine's hot path."""

    def __init__(self, opener: Callable[[], Awaitable[AsyncStore]]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="runner-store-loop", daemon=True
        )
        self._thread.start()
        self._watchers: dict[str, Callable[[TransitionRecord], None]] = {}
        self._early = HeldInputs()
        """Inputs for an awaited store that takes none alone, until the run's next transition."""
        try:
            self.store: AsyncStore = self._call(_awaited(opener))
        except BaseException:
            self._stop()
            raise

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result()

    def on_its_loop(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the store's own loop (what it starts there, such as a lease's
        renewal, goes on there) and return its result."""
        return self._call(coroutine)

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def begin_run(self, header: RunHeader) -> None:
        self._call(self.store.begin_run(header))

    def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None:
        if self._early.runs:
            inputs = self._early.ahead(record.run_id, inputs)
        self._call(self.store.append(record, inputs))
        watcher = self._watchers.get(record.run_id)
        if watcher is not None:
            watcher(record)  # in the appending thread: the run's own, between two of its steps

    def append_inputs(self, run_id: str, inputs: Sequence[Recorded]) -> None:
        take = getattr(self.store, "append_inputs", None)
        if take is None:
            self._early.hold(run_id, inputs)
        else:
            self._call(take(run_id, inputs))

    def end_run(self, summary: RunSummary) -> None:
        self._call(self.store.end_run(summary))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._call(self.store.close())
        finally:
            self._stop()

    def header(self, run_id: str) -> RunHeader | None:
        return self._call(self.store.header(run_id))

    def summary(self, run_id: str) -> RunSummary | None:
        return self._call(self.store.summary(run_id))

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        return self._call(self.store.transitions(run_id))

    def transitions_after(self, run_id: str, after: int, limit: int) -> list[TransitionRecord]:
        return self._call(self.store.transitions_after(run_id, after, limit))

    def turns(self, run_id: str) -> list[RecordedTurn]:
        return self._call(self.store.turns(run_id))

    def outputs(self, run_id: str) -> list[RecordedOutput]:
        return self._call(self.store.outputs(run_id))

    def runs(self) -> list[RunListing | UnreadableRun]:
        return self._call(self.store.runs())

    def claim(self, operation: Operation) -> Operation:
        return self._call(self.store.claim(operation))

    def settle(
        self, key: str, status: OperationStatus, result: dict[str, Any] | None = None
    ) -> None:
        self._call(self.store.settle(key, status, result))

    def operations(self, run_id: str) -> list[Operation]:
        return self._call(self.store.operations(run_id))

    def acquire_lease(self, run_id: str, owner: str, now: datetime, ttl: timedelta) -> Lease | None:
        return self._call(self.store.acquire_lease(run_id, owner, now, ttl))

    def renew_lease(self, lease: Lease, now: datetime, ttl: timedelta) -> Lease:
        return self._call(self.store.renew_lease(lease, now, ttl))

    def release_lease(self, lease: Lease) -> None:
        self._call(self.store.release_lease(lease))

    # -- the approval ledger, when the awaited store keeps one (PostgreSQL) -----------------------

    @property
    def keeps_approvals(self) -> bool:
        return isinstance(self.store, AsyncApprovalLedger)

    def _ledger(self) -> AsyncApprovalLedger:
        if not isinstance(self.store, AsyncApprovalLedger):
            raise ConfigError(f"{type(self.store).__name__} keeps no approvals")
        return self.store

    def propose(self, proposal: Proposal) -> Proposal:
        return self._call(self._ledger().propose(proposal))

    def proposals(self, run_id: str | None = None) -> list[Proposal]:
        return self._call(self._ledger().proposals(run_id))

    def decide(self, run_id: str, operation_key: str, decision: ApprovalDecision) -> Proposal:
        return self._call(self._ledger().decide(run_id, operation_key, decision))

    def use_token(self, token_id: str, run_id: str, at: datetime) -> None:
        self._call(self._ledger().use_token(token_id, run_id, at))

    # -- cancel requests, when the awaited store keeps them (PostgreSQL) ------------------------

    def _cancels(self) -> CancelRequests:
        if not isinstance(self.store, CancelRequests):
            raise ConfigError(f"{type(self.store).__name__} keeps no cancel requests")
        return self.store

    def request_cancel(self, run_id: str, at: datetime, by: str) -> bool:
        return self._call(self._cancels().request_cancel(run_id, at, by))

    def cancel_requested(self, run_id: str) -> bool:
        return self._call(self._cancels().cancel_requested(run_id))

    def cancel_seen(self, run_id: str) -> bool:
        """Whether a transition appended through this store found a cancel of `run_id` asked
        for (no I/O: read with the append)."""
        return self._cancels().cancel_seen(run_id)

    def watch(self, run_id: str, watcher: Callable[[TransitionRecord], None] | None) -> None:
        """Call `watcher` with each transition of `run_id` once it is appended, in the thread
        that appended it (a worker passes a cancel on to the run's handle there); None: stop."""
        if watcher is None:
            self._watchers.pop(run_id, None)
        else:
            self._watchers[run_id] = watcher


async def _awaited(opener: Callable[[], Awaitable[T]]) -> T:
    return await opener()
