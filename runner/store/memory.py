"""An in-memory store: the default for tests and for embedding without persistence."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ..base.errors import LeaseLost, StoreConflict, StoreError
from ..core.states import OperationStatus
from ..record.operations import Operation
from ..record.recording import Recorded, RecordedOutput, RecordedTurn
from ..record.trace import (
    RunHeader,
    RunSummary,
    TransitionRecord,
    distinct,
    summary_unbacked,
)
from .approvals import MemoryApprovals
from .base import Lease, RunListing, UnreadableRun

RELEASED = datetime(1970, 1, 1, tzinfo=UTC)
"""The expiry a given-up lease is left with: anyone may take the run, as the next generation."""


class MemoryStore(MemoryApprovals):
    def __init__(self) -> None:
        self.headers: dict[str, RunHeader] = {}
        self.records: dict[str, list[TransitionRecord]] = {}
        self.summaries: dict[str, RunSummary] = {}
        self.turn_log: dict[str, list[RecordedTurn]] = {}
        self.output_log: dict[str, list[RecordedOutput]] = {}
        self.operation_log: dict[str, Operation] = {}
        self.leases: dict[str, Lease] = {}
        self._fences: dict[str, int] = {}
        """The lease generation this handle was granted, per run: its writes check it."""

    def another_handle(self) -> MemoryStore:
        """A second handle on the same data with its own leases held (as a second worker's
        connection to a shared database would be)."""
        other = MemoryStore()
        for name in ("headers", "records", "summaries", "turn_log", "output_log"):
            setattr(other, name, getattr(self, name))
        other.operation_log, other.leases = self.operation_log, self.leases
        return other

    def _fenced(self, run_id: str) -> None:
        granted = self._fences.get(run_id)
        if granted is not None and self.leases[run_id].generation != granted:
            raise LeaseLost(f"run {run_id}: taken over (lease generation {granted} is stale)")

    def _known(self, run_id: str) -> None:
        if run_id not in self.headers:
            raise StoreError(f"run {run_id} was never begun")

    def begin_run(self, header: RunHeader) -> None:
        if header.run_id in self.headers:
            raise StoreError(f"run {header.run_id} already exists")
        self.headers[header.run_id] = header
        self.records[header.run_id] = []
        self.turn_log[header.run_id] = []
        self.output_log[header.run_id] = []

    def append(self, record: TransitionRecord, inputs: Sequence[Recorded] = ()) -> None:
        run_id = record.run_id  # `_known` and `_fenced`, inlined: three appends a step
        if run_id not in self.headers:
            raise StoreError(f"run {run_id} was never begun")
        if run_id in self._fences:
            self._fenced(run_id)
        records = self.records[run_id]
        if record.seq != len(records) + 1:
            raise StoreError(f"run {run_id}: seq {record.seq} after {len(records)}")
        for item in inputs:
            if isinstance(item, RecordedTurn):
                self.turn_log[run_id].append(item)
            else:
                self.output_log[run_id].append(item)
        records.append(record)

    def append_inputs(self, run_id: str, inputs: Sequence[Recorded]) -> None:
        """Inputs before their transition (`base.InputsAlone`)."""
        self._known(run_id)
        self._fenced(run_id)
        for item in inputs:
            if isinstance(item, RecordedTurn):
                self.turn_log[run_id].append(item)
            else:
                self.output_log[run_id].append(item)

    def end_run(self, summary: RunSummary) -> None:
        self._known(summary.run_id)
        self._fenced(summary.run_id)
        if summary.run_id in self.summaries:
            raise StoreError(f"run {summary.run_id} already ended")
        self.summaries[summary.run_id] = summary
        self._fences.pop(summary.run_id, None)

    def header(self, run_id: str) -> RunHeader | None:
        return self.headers.get(run_id)

    def summary(self, run_id: str) -> RunSummary | None:
        return self.summaries.get(run_id)

    def transitions(self, run_id: str) -> list[TransitionRecord]:
        return list(self.records.get(run_id, []))

    def transitions_after(self, run_id: str, after: int, limit: int) -> list[TransitionRecord]:
        records = self.records.get(run_id, [])
        start = bisect.bisect_right(records, after, key=lambda r: r.seq)
        return records[start : start + max(limit, 0)]

    def turns(self, run_id: str) -> list[RecordedTurn]:
        turns = list(self.turn_log.get(run_id, []))
        return distinct(turns, run_id, "model turn")

    def outputs(self, run_id: str) -> list[RecordedOutput]:
        outputs = sorted(self.output_log.get(run_id, []), key=lambda o: o.ordinal)
        return distinct(outputs, run_id, "tool output")

    def runs(self) -> list[RunListing | UnreadableRun]:
        return [self._listing(run_id, header) for run_id, header in self.headers.items()]

    def _listing(self, run_id: str, header: RunHeader) -> RunListing | UnreadableRun:
        summary = self.summaries.get(run_id)
        if summary is not None:
            records = self.records.get(run_id)
            last = records[-1] if records else None
            move = (last.seq, last.to_state, last.reason, last.attempt) if last else None
            unbacked = summary_unbacked(run_id, summary, move)
            if unbacked is not None:  # a summary put here by hand (tests do)
                return UnreadableRun(run_id=run_id, problem=unbacked)
        return RunListing(header=header, summary=summary)

    def claim(self, operation: Operation) -> Operation:
        self._fenced(operation.run_id)
        existing = self.operation_log.get(operation.key)
        if existing is not None and existing.expires_at > operation.created_at:
            if existing.params_hash != operation.params_hash:
                raise StoreConflict(operation.key, existing.params_hash, operation.params_hash)
            self.operation_log[operation.key] = dataclasses.replace(
                existing, status=OperationStatus.PENDING, dispatch=operation.dispatch
            )
            return existing
        self.operation_log[operation.key] = operation
        return operation

    def settle(
        self, key: str, status: OperationStatus, result: dict[str, Any] | None = None
    ) -> None:
        existing = self.operation_log.get(key)
        if existing is None:
            raise StoreError(f"no operation under key {key}")
        self._fenced(existing.run_id)
        self.operation_log[key] = dataclasses.replace(
            existing, status=status, result=result if result is not None else existing.result
        )

    def operations(self, run_id: str) -> list[Operation]:
        return [op for op in self.operation_log.values() if op.run_id == run_id]

    def acquire_lease(self, run_id: str, owner: str, now: datetime, ttl: timedelta) -> Lease | None:
        current = self.leases.get(run_id)
        if current is not None and current.owner == owner and current.expires_at != RELEASED:
            generation = current.generation
        elif current is None or current.expires_at <= now:
            generation = current.generation + 1 if current is not None else 1
        else:
            return None
        lease = Lease(run_id=run_id, owner=owner, generation=generation, expires_at=now + ttl)
        self.leases[run_id] = lease
        self._fences[run_id] = generation
        return lease

    def hold_run(
        self, run_id: str, owner: str, now: datetime, ttl: timedelta, gone: Callable[[str], bool]
    ) -> Lease | None:
        """`_ownership.RunHolds`, as `SqliteStore.hold_run` (unfenced)."""
        current = self.leases.get(run_id)
        generation = 1
        if current is not None:
            if current.expires_at != RELEASED and current.expires_at > now:
                if self._fences.get(run_id) == current.generation:
                    return None  # this handle's own lease (a worker's): drive under it
                if not gone(current.owner):
                    return current
            generation = current.generation + 1
        lease = Lease(run_id=run_id, owner=owner, generation=generation, expires_at=now + ttl)
        self.leases[run_id] = lease
        self._fences.pop(run_id, None)  # an older generation's, if any: stale now
        return lease

    def renew_lease(self, lease: Lease, now: datetime, ttl: timedelta) -> Lease:
        current = self.leases.get(lease.run_id)
        if current is None or current.generation != lease.generation:
            raise LeaseLost(f"run {lease.run_id}: taken over from {lease.owner}")
        renewed = dataclasses.replace(lease, expires_at=now + ttl)
        self.leases[lease.run_id] = renewed
        return renewed

    def release_lease(self, lease: Lease) -> None:
        current = self.leases.get(lease.run_id)
        if current is not None and current.generation == lease.generation:
            self.leases[lease.run_id] = Lease(
                run_id=current.run_id,
                owner=current.owner,
                generation=current.generation,
                expires_at=RELEASED,
            )

    def close(self) -> None:
        """Nothing to release."""
