"""Cancelling a run through its handle: end it `abstain` (reason `cancelled`), losing nothing.

A cancel never interrupts a tool. The batch in flight finishes as it would have (each call bounded
by its timeout, retries by the policy and the deadline, and a write whose response was lost is
looked up by its key, as always), so every write the run started is settled before it ends. Then,
instead of asking the model again, the run moves `plan -> abstain` with reason `cancelled`: one
terminal record. A model request in progress has no side effect, so it is abandoned at once.

Replay needs no record of when the cancel came: the `cancelled` transition is it. Re-driving the
recording, the engine ends the run where the recording's inputs end and that transition follows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Final

from ..tools.invocation import CancelSignal


class RunCancelled(asyncio.CancelledError):
    """Raised in the run's own task where a requested cancel is acted on."""


class Cancellation:
    """A run's cancel request, and where it may be acted on at once."""

    def __init__(self) -> None:
        self.requested = False
        self._event = asyncio.Event()  # bound to a loop only when first awaited
        self.signal = CancelSignal(self._event)
        """What the run's tools are given of the request."""
        self.task: asyncio.Task[Any] | None = None
        """The task driving the run (set by `Engine.start`)."""
        self._abandonable = False

    def request(self) -> None:
        """Ask the run to end `cancelled`; abandon the model request in progress, if any."""
        if self.requested:
            return
        self.requested = True
        self._event.set()
        if self._abandonable and self.task is not None:
            self.task.cancel()

    def check(self) -> None:
        """Raise `RunCancelled` if a cancel was requested (before a model request starts)."""
        if self.requested:
            raise RunCancelled()

    @contextmanager
    def abandonable(self) -> Iterator[None]:
        """A span of the run that may be given up at once (a model request: no side effect).

        A cancel requested inside it cancels the run's task: the await in progress raises
        `CancelledError`, which the engine turns into the terminal move.
        """
        self._abandonable = True
        try:
            yield
        finally:
            self._abandonable = False


_NOTHING: Final[AbstractContextManager[None]] = nullcontext()


def abandonable(cancellation: Cancellation | None) -> AbstractContextManager[None]:
    """`cancellation.abandonable()`, or nothing (one shared, reusable context) for a run that
    has no handle: asked on every model request, so not a generator."""
    return _NOTHING if cancellation is None else cancellation.abandonable()


def take_cancellation(cancellation: Cancellation, exc: asyncio.CancelledError) -> bool:
    """Whether a `CancelledError` in the run's task is its handle's cancel (which the engine
    ends the run on), rather than the loop or the caller cancelling it (which must propagate:
    the run then stays unfinished, with every record kept, and can be resumed)."""
    task = asyncio.current_task()
    if isinstance(exc, RunCancelled):
        if task is not None and task is cancellation.task and task.cancelling() == 1:
            task.uncancel()  # the request's cancel, which its adapter swallowed
        return True
    if not cancellation.requested or task is None or task is not cancellation.task:
        return False
    if task.cancelling() != 1:  # cancelled from elsewhere too
        return False
    task.uncancel()
    return True
