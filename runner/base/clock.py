"""Time for the runner: the `Clock` protocol, the system clock, and `FakeClock`.

This is the only module that reads time or sleeps. `FakeClock` runs its runs on an event loop whose
time is virtual: whenever every task is waiting on a timer, the loop jumps straight to the next
timer instead of blocking. `asyncio.sleep`, `asyncio.timeout` and concurrent waits therefore keep
their real semantics (two concurrent 3 s calls take 3 s, not 6) while taking no real time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import selectors
import time
from collections.abc import Awaitable, Callable, Generator, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from types import CoroutineType
from typing import Any, Final, Protocol, TypeVar

from .errors import ConfigError

_NO_IO_SPAN: AbstractContextManager[None] = nullcontext()
"""What `SystemClock.real_io` gives: nothing to mark (one shared context, reusable)."""

LoopFactory = Callable[[], asyncio.AbstractEventLoop]
T = TypeVar("T")


class Clock(Protocol):
    """Where a run reads time and waits."""

    def now(self) -> datetime:
        """The current UTC wall-clock time (aware)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; only differences mean anything."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds`."""
        ...

    @property
    def loop_factory(self) -> LoopFactory | None:
        """The event loop runs on this clock must use (None: the default loop)."""
        ...

    def real_io(self) -> AbstractContextManager[None]:
        """Mark a span of real I/O (a live model request): a fake clock must not skip ahead
        while it is in flight, or its own timeouts would fire before any answer could come; it
        counts the real time spent waiting for it instead, so a deadline still bounds it. (Runs
        with a live model belong on the system clock: a fake clock's sleeps stay virtual.)"""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    @property
    def loop_factory(self) -> LoopFactory | None:
        return None

    def real_io(self) -> AbstractContextManager[None]:
        return _NO_IO_SPAN


