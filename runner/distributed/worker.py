"""A worker: procrastinate fetches queued runs; each is driven under the run's lease.

For each job the worker takes the run's lease (waiting out a dead owner's, which expires), then
starts the run, or resumes it through the runner's resume path when an earlier worker began it
(a pending write is reconciled by key before anything else), or does nothing when it already
ended. The lease is renewed while the run is driven; every store write for the run checks it, so
a worker that lost its run (paused past its expiry) can no longer write to it.

A worker drives a run at most once at a time, and each drive takes the lease under its own owner
name: under load a live worker's queue heartbeat can lapse, the sweep below re-queues its job
(same job id) while it still drives the run, and the same worker may fetch it again. Its second
drive waits for the first, as for any live owner; it never inherits the first's lease (same
owner, same generation), which the fence could not tell from its own, nor shares the store
handle's fence for that run with it.

A worker that dies leaves its job `doing`; every worker sweeps the queue for jobs whose worker's
heartbeat stopped (procrastinate's `get_stalled_jobs`) and re-queues them (`retry_job`): that is
the queue's own stalled-job handling, and the re-queued job resumes the run. On SIGTERM the worker
(procrastinate) stops fetching and waits up to `grace_s` for the runs in flight to finish; past it
their jobs are aborted for shutdown and handed back to the queue (the task retries), and their
leases released.

A cancel asked for through the service is a row in the store (`runner_cancels`): the worker
reads it with every transition the run appends (the same statement, so no extra round trip and no
listening connection) and passes it on to the run's handle in the run's own thread, between two
steps; the run ends `abstain (cancelled)` as on one process. A run cancelled while still queued
is asked once before its first step and ends at once; a resumed one is told at its first new
transition (cut short while re-driving its record, it would diverge from it).

What a queued document means is the caller's (`Play`: the command line plays fixtures). It is
called on a worker thread, since a fixture run keeps a `FakeClock` whose loop is its own; the
store (one pool per worker) serves every run from its own loop (`BlockingStore`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

import psycopg
from procrastinate import App, JobContext, RetryStrategy
from procrastinate.exceptions import ConnectorException
from procrastinate.jobs import Job
from procrastinate.retry import RetryDecision

from ..base.clock import Clock, SystemClock
from ..base.errors import LeaseLost, NotDrivableHere, StoreError
from ..engine.handle import RunHandle
from ..record.trace import TransitionRecord
from ..store.adapters import BlockingStore
from ..store.base import Lease, Store
from ..store.postgres import PostgresStore
from .queue import QUEUE, TASK, ensure_queue_schema, make_app

log = logging.getLogger("runner.worker")

Started = Callable[[RunHandle], None]
"""Told the handle of the run a `Play` drives, once its header is stored (before its first step)."""

Play = Callable[[Store, str, dict[str, Any], int, Started], str | None]
"""`(store, run_id, document, seed, started)`: start the run, or resume it when the store has
begun it, or do nothing when it ended; one line for the worker's output (None: nothing was
driven). The caller holds the run's lease throughout; `started` must be given the handle of the
run driven (so a cancel reaches it)."""


def _default_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    concurrency: int = 1
    """Runs driven at once (each on its own thread)."""
    lease_s: float = 30.0
    """How long a run's lease lasts unless renewed (renewed every third of it)."""
    heartbeat_s: float = 10.0
    """How often the worker tells procrastinate it is alive."""
    stalled_after_s: float = 30.0
    """A worker silent this long is dead: its jobs are re-queued."""
    grace_s: float = 30.0
    """On SIGTERM, how long runs in flight may take to finish before they are handed back."""
    pace_s: float = 0.0
    """Real seconds a run pauses after each transition it records (0: none): scripted runs keep
    virtual time and end in milliseconds; a pace lets a person (or a test) watch one, cancel it."""
    handback_s: float = 30.0
    """A run this worker cannot drive (`NotDrivableHere`: no `--config` for a live run, say) goes
    back to the queue for this long, said each time; never given up, since a worker that can
    drive it may come (the run stays queued meanwhile)."""
    name: str = field(default_factory=_default_name)


