"""The store protocols every backend implements.

`RunLog` is the write side of a run's record: `begin_run` once, `append` each transition in `seq`
order together with the inputs (model replies, tool outcomes) that led to it, `end_run` once.
Each `append` is one all-or-nothing write, so a transition is never durable without the inputs
that produced it. A log may also offer `append_inputs` (`InputsAlone`, optional): inputs stored
without a transition, for a parallel batch's outcome that came back while the run still waits on
an earlier call of the batch (so a crash then does not lose it); the built-in stores do. A log
without it gets those inputs with the run's next transition. `Store` adds
reading back and the operation records that make writes exactly-once. Memory and SQLite implement
`Store` (one contract suite, `tests/store/test_contract.py`, runs against both); the JSONL log is a
`RunLog` only. A store raises `StoreError` when it cannot keep a write; it never drops one silently,
and each call is all-or-nothing.

`AsyncStore` is the same protocol awaited, for backends that do network I/O (PostgreSQL);
`as_async` (adapters.py) serves a synchronous store through it. `Leases` is a run's ownership
between workers: one owner at a time, with an expiry the owner renews while it drives the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from ..core.states import OperationStatus
from ..record.operations import Operation
from ..record.recording import Recorded, RecordedOutput, RecordedTurn
from ..record.trace import RunHeader, RunSummary, TransitionRecord


class RunLog(Protocol):
    def begin_run(self, header: RunHeader) -> None:
        """Record that a run started."""
        ...

    def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None:
        """Record one transition and the inputs taken in since the last one, in one write."""
        ...

    def end_run(self, summary: RunSummary) -> None:
        """Record the run's one terminal summary."""
        ...

    def close(self) -> None:
        """Release files and connections."""
        ...


@runtime_checkable
class InputsAlone(Protocol):
    """What a `RunLog` may offer besides (not required: see `store/_early.py`)."""

    def append_inputs(self, run_id: str, inputs: Sequence[Recorded]) -> None:
        """Record inputs of `run_id` taken in since its last transition, before the next one,
        in one write, checked against the run's lease as `append` is. Readers see them with
        the run's other inputs (by ordinal); a run that stops before its next transition leaves
        them after its last one, and a resume serves them as recorded."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RunListing:
    header: RunHeader
    summary: RunSummary | None


@dataclass(frozen=True, slots=True, kw_only=True)
class UnreadableRun:
    """A stored run whose header or summary cannot be read back (listed, not fatal to the list)."""

    run_id: str
    problem: str
    """Which row and why, e.g. `run 1f0c... header: invalid JSON at line 1 column 9`."""


class Store(RunLog, Protocol):
    def header(self, run_id: str) -> RunHeader | None: ...

    def summary(self, run_id: str) -> RunSummary | None: ...

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        """Every transition of a run, in `seq` order."""
        ...

    def transitions_after(self, run_id: str, after: int, limit: int) -> list[TransitionRecord]:
        """At most `limit` transitions with `seq > after`, in `seq` order: what a reader
        following a run reads each time, at a cost that does not grow with the run's length."""
        ...

    def turns(self, run_id: str) -> list[RecordedTurn]: ...

    def outputs(self, run_id: str) -> list[RecordedOutput]: ...

    def runs(self) -> list[RunListing | UnreadableRun]:
        """Every run, oldest first; a run whose rows cannot be read is named, not fatal."""
        ...

    def claim(self, operation: Operation) -> Operation:
        """Atomically record the intent to dispatch `operation` (write-ahead), before dispatch.

        A new key is inserted. A live key with the same parameter hash is the same intent tried
        again: it becomes `pending` with the new dispatch ordinal, and the record as it was before
        is returned. A live key bound to another hash raises `StoreConflict` and changes nothing.
        An expired record (past its retry horizon) is replaced.
        """
        ...

    def settle(
        self, key: str, status: OperationStatus, result: dict[str, Any] | None = None
    ) -> None:
        """Move an operation to `status` (keeping any earlier result when none is given)."""
        ...

    def operations(self, run_id: str) -> list[Operation]:
        """The run's operations in the order they were first claimed."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """One worker's ownership of one run, until `expires_at` unless renewed."""

    run_id: str
    owner: str
    generation: int
    """How many times the run has been taken, counting this one: the fencing token. A write
    under an older generation is refused (`LeaseLost`), so a worker that paused past its expiry
    cannot write beside the one that took the run over."""
    expires_at: datetime


@runtime_checkable
class Leases(Protocol):
    """Run ownership. Times are the caller's (its injected clock); `ttl` is how long a lease
    lasts unless renewed.

    Once a store has granted `owner` a lease on a run, every write that store makes for the run
    (transitions, its end, its operations) checks in the same transaction that the lease's
    generation is still the current one, and raises `LeaseLost` otherwise.
    """

    def acquire_lease(self, run_id: str, owner: str, now: datetime, ttl: timedelta) -> Lease | None:
        """Take the run when nobody holds it or its lease expired (a new generation), or renew
        it when `owner` holds it already; None while another owner's lease is live."""
        ...

    def renew_lease(self, lease: Lease, now: datetime, ttl: timedelta) -> Lease:
        """Extend a held lease; `LeaseLost` if it was taken over meanwhile."""
        ...

    def release_lease(self, lease: Lease) -> None:
        """Give the run up (nothing happens if it was taken over meanwhile). This handle's later
        writes for the run are still checked against the lease, so a run handed back while a
        thread was still driving it refuses that thread once another owner takes it; the check
        ends with the run (`end_run`)."""
        ...


@runtime_checkable
class CancelRequests(Protocol):
    """A cancel asked for in one process and acted on by the one driving the run (PostgreSQL,
    where a service process asks and a worker drives)."""

    async def request_cancel(self, run_id: str, at: datetime, by: str) -> bool:
        """Keep a request to cancel `run_id`; whether it is the first."""
        ...

    async def cancel_requested(self, run_id: str) -> bool: ...

    def cancel_seen(self, run_id: str) -> bool:
        """Whether a transition this handle appended for `run_id` found a cancel requested."""
        ...


class AsyncStore(Protocol):
    """`Store` and `Leases`, awaited: what the engine and the workers talk to."""

    async def begin_run(self, header: RunHeader) -> None: ...

    async def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None: ...

    async def end_run(self, summary: RunSummary) -> None: ...

    async def close(self) -> None: ...

    async def header(self, run_id: str) -> RunHeader | None: ...

    async def summary(self, run_id: str) -> RunSummary | None: ...

    async def transitions(self, run_id: str) -> list[TransitionRecord]: ...

    async def transitions_after(
        self, run_id: str, after: int, limit: int
    ) -> list[TransitionRecord]: ...

    async def turns(self, run_id: str) -> list[RecordedTurn]: ...

    async def outputs(self, run_id: str) -> list[RecordedOutput]: ...

    async def runs(self) -> list[RunListing | UnreadableRun]: ...

    async def claim(self, operation: Operation) -> Operation: ...

    async def settle(
        self, key: str, status: OperationStatus, result: dict[str, Any] | None = None
    ) -> None: ...

    async def operations(self, run_id: str) -> list[Operation]: ...

    async def acquire_lease(
        self, run_id: str, owner: str, now: datetime, ttl: timedelta
    ) -> Lease | None: ...

    async def renew_lease(self, lease: Lease, now: datetime, ttl: timedelta) -> Lease: ...

    async def release_lease(self, lease: Lease) -> None: ...