class InstantLatency:
    """The clock simulated tools get in a live run: real time, but a scripted latency takes none.

    A live run keeps time on the system clock. A fixture's latencies are written for its fake
    clock; sleeping them for real would stretch a live run by time no real tool spent (a scripted
    timeout alone is the call's whole timeout), so a simulated tool answers at once and a scripted
    timeout is raised at once. Waits the runner decides on (backoff, Retry-After) use the run's
    clock and are real.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def now(self) -> datetime:
        return self._clock.now()

    def monotonic(self) -> float:
        return self._clock.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)  # still a suspension point, so concurrent calls interleave

    @property
    def loop_factory(self) -> LoopFactory | None:
        return self._clock.loop_factory

    def real_io(self) -> AbstractContextManager[None]:
        return self._clock.real_io()


QUIET_HOPS = 4
"""Loop iterations in a row in which a catching-up run reads no time before its next skipped wait
ends: then nothing of the run is left to do before it (what wakes a task, a task's end, waking
the task that awaits it, takes one iteration each; a run that does anything reads the time)."""


class CatchUp:
    """A re-driven run's time: the recorded waits are skipped, and time is real past them.

    `Engine.resume` (and `continue_approved`) re-drive a run's recorded inputs, each served at
    its recorded end. On a real clock that would sleep through the whole recorded run again.
    Here a wait that ends by `horizon` (the latest time the record shows, in seconds from now)
    takes no time: `monotonic` jumps to its end instead. Waits end in order, as timers would: one
    is skipped only once the run has been quiet (`QUIET_HOPS`), so whatever the run does before
    it (a concurrent call's result observed first) sees the time it did then (a run waiting on
    other I/O, an awaited store's commit, is quiet too: a `FakeClock` jumps then as well). A
    wait that straddles the horizon skips to it and sleeps the rest for real; past it every wait
    is real.

    Time lost while nobody drove the run (the crash, a human's approval) is not on it: the
    run's elapsed time is the recorded time plus the live time since the re-drive began, so its
    bounds decide as they did and the deadline still counts only time the run was driven.
    `now` (wall stamps), `loop_factory` and `real_io` are the base clock's.
    """

    def __init__(self, base: Clock, horizon: float) -> None:
        self.base = base
        self.started = base.monotonic()
        """Where the re-drive began, on this clock (the recorded run's start)."""
        self.horizon = self.started + horizon
        self._offset = 0.0
        self._reads = 0
        """Every reading of this clock: the run doing something."""
        self._skips: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._ticking = False
        self._quiet = 0
        self._seen = 0

    def now(self) -> datetime:
        return self.base.now()

    def monotonic(self) -> float:
        self._reads += 1
        return self.base.monotonic() + self._offset

    async def sleep(self, seconds: float) -> None:
        now = self.monotonic()
        end = now + seconds
        skipped = min(end, self.horizon)
        if skipped > now:
            await self._skip_to(skipped)
            seconds = end - self.monotonic()  # what is left past the horizon, lived for real
            if seconds <= 0:
                return
        await self.base.sleep(seconds)

    @property
    def loop_factory(self) -> LoopFactory | None:
        return self.base.loop_factory

    def real_io(self) -> AbstractContextManager[None]:
        return self.base.real_io()

    async def _skip_to(self, end: float) -> None:
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._skips, (end, next(self._order), woken))
        if not self._ticking:
            self._ticking = True
            self._quiet, self._seen = 0, self._reads
            loop.call_soon(self._tick, loop)
        await woken

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        """Skip the earliest wait once the run has been quiet for `QUIET_HOPS` iterations."""
        skips = self._skips
        while skips and skips[0][2].done():  # cancelled while waiting
            heapq.heappop(skips)
        if not skips:
            self._ticking = False
            return
        if self._reads != self._seen:
            self._quiet, self._seen = 0, self._reads
        elif self._quiet < QUIET_HOPS:
            self._quiet += 1
        else:
            end, _, woken = heapq.heappop(skips)
            self._offset = max(self._offset, end - self.base.monotonic())
            woken.set_result(None)
            self._quiet = 0
        loop.call_soon(self._tick, loop)


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that advances virtual time instead of blocking until the next timer."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        if self._clock.holding:  # real I/O in flight: wait for it in real time, and count it
            began = time.monotonic()
            waited: list[tuple[Any, int]] = super().select(timeout)
            self._clock.advance(time.monotonic() - began)
            return waited
        ready: list[tuple[Any, int]] = super().select(0)
        if ready or (timeout is not None and timeout <= 0):
            return ready
        if timeout is None:
            # No timer is pending: only real I/O (a thread finishing, a signal) can wake us.
            blocked: list[tuple[Any, int]] = super().select(None)
            return blocked
        self._clock.advance(timeout)
        return []


class _VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__(_JumpingSelector(clock))
        self._virtual_clock = clock

    def time(self) -> float:
        return self._virtual_clock.monotonic()


LATEST_START: Final = datetime(9000, 1, 1, tzinfo=UTC)
"""The latest a `FakeClock` may start: a run's stamps move on from there by its waits, and a
write's key and an approval expire a day or more later (year 9999 overflowed mid-run)."""


class FakeClock:
    """A clock that moves only when a run waits (or a test calls `advance`).

    It records every `sleep` it is asked for, in order, in `sleeps`.
    """

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
        if start.tzinfo is None:
            raise ConfigError(f"FakeClock start must be timezone-aware, got {start.isoformat()}")
        if start > LATEST_START:
            raise ConfigError(
                f"FakeClock start must be at most {LATEST_START.isoformat()}, got "
                f"{start.isoformat()}: a run's stamps, and its writes' and approvals' expiry "
                "after them, must fit before the last date Python can hold"
            )
        self._start = start.astimezone(UTC)
        self._elapsed = 0.0
        self.sleeps: list[float] = []
        self.holding = 0
        """How many spans of real I/O are in flight (see `real_io`)."""

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    def advance(self, seconds: float) -> None:
        """Move time forward by `seconds` (never back)."""
        if seconds < 0:
            raise ConfigError(f"a clock cannot go back: advance({seconds})")
        self._elapsed += seconds

    def check_loop(self, loop: asyncio.AbstractEventLoop, what: str = "FakeClock.sleep") -> None:
        """Refuse a loop other than this clock's own (its waits would never be virtual)."""
        if not isinstance(loop, _VirtualTimeLoop) or loop._virtual_clock is not self:
            raise ConfigError(f"{what} must run on the clock's own loop (clock.loop_factory)")

    async def sleep(self, seconds: float) -> None:
        self.check_loop(asyncio.get_running_loop())
        self.sleeps.append(seconds)
        await asyncio.sleep(seconds)

    @property
    def loop_factory(self) -> LoopFactory:
        return lambda: _VirtualTimeLoop(self)

    @contextmanager
    def real_io(self) -> Iterator[None]:
        self.holding += 1
        try:
            yield
        finally:
            self.holding -= 1


async def within(seconds: float, awaitable: Awaitable[T]) -> T:
    """Await `awaitable` for at most `seconds` on the running loop's clock; `TimeoutError` after.

    As `asyncio.timeout(seconds)`, whose timer can only act once the awaitable suspends: so its
    first step runs before any timer is armed (most tools and models answer without suspending,
    and arming and cancelling a timer was a tenth of a step), and only an awaitable that does
    suspend continues under `asyncio.timeout_at` with the deadline taken at the start (one
    already past when it first suspends times it out at once, where asyncio.timeout's timer,
    queued behind the task's own wake-up, let it take one more step).
    """
    deadline = asyncio.get_running_loop().time() + seconds
    # A coroutine is driven as it is (its `__await__` wrapper would cost a fifth of this).
    steps: Generator[Any, Any, T] = (
        awaitable  # type: ignore[assignment]  # sends, throws and closes as a generator
        if type(awaitable) is CoroutineType
        else awaitable.__await__()
    )
    try:
        first = steps.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    async with asyncio.timeout_at(deadline):
        return await _Continued(steps, first)


class _Continued(Awaitable[T]):
    """The rest of an awaitable whose first step has run and yielded `first`: what `await` on
    it would have done from there (every value yielded to the task, every value sent and
    exception thrown back passed on, closing closes it)."""

    __slots__ = ("_first", "_steps")

    def __init__(self, steps: Generator[Any, Any, T], first: Any) -> None:
        self._steps = steps
        self._first = first

    def __await__(self) -> Generator[Any, Any, T]:
        steps, value = self._steps, self._first
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as exc:  # CancelledError above all: the timeout's, or the run's
                try:
                    value = steps.throw(exc)
                except StopIteration as done:
                    result: T = done.value
                    return result
            else:
                try:
                    value = steps.send(sent)
                except StopIteration as done:
                    result = done.value
                    return result