class RunDriver:
    """What a worker does with one queued run (procrastinate's task)."""

    def __init__(
        self,
        store: BlockingStore,
        *,
        play: Play,
        settings: WorkerSettings,
        report: Callable[[str], None],
        clock: Clock | None = None,
    ) -> None:
        self.store = store
        self.play = play
        self.settings = settings
        self.report = report
        self.clock = clock or SystemClock()
        self.ttl = timedelta(seconds=settings.lease_s)
        self._driving: set[str] = set()
        """Runs this worker drives now: the store handle keeps one fence per run, so one drive."""

    async def drive(
        self, context: JobContext, run_id: str, document: dict[str, Any], seed: int
    ) -> None:
        owner = f"{self.settings.name}/job-{context.job.id}/{uuid.uuid4().hex[:8]}"
        lease = await self._take(run_id, owner)
        # The run stays marked until its thread ends: a job cancelled at shutdown leaves its
        # thread going (fenced once another worker takes the run), and this handle's fence.
        guard, started, abandoned = threading.Lock(), [False], [False]
        watched: list[str] = []

        def handed(handle: RunHandle) -> None:
            watched.append(handle.run_id)
            self.store.watch(handle.run_id, lambda record: self._appended(record, handle))
            # Asked while it was queued: it ends at once. A resumed run (transitions stored) is
            # told at its first new transition, once it is past re-driving what it recorded.
            fresh = not self.store.transitions_after(handle.run_id, 0, 1)
            if fresh and self.store.cancel_requested(handle.run_id):
                handle.cancel()

        def play() -> str | None:
            with guard:
                if abandoned[0]:
                    return None
                started[0] = True
            try:
                return self.play(self.store, run_id, document, seed, handed)
            finally:
                for driven in watched:
                    self.store.watch(driven, None)
                self._driving.discard(run_id)

        renewing = asyncio.create_task(self._renew(lease), name=f"lease {run_id}")
        try:
            line = await asyncio.to_thread(play)
        except NotDrivableHere as exc:  # never in silence: the fix is this worker's operator's
            self.report(f"{exc} (handed back to the queue for {self.settings.handback_s:g} s)")
            raise
        finally:
            renewing.cancel()
            with guard:
                if not started[0]:  # cancelled before its thread began: it never will
                    abandoned[0] = True
                    self._driving.discard(run_id)
            await asyncio.to_thread(self.store.release_lease, lease)
        if line is not None:
            self.report(line)

    def _appended(self, record: TransitionRecord, handle: RunHandle) -> None:
        """After each transition the run records, in its thread: pace it, pass a cancel on."""
        if self.settings.pace_s:
            time.sleep(self.settings.pace_s)
        if self.store.cancel_seen(record.run_id):
            handle.cancel()  # idempotent; acted on before the next model request

    async def _take(self, run_id: str, owner: str) -> Lease:
        """The run's lease, once its previous owner's has expired or this worker's own drive of
        it ended (a bounded wait); the run is then marked driven here."""
        waited, step = 0.0, self.settings.lease_s / 4
        while True:
            if run_id not in self._driving:
                self._driving.add(run_id)  # on this loop: no other drive sees it free now
                try:
                    lease = await asyncio.to_thread(
                        self.store.acquire_lease, run_id, owner, self.clock.now(), self.ttl
                    )
                except BaseException:
                    self._driving.discard(run_id)
                    raise
                if lease is not None:
                    return lease
                self._driving.discard(run_id)
            if waited > 3 * self.settings.lease_s:  # the job fails and is retried later
                raise StoreError(f"run {run_id}: another worker holds its lease")
            await asyncio.sleep(step)
            waited += step

    async def _renew(self, lease: Lease) -> None:
        while True:
            await asyncio.sleep(self.settings.lease_s / 3)
            try:
                lease = await asyncio.to_thread(
                    self.store.renew_lease, lease, self.clock.now(), self.ttl
                )
            except LeaseLost:
                log.warning("lease_lost run_id=%s owner=%s", lease.run_id, lease.owner)
                return


