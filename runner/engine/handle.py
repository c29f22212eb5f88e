"""`RunHandle`: a started run, known by its id at once, awaited or cancelled later."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..record.spec import RunResult
    from ._cancel import Cancellation


class RunHandle:
    """What `Engine.start` returns: the run is already stored (its header) and running.

    `await handle.result()` gives the run's `RunResult` (never raised for model or tool
    failures). `handle.cancel()` asks the run to end `abstain` with reason `cancelled`: a model
    request in progress is abandoned at once, but a tool never is; the batch of calls in flight
    finishes (writes are settled, by a lookup by key if their response was lost) before the run
    ends, with one terminal record. Cancelling the task itself (the loop shutting down) is not a
    cancel of the run: it stops where it is, keeps every record, and can be resumed.
    """

    __slots__ = ("_cancellation", "_task", "run_id")

    def __init__(
        self, *, run_id: str, task: asyncio.Task[RunResult], cancellation: Cancellation
    ) -> None:
        self.run_id = run_id
        """The run's id in the store, known before the run's first step."""
        self._task = task
        self._cancellation = cancellation

    async def result(self) -> RunResult:
        """Wait for the run to end and return its result.

        Cancelling the caller that awaits this does not cancel the run (use `cancel`).
        """
        return await asyncio.shield(self._task)

    def cancel(self) -> None:
        """Ask the run to end `abstain` (reason `cancelled`); idempotent, returns at once."""
        self._cancellation.request()

    def stop(self) -> None:
        """Stop the run where it is, as the loop shutting down would: not a cancel of the run
        (no terminal record); it keeps every record and can be resumed. For a caller that owns
        the run's lifetime, as a parent owns its child's."""
        self._task.cancel()

    def done(self) -> bool:
        """Whether the run has ended (or stopped)."""
        return self._task.done()

    @property
    def cancel_requested(self) -> bool:
        return self._cancellation.requested

    def __repr__(self) -> str:
        state = "done" if self._task.done() else "running"
        return f"<RunHandle {self.run_id} {state}>"
