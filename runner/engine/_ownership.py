"""One driver at a time for a run, on a store that keeps leases in place (SQLite, memory) or
renews them (PostgreSQL).

Every drive of a run (`Engine.run`, `start`, `resume`, `continue_approved`, and so `runner run`,
`runner resume` and `runner serve`'s threads) holds the run's lease from before anything of it is
stored until the drive ends; a second driver is refused (`RunDriven`) naming the holder, before it
stores or sends anything.

The holder is named by its host, pid, process start and drive, so that a driver that died does
not hold the run back: SIGKILL leaves it no chance to let go, and a resume must go on at once. On
the same host (and pid namespace) a lease whose process is gone, or is another process with the
same pid, or whose drive in this process has ended, is taken over at once. A lease of another
host's process cannot be seen to have stopped: it is refused until it expires, at the run's own
deadline plus a margin, when its driver can no longer be driving it (every dispatch and sleep is
checked against the deadline). No renewal and no check per transition there: the lease costs a
commit to take, per run, and one to release when the drive stops short of the run's end. Lease times
are real (`SystemClock`), not the run's clock: they are about processes, and a fixture run's
virtual time says nothing of them.

On a store whose leases last only while renewed (`PostgresStore`, many hosts) a drive takes the
run's lease for `LEASE_TTL`, fenced (every write for the run checks its generation), and renews
it every third of that while it drives, as a worker does; a driver that died is waited out for
at most that long (at once when it is known gone on this host). A store handle that already
holds a run's lease (a worker's, `runner resume --db postgresql://`'s) drives it under that
lease, never a second one.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..base.clock import SystemClock
from ..base.errors import LeaseLost, RunDriven, StoreError
from ..core.budget import Limits
from ..store.base import Lease

MARGIN = timedelta(minutes=10)
"""How long past its deadline a run's lease lasts (another host's driver is refused until then)."""

LEASE_TTL = timedelta(seconds=30)
"""How long a renewed lease (PostgreSQL) lasts unless renewed: a worker's default and `runner
resume`'s, so every driver of a PostgreSQL run waits out a dead one for the same time."""

_DRIVING: set[str] = set()
"""The drives of this process going now (their ids): a lease of this process naming no drive
here was left by one that ended without letting go."""

_DRIVES = itertools.count(1)
"""Drive ids, unique within a process (the pid and process start tell processes apart)."""

_CLOCK = SystemClock()


@runtime_checkable
class RunHolds(Protocol):
    """A store that grants a run's lease to one driver at a time (SQLite, memory)."""

    def hold_run(
        self, run_id: str, owner: str, now: datetime, ttl: timedelta, gone: Callable[[str], bool]
    ) -> Lease | None:
        """Take the run for `owner` when nobody holds it, its lease expired or was released, or
        `gone(holder)`; otherwise return the holder's lease. None: this handle holds the run
        under a lease of its own already (a worker's), nothing to take."""
        ...

    def release_lease(self, lease: Lease) -> None: ...


@runtime_checkable
class RenewedHolds(Protocol):
    """A store, awaited, whose run leases last only while renewed (PostgreSQL)."""

    def holds_lease(self, run_id: str) -> bool:
        """Whether this handle's caller holds the run's lease already (a worker's)."""
        ...

    async def take_run(
        self, run_id: str, owner: str, now: datetime, ttl: timedelta, gone: Callable[[str], bool]
    ) -> Lease:
        """Take the run for `owner` (fenced) when nobody holds it, its lease expired or was
        released, or `gone(holder)`; otherwise return the holder's lease."""
        ...

    async def renew_lease(self, lease: Lease, now: datetime, ttl: timedelta) -> Lease: ...

    async def release_lease(self, lease: Lease) -> None: ...


@dataclass(frozen=True, slots=True)
class Driver:
    """Who drives a run, as its lease's owner names it."""

    host: str
    pid: int
    start: str
    """When the process started, as the kernel counts it ("-": not known here)."""
    namespace: str
    """The pid namespace the pid belongs to ("-": not known here)."""
    drive: str = "-"

    def owner(self) -> str:
        return (
            f"{self.host} pid {self.pid} start {self.start} ns {self.namespace} drive {self.drive}"
        )

    @staticmethod
    def parse(owner: str) -> Driver | None:
        words = owner.split()
        if len(words) != 9 or words[1:9:2] != ["pid", "start", "ns", "drive"]:
            return None  # a worker's or another tool's lease: it lasts until it expires
        if not words[2].isdigit():
            return None
        return Driver(words[0], int(words[2]), words[4], words[6], words[8])


@cache
def _this_process(pid: int) -> Driver:
    namespace = "-"
    with suppress(OSError):
        namespace = os.readlink("/proc/self/ns/pid").removeprefix("pid:").strip("[]")
    return Driver(socket.gethostname(), pid, _start_of(pid) or "-", namespace)


def this_process() -> Driver:
    """This process as a lease names it (found again after a fork)."""
    return _this_process(os.getpid())


@cache
def _owners(pid: int) -> str:
    """What every lease owner of this process begins with (its drive id follows)."""
    return _this_process(pid).owner().removesuffix("-")


@cache
def _ttl(max_seconds: float) -> timedelta:
    return timedelta(seconds=max_seconds) + MARGIN


def _start_of(pid: int) -> str | None:
    """The process's start time in clock ticks since boot; None when there is no such process
    (or only its zombie); "-" when it exists but this system does not say when it started."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
    except OSError:
        pass
    else:
        fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces and parentheses
        return None if fields[0] in ("Z", "X") else fields[19]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return "-"


def gone(owner: str) -> bool:
    """Whether the driver `owner` names has surely stopped: its process is gone, or the pid is
    another process's now, or the drive ended in this process. Another host's: never sure."""
    driver, me = Driver.parse(owner), this_process()
    if driver is None or (driver.host, driver.namespace) != (me.host, me.namespace):
        return False
    if driver.pid == me.pid:
        return driver.start != me.start or driver.drive not in _DRIVING
    start = _start_of(driver.pid)
    return start is None or ("-" not in (start, driver.start) and start != driver.start)


def holds_of(store: object) -> RunHolds | None:
    """The store that keeps `store`'s leases in place (a `FanoutStore`'s primary), if any."""
    for candidate in (store, getattr(store, "primary", None)):
        if isinstance(candidate, RunHolds):
            return candidate
    return None


@dataclass(slots=True)
class Held:
    """A run's lease taken for one drive, until `let_go`."""

    store: RunHolds
    lease: Lease
    drive: str
    done: bool = False


def take(store: RunHolds, run_id: str, limits: Limits) -> Held | None:
    """The run's lease for a new drive of this process; `RunDriven` while another driver holds
    it. None: `store` holds it already under its own lease (a worker's)."""
    drive = str(next(_DRIVES))
    owner, now = _owners(os.getpid()) + drive, _CLOCK.now()
    _DRIVING.add(drive)
    try:
        lease = store.hold_run(run_id, owner, now, _ttl(limits.max_seconds), gone)
    except BaseException:
        _DRIVING.discard(drive)
        raise
    if lease is not None and lease.owner == owner:
        return Held(store, lease, drive)
    _DRIVING.discard(drive)
    if lease is None:
        return None
    raise RunDriven(run_id, lease.owner, _holder(lease, now))


def stays_ended(terminal: str, reason: str) -> bool:
    """Whether a run that ended so is never driven again, and its lease may be left to expire
    (saving a commit). Not one waiting for approval: its continuation holds its lease (as a
    worker's does), so it is released, and the continuation need not wait it out."""
    return not (terminal == "escalate" and reason == "approval_required")


def let_go(held: Held | None, *, ended: bool = False) -> None:
    """End a drive's hold on its run (once). The lease of a run that `ended` is left as it is,
    saving a commit: an ended run is never driven again (a resume says it ended, before taking
    anything). A lease that could not be released is still let go of: this process no longer
    names its drive, so the next driver on this host takes it over."""
    if held is None or held.done:
        return
    held.done = True
    _DRIVING.discard(held.drive)
    if not ended:
        with suppress(StoreError):
            held.store.release_lease(held.lease)


def renewed_holds_of(store: object) -> RenewedHolds | None:
    """`store`, when its run leases last only while renewed (PostgreSQL)."""
    return store if isinstance(store, RenewedHolds) else None


@dataclass(slots=True, eq=False)
class Renewed:
    """A run's renewed lease taken for one drive, until `let_go_renewed`."""

    store: RenewedHolds
    lease: Lease
    drive: str
    renewing: asyncio.Task[None] | None = None
    driven: bool = False
    """Whether the drive began (from then on, it lets go of the lease when it stops)."""
    done: bool = False


async def take_renewed(store: RenewedHolds, run_id: str) -> Renewed | None:
    """The run's lease for a new drive of this process, renewed on the running loop until
    `let_go_renewed`; `RunDriven` while another driver holds it. None: `store`'s caller holds
    it already (a worker). The loop keeps real time: a PostgreSQL store's connections cannot
    live on a `FakeClock`'s (their timeouts would be virtual)."""
    if store.holds_lease(run_id):
        return None
    drive = str(next(_DRIVES))
    owner, now = _owners(os.getpid()) + drive, _CLOCK.now()
    _DRIVING.add(drive)
    try:
        lease = await store.take_run(run_id, owner, now, LEASE_TTL, gone)
    except BaseException:
        _DRIVING.discard(drive)
        raise
    if lease.owner != owner:
        _DRIVING.discard(drive)
        raise RunDriven(run_id, lease.owner, _holder(lease, now))
    held = Renewed(store, lease, drive)
    held.renewing = asyncio.get_running_loop().create_task(
        _renew(held), name=f"runner lease {run_id}"
    )
    return held


def drop_renewed(held: Renewed | None) -> bool:
    """Stop renewing `held` (once; whether this call did): it expires, and this process names
    its drive no more, so a driver here takes it over at once. Alone, for a drive whose task was
    cancelled before it began (nothing awaits there to release it)."""
    if held is None or held.done:
        return False
    held.done = True
    _DRIVING.discard(held.drive)
    if held.renewing is not None:
        held.renewing.cancel()
    return True


async def let_go_renewed(held: Renewed | None, *, ended: bool = False) -> None:
    """End a drive's hold on its run (once): stop renewing and release the lease. The lease of a
    run that `ended` is left to expire, saving a commit, as `let_go` does: an ended run is never
    driven again (a resume says it ended before taking anything), and this process no longer
    names the drive, so a driver on this host would take it over at once."""
    if held is None or not drop_renewed(held) or ended:
        return
    with suppress(StoreError):  # LeaseLost included: then it is another's already
        await held.store.release_lease(held.lease)


async def _renew(held: Renewed) -> None:
    """Renew every third of the lease's time until cancelled or lost."""
    while True:
        await asyncio.sleep(LEASE_TTL.total_seconds() / 3)
        try:
            held.lease = await held.store.renew_lease(held.lease, _CLOCK.now(), LEASE_TTL)
        except LeaseLost:  # taken over: the run's next write is refused by the store's fence,
            return  # which ends its drive with LeaseLost
        except StoreError:
            continue  # the database out of reach for now: tried again a third later


def _holder(lease: Lease, now: datetime) -> str:
    """Who drives the run, as a refusal says it."""
    driver, me = Driver.parse(lease.owner), this_process()
    until = f"its lease expires at {lease.expires_at:%Y-%m-%d %H:%M:%S} UTC"
    if driver is None:
        return f"it is held by {lease.owner!r}; {until}"
    who = f"it is being driven by pid {driver.pid} on {driver.host}"
    if (driver.host, driver.namespace, driver.pid) == (me.host, me.namespace, me.pid):
        return f"{who} (this process: another task or thread drives it); try again once it ends"
    if (driver.host, driver.namespace) == (me.host, me.namespace):
        return f"{who}; try again once it ends (a driver that was killed is taken over at once)"
    return f"{who} (another host, which cannot be seen to have stopped); {until}"