class _Retry(RetryStrategy):
    """procrastinate's retries (a failed job, 20 attempts a second apart), except for a run this
    worker cannot drive: handed back after `handback_s`, as often as it takes."""

    def __init__(self, handback_s: float) -> None:
        super().__init__(max_attempts=20, wait=1)
        self.handback_s = handback_s

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        if isinstance(exception, NotDrivableHere):
            return RetryDecision(retry_in={"milliseconds": round(self.handback_s * 1000)})
        return super().get_retry_decision(exception=exception, job=job)


async def requeue_stalled(app: App, settings: WorkerSettings) -> None:
    """Re-queue, every heartbeat, the jobs of workers whose heartbeat stopped."""
    while True:
        await asyncio.sleep(settings.heartbeat_s)
        try:
            stalled = await app.job_manager.get_stalled_jobs(
                queue=QUEUE, seconds_since_heartbeat=settings.stalled_after_s
            )
            for job in stalled:
                await app.job_manager.retry_job(job)
                log.info("requeued_stalled_job job_id=%s", job.id)
        except Exception as exc:  # the sweep goes on; one failed round loses nothing
            log.warning("stalled_sweep_failed error=%s", type(exc).__name__)


async def run_worker(
    url: str,
    play: Play,
    settings: WorkerSettings,
    report: Callable[[str], None],
) -> None:
    """Process queued runs until stopped (SIGTERM or SIGINT)."""
    app = make_app(url)
    async with app.open_async():
        await ensure_queue_schema(app, url)
        size = settings.concurrency + 2
        store = await asyncio.to_thread(
            BlockingStore, lambda: PostgresStore.open(url, max_size=size)
        )
        try:
            driver = RunDriver(store, play=play, settings=settings, report=report)
            app.task(
                name=TASK,
                queue=QUEUE,
                pass_context=True,
                retry=_Retry(settings.handback_s),
            )(driver.drive)
            sweep = asyncio.create_task(requeue_stalled(app, settings), name="stalled sweep")
            try:
                await _work_until_stopped(app, settings, report)
            finally:
                sweep.cancel()
        finally:
            await asyncio.to_thread(store.close)


RESTART_PAUSES_S: Final = (1.0, 2.0, 5.0, 10.0, 30.0)
"""How long a worker that lost the database waits before it starts again, the last repeated."""


async def _work_until_stopped(
    app: App, settings: WorkerSettings, report: Callable[[str], None]
) -> None:
    """procrastinate's worker loop, until a signal stops it (it then returns). A loop that
    raised because the database went away (a fetch during an outage; its registration pruned by
    another worker that saw its heartbeat stop) is started again, registered afresh, once the
    database answers: it exited 1 with a traceback, and every worker of an outage of more than
    about 30 s died so. Its runs were safe meanwhile: their leases lapse, and other workers
    take them over."""
    restarts = 0
    while True:
        try:
            await app.run_worker_async(
                queues=[QUEUE],
                concurrency=settings.concurrency,
                name=settings.name,
                shutdown_graceful_timeout=settings.grace_s,
                update_heartbeat_interval=settings.heartbeat_s,
                stalled_worker_timeout=settings.stalled_after_s,
                fetch_job_polling_interval=1.0,
                install_signal_handlers=True,
            )
            return
        except (ConnectorException, psycopg.Error) as exc:
            pause = RESTART_PAUSES_S[min(restarts, len(RESTART_PAUSES_S) - 1)]
            restarts += 1
            lost = type(exc).__name__
            report(f"the worker lost the database ({lost}); starting again in {pause:g} s")
            await asyncio.sleep(pause)
