"""Runs in the service: fixture runs driven in worker threads, reads, cancels and approvals.

Every run thread and every request thread keeps its own store connection (a store keeps to its
thread). A run is known from the moment it is accepted: until its thread stores its header it is
`queued` here, so `GET /v1/runs/{id}` and its events never miss it.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from pydantic import ValidationError

from ..base.clock import Clock, SystemClock
from ..base.errors import ApprovalRefused, RunnerError, StoreCorrupt
from ..core.confirm import ApprovalSecret
from ..core.states import State
from ..engine.approvals import approve, deny, ledger_of, pending_approvals
from ..engine.handle import RunHandle
from ..harness.fixtures import Fixture, PrincipalSpec, collect_fixture_paths, load_fixture
from ..harness.scenario import continue_fixture, resume_fixture, run_fixture, stored_world
from ..harness.world import World
from ..proof.report import RunView, run_json, stored_run_json, transition_json
from ..record.trace import RunSummary, TransitionRecord
from ..store import SqliteStore
from ..store.approvals import Proposal
from ..store.base import RunListing, Store, UnreadableRun
from ..tools.contracts import ContractSet
from ._logs import RunLogs
from .config import ApiKey, ServiceConfig
from .continuations import ContinuationFacts, ContinuationView, continuation_view
from .errors import ApiError
from .jobs import Job, ServiceJobs
from .live import LiveRun, LiveRuns

_log = structlog.get_logger("runner.service")

_BEFORE_ALL = datetime.min.replace(tzinfo=UTC)
"""Where runs the service did not accept sort: before every run it did."""

EVENTS_PAGE = 500
"""Transitions an events stream sends per read of the store (the rest on the next one)."""


class RunThreadStore(SqliteStore):
    """A run thread's SQLite store: it pauses `pace_s` real seconds before each transition it
    records, and passes on a cancel asked for from another thread.

    The cancel is passed on here, in the run's own thread, because a scripted run on its virtual
    clock may never yield to its loop between steps (its waits take no time), so a callback
    scheduled from outside would only run once the run had ended.
    """

    def __init__(self, path: Path, pace_s: float) -> None:
        super().__init__(path)
        self.pace_s = pace_s
        self.current: Accepted | None = None
        """The run this thread drives now."""

    def append(self, record: TransitionRecord, inputs: Any = ()) -> None:
        if self.pace_s:
            time.sleep(self.pace_s)
        super().append(record, inputs)
        current = self.current
        if current is not None and current.cancel_requested and current.started is not None:
            current.started[1].cancel()  # idempotent; acted on before the next model request


@dataclass(slots=True)
class Accepted:
    """A run this process accepted: its tenant, and how to cancel it once it started."""

    run_id: str
    tenant: str
    name: str
    accepted_at: datetime
    cancel_requested: bool = False
    started: tuple[asyncio.AbstractEventLoop, RunHandle] | None = None
    finished: bool = False
    failure: str | None = None
    continued_as: str | None = None
    continuing: bool = False
    """A continuation of this (waiting) run is queued or going on this process's run threads."""
    continuation_error: str | None = None
    """Why the last continuation could not start or go on (cleared when another is handed)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def started_as(self, handle: RunHandle) -> None:
        """Told the run's handle once it is driven (begun, or resumed after a restart): a
        cancel asked for before then lands now, one asked for after goes to the handle."""
        with self.lock:
            self.started = (asyncio.get_running_loop(), handle)
            if self.cancel_requested:
                handle.cancel()


def bundled_fixtures(world: World, contracts: ContractSet, extra: list[Path]) -> dict[str, Fixture]:
    """Every fixture a run may name: the world's bundled ones (and their subfolders), then the
    config's."""
    root = world.fixtures_dir()
    folders = [root, *sorted(p for p in root.iterdir() if p.is_dir())]
    found: dict[str, Fixture] = {}
    for path in collect_fixture_paths(folders):  # YAML and JSON, as `runner run FOLDER` reads
        fixture = load_fixture(path, contracts)
        found.setdefault(fixture.name, fixture)  # a name the top level has keeps its fixture
    for path in collect_fixture_paths(extra) if extra else []:
        fixture = load_fixture(path, contracts)
        found[fixture.name] = fixture  # the config's own replace a bundled one of their name
    return found


class RunService:
    """What the HTTP layer calls; every method is synchronous (FastAPI runs it in a thread)."""

    def __init__(
        self,
        config: ServiceConfig,
        db: Path,
        contracts: ContractSet,
        secret: ApprovalSecret | None,
        *,
        world: World,
        shared: Store | None = None,
        world_dir: Path | None = None,
        clock: Clock | None = None,
    ) -> None:
        """`db`: the SQLite file whose runs this process drives; or, with `shared` (a
        PostgreSQL store, see `runner.service.queued`), the store many processes share.
        `world`: the world its fixtures play in (the factories, `build_app` and
        `build_queued_app`, give the travel world unless told another); `world_dir`: where
        runs' places in it are kept (default: beside `db`).
        `clock`: the service's wall clock (default: the system's), which stamps acceptances
        and decisions and against which a continuation checks its tokens when it starts; a
        run keeps its own clock (a fixture's is virtual)."""
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.db = db.resolve()
        self.world = world
        self.world_dir = world_dir or self.db.parent / f"{self.db.name}.world"
        self.contracts = contracts
        self.secret = secret
        self.fixtures = bundled_fixtures(world, contracts, config.fixtures)
        self._executor = ThreadPoolExecutor(config.workers, thread_name_prefix="runner-run")
        self._accepted: dict[str, Accepted] = {}
        self._continuing: dict[str, Accepted] = {}
        """The continuations this process drives, by their own run id: what a cancel of one
        finds (`cancel`), from its start to its end."""
        self._lock = threading.Lock()
        self._local = threading.local()
        self._shared = shared
        self._logs = RunLogs()
        self._continuations: dict[str, str] = {}
        """Continuations found in the store (a run continued once stays continued)."""
        self.live = LiveRuns(
            config.live, self.fixtures, contracts, needs_keys=shared is None, clock=self.clock
        )
        self._jobs: ServiceJobs | None = None
        if shared is None:
            SqliteStore(self.db).close()  # created and migrated once, before any thread opens it
            self._jobs = ServiceJobs(self.db)

    # -- stores ----------------------------------------------------------------------------

    def store(self) -> Store:
        """This thread's read/write connection (or the shared store, which serves threads)."""
        if self._shared is not None:
            return self._shared
        store = getattr(self._local, "store", None)
        if store is None:
            store = self._local.store = SqliteStore(self.db)
        return store

    def _run_store(self) -> RunThreadStore:
        store = getattr(self._local, "run_store", None)
        if store is None:
            store = self._local.run_store = RunThreadStore(self.db, self.config.pace_s)
        return store

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- submitting and cancelling --------------------------------------------------------------

    def fixture_for(self, key: ApiKey, name: str) -> Fixture:
        fixture = self.fixtures.get(name)
        if fixture is None:
            raise ApiError(404, "no_fixture", f"no fixture named {name!r}")
        # Tenant and principal come from the key, never from the fixture or the body.
        return fixture.model_copy(
            update={
                "tenant": key.tenant,
                "principal": PrincipalSpec(id=key.principal.id, scopes=key.principal.scopes),
            }
        )

    def queued_tenant(self, run_id: str) -> str | None:
        """The tenant of a run accepted but not started (by another process too)."""
        accepted = self._accepted.get(run_id)
        if accepted is not None:
            return accepted.tenant
        job = self._jobs.get(run_id) if self._jobs is not None else None
        return job.tenant if job is not None else None  # accepted before a restart

    def submit_fixture(self, key: ApiKey, name: str) -> str:
        return self._accept(key, self.fixture_for(key, name), None)

    def submit_live(self, key: ApiKey, request: LiveRun) -> str:
        """A live-model run (see `runner.service.live`); 422 for what the config does not allow."""
        return self._accept(key, self.live.fixture(key, request), request.model)

    def _accept(self, key: ApiKey, fixture: Fixture, model: str | None) -> str:
        with self._lock:
            waiting = sum(
                1 for a in self._accepted.values() if a.started is None and not a.finished
            )
            if waiting >= self.config.max_queued:
                raise ApiError(429, "queue_full", f"{waiting} runs are waiting; try again later")
            run_id = str(uuid.uuid4())
            accepted = Accepted(run_id, key.tenant, fixture.name, self.clock.now())
            self._accepted[run_id] = accepted
        if self._jobs is not None:  # the 202 is a promise: kept across a restart
            try:
                self._jobs.add(
                    run_id,
                    "fixture",
                    tenant=key.tenant,
                    name=fixture.name,
                    document=fixture.model_dump(mode="json", exclude_unset=True),
                    model=model,
                    accepted_at=accepted.accepted_at,
                )
            except BaseException:  # not kept (the store is locked...): not accepted either
                with self._lock:
                    self._accepted.pop(run_id, None)
                raise
        self._executor.submit(self._drive, accepted, fixture, model)
        return run_id

    def recover(self) -> int:
        """Take up what an earlier process on this SQLite file accepted and did not finish
        (see `runner.service.jobs`); returns how many runs it took up."""
        if self._jobs is None:
            return 0
        store, taken = self.store(), 0
        for job in self._jobs.unfinished():
            accepted = Accepted(job.run_id, job.tenant, job.name, job.accepted_at)
            if job.kind == "continue":
                accepted.finished = True  # the waiting run itself has ended
                self._accepted.setdefault(job.run_id, accepted)
                self._hand(self._accepted[job.run_id], recovered=True)
            elif store.summary(job.run_id) is not None:
                self._jobs.finish(job.run_id, "fixture")
                continue
            elif store.header(job.run_id) is not None:
                self._accepted[job.run_id] = accepted
                self._executor.submit(self._resume, accepted)
            else:
                fixture = self._fixture_of(job)
                if fixture is None:
                    continue
                self._accepted[job.run_id] = accepted
                self._executor.submit(self._drive, accepted, fixture, job.model)
            taken += 1
        taken += self._continue_decided_without_job(store)
        if taken:
            _log.warning("took up runs an earlier service process left unfinished", runs=taken)
        return taken

    def _continue_decided_without_job(self, store: Store) -> int:
        """Continue each run waiting for approval whose proposals are all decided and that no
        job ever continued: a decision and its job are two writes, and a process that stopped
        between them left it (a second decision is refused: it is decided). A continuation's id
        derives from the run and its decisions, so one made meanwhile is found, not doubled."""
        assert self._jobs is not None
        decided: dict[str, list[Proposal]] = {}
        for proposal in ledger_of(store).proposals():
            decided.setdefault(proposal.run_id, []).append(proposal)
        jobs = self._jobs.continued()
        candidates = [
            (run_id, proposals)
            for run_id, proposals in decided.items()
            if run_id not in jobs and all(p.decision is not None for p in proposals)
        ]
        if not candidates:
            return 0
        continued = {
            continued_from(item.header.continues)
            for item in store.runs()
            if isinstance(item, RunListing)
        }
        taken = 0
        for run_id, proposals in candidates:
            summary = store.summary(run_id)
            if run_id in continued or summary is None or summary.terminal != State.ESCALATE:
                continue
            at = max(p.decision.decided_at for p in proposals if p.decision is not None)
            accepted = Accepted(run_id, proposals[0].tenant, "", at, finished=True)
            with self._lock:
                self._accepted.setdefault(run_id, accepted)
            self._jobs.add(
                run_id,
                "continue",
                tenant=accepted.tenant,
                name="",
                document={},
                model=None,
                accepted_at=at,
            )
            self._hand(self._accepted[run_id])
            taken += 1
        return taken

    def _fixture_of(self, job: Job) -> Fixture | None:
        """The fixture the job was accepted with (its tenant and principal the key's); None (the
        job crossed off, saying why) when it no longer loads."""
        try:
            return Fixture.model_validate(job.document)
        except ValidationError as exc:
            assert self._jobs is not None
            problem = f"its fixture no longer loads: {exc.errors()[0]['msg']}"
            self._jobs.finish(job.run_id, job.kind, problem)
            return None

    def _resume(self, accepted: Accepted) -> None:
        """Go on with a run an earlier process started (from its records, as `runner resume`)."""
        self._in_run_thread(
            accepted,
            lambda store: resume_fixture(
                accepted.run_id,
                self.contracts,
                store,
                world=self.world,
                store_dir=self.db.parent,
                model=self.live.continuing(store.header(accepted.run_id)),
                started=accepted.started_as,
            ),
        )

    def _drive(self, accepted: Accepted, fixture: Fixture, model: str | None = None) -> None:
        self._in_run_thread(
            accepted,
            lambda store: run_fixture(
                fixture,
                self.contracts,
                store,
                world=self.world,
                world_dir=self.world_dir,
                run_id=accepted.run_id,
                started=accepted.started_as,
                model=self.live.model(model) if model is not None else None,
            ),
        )

    def _in_run_thread(self, accepted: Accepted, play: Callable[[RunThreadStore], object]) -> None:
        """Play a run on this thread's store; an error is kept on the run (and crossed off)."""
        store = self._run_store()
        store.current = accepted
        try:
            play(store)
        except RunnerError as exc:  # the run could not start (or its store failed): say so
            accepted.failure = str(exc)
            _log.warning("run failed", run_id=accepted.run_id, error=str(exc))
        except Exception as exc:
            accepted.failure = f"{type(exc).__name__}: {exc}"
            _log.exception("run crashed", run_id=accepted.run_id)
        finally:
            store.current = None
            accepted.finished = True
            if self._jobs is not None:  # a run begun and not ended is taken up at the next start
                run_id = accepted.run_id
                try:
                    ended = store.summary(run_id) is not None or store.header(run_id) is None
                except RunnerError:  # the store itself failed: the next start looks again
                    ended = False
                self._jobs.finish(run_id, "fixture", accepted.failure, done=ended)

    def cancel(self, key: ApiKey, run_id: str) -> dict[str, Any]:
        self.check_tenant(key, run_id)
        if self.store().summary(run_id) is not None:
            raise ApiError(409, "ended", f"run {run_id} already ended")
        accepted = self._accepted.get(run_id) or self._continuing.get(run_id)
        failure = self._failure(run_id)
        if failure is not None:
            raise ApiError(409, "stopped", f"run {run_id} stopped: {failure}")
        if accepted is None or accepted.finished:
            raise ApiError(409, "not_here", f"run {run_id} is not driven by this service")
        with accepted.lock:
            accepted.cancel_requested = True
            if accepted.started is not None:
                loop, handle = accepted.started
                if not loop.is_closed():
                    loop.call_soon_threadsafe(handle.cancel)
        return {"run_id": run_id, "cancel_requested": True}

    # -- reading -------------------------------------------------------------------------------

    def check_tenant(self, key: ApiKey, run_id: str) -> None:
        """404 for a run of another tenant, exactly as for one that does not exist."""
        try:
            header = self.store().header(run_id)
        except StoreCorrupt:  # whose it is, from its job: its tenant is told, others get 404
            if self.queued_tenant(run_id) == key.tenant:
                raise
            raise ApiError(404, "no_run", f"no run {run_id}") from None
        tenant = header.tenant if header is not None else None
        if tenant is None:
            tenant = self.queued_tenant(run_id)
        if tenant != key.tenant:
            raise ApiError(404, "no_run", f"no run {run_id}")

    def run(self, key: ApiKey, run_id: str) -> dict[str, Any]:
        self.check_tenant(key, run_id)
        store = self.store()
        header = store.header(run_id)
        accepted = self._accepted.get(run_id)
        when = self._accepted_at(run_id)
        accepted_at = when.isoformat() if when is not None else None
        failure = self._failure(run_id)
        if header is None:  # not started: the same keys as a started run, with nothing in them
            name = accepted.name if accepted is not None else self._queued_name(key, run_id)
            data = run_json(RunView.not_started(run_id, name), None)
            data["context"].update(
                max_output_tokens_per_step=[], fallback_requests=[], failed_requests=[]
            )
            data.update(
                started_as=None,
                status="failed" if failure else "queued",
                error=failure,
                state=State.PLAN.value,
                tenant=key.tenant,  # check_tenant found it queued for this tenant
                started_at=None,
                accepted_at=accepted_at,
                continues=None,
                continued_as=None,
                continuation=None,
                continuation_error=None,
                holds=None,
            )
            return data
        summary = store.summary(run_id)
        records = self._logs.read(store, run_id)  # only what it appended since the last read
        view = RunView.of_stored(header, summary, records)
        sent = self._logs.requests_sent(store, run_id, ended=summary is not None)
        data = stored_run_json(header, view, sent)  # as `runner show --json`
        state = summary.terminal if summary else (records[-1].to_state if records else State.PLAN)
        continuation = self._continuation_view(run_id, summary)
        data.update(
            status=_status(summary is not None, failure),
            error=failure if summary is None else None,
            state=State(state).value,
            tenant=header.tenant,
            started_at=header.started_at.isoformat(),
            accepted_at=accepted_at,
            continues=continued_from(header.continues),
            continued_as=self.continuation_of(run_id),
            continuation=continuation.as_json() if continuation is not None else None,
            continuation_error=continuation.error if continuation is not None else None,
            holds=self.world.recorded_holds(stored_world(header), self.db.parent),
        )
        return data

    def list_runs(
        self, key: ApiKey, offset: int, limit: int, *, newest_first: bool = False
    ) -> dict[str, Any]:
        """The tenant's runs, in the order they were accepted (or started, for runs this service
        did not accept), those not started yet included (`queued`, or `failed` to start)."""
        store = self.store()
        found = store.runs()
        listed = [
            item
            for item in found
            if isinstance(item, RunListing) and item.header.tenant == key.tenant
        ]
        stored = {item.header.run_id for item in found if isinstance(item, RunListing)}
        unreadable = [  # listed by the tenant of the job that started it (no header says)
            unreadable_item(item.run_id, item.problem, self._accepted_name(item.run_id))
            for item in found
            if isinstance(item, UnreadableRun) and self.queued_tenant(item.run_id) == key.tenant
        ]
        stored |= {item["run_id"] for item in unreadable}
        times = self._acceptance_times(key.tenant)

        def accepted(item: RunListing | dict[str, Any]) -> datetime:
            """When the service accepted it (a continuation: when it was decided); runs it did
            not accept (stored by the command line) first, in the store's order."""
            if isinstance(item, dict):
                return times.get((item["run_id"], "fixture"), _BEFORE_ALL)
            when = times.get((item.header.run_id, "fixture"))
            waited = continued_from(item.header.continues)
            if when is None and waited is not None:
                when = times.get((waited, "continue"))
            return when or _BEFORE_ALL

        mine: list[RunListing | dict[str, Any]] = sorted(
            [*listed, *unreadable, *self._not_started(key.tenant, stored)], key=accepted
        )
        if newest_first:
            mine.reverse()
        page = mine[offset : offset + limit]
        items = []
        for item in page:
            if isinstance(item, dict):
                items.append(item)
                continue
            header, summary = item.header, item.summary
            if summary is not None:
                state = summary.terminal
            else:
                try:
                    records = self._logs.read(store, header.run_id)
                except StoreCorrupt as exc:
                    items.append(unreadable_item(header.run_id, str(exc), header.name))
                    continue
                state = records[-1].to_state if records else State.PLAN
            stopped = self._failure(header.run_id) if summary is None else None
            items.append(
                {
                    "run_id": header.run_id,
                    "name": header.name,
                    "status": _status(summary is not None, stopped),
                    "state": State(state).value,
                    "reason": summary.reason if summary else stopped,
                    "attempts": summary.attempts if summary else None,
                    "started_at": header.started_at.isoformat(),
                    "continues": continued_from(header.continues),
                }
            )
        following = offset + limit if offset + limit < len(mine) else None
        return {"runs": items, "total": len(mine), "next_offset": following}

    def _acceptance_times(self, tenant: str) -> dict[tuple[str, str], datetime]:
        """When this service accepted the tenant's runs and the continuations (wall clock)."""
        return self._jobs.accepted_times(tenant) if self._jobs is not None else {}

    def _accepted_at(self, run_id: str) -> datetime | None:
        job = self._jobs.get(run_id) if self._jobs is not None else None
        return job.accepted_at if job is not None else None

    def _failure(self, run_id: str) -> str | None:
        """Why a run this service accepted stopped without ending (None: it goes on, ended, or
        is not this service's): it could not start, or it stopped and waits for a restart."""
        accepted = self._accepted.get(run_id)
        if accepted is not None:
            return accepted.failure if accepted.finished else None
        job = self._jobs.get(run_id) if self._jobs is not None else None
        return job.failure if job is not None else None

    def _accepted_name(self, run_id: str) -> str:
        """The fixture a run this process (or one before it on the file) accepted ran."""
        accepted = self._accepted.get(run_id)
        if accepted is not None:
            return accepted.name
        job = self._jobs.get(run_id) if self._jobs is not None else None
        return job.name if job is not None else ""

    def _queued_name(self, key: ApiKey, run_id: str) -> str:
        """The name a run another process accepted was queued under ("" if it is not listed)."""
        listed = self._not_started(key.tenant, set())
        return next((str(item["name"]) for item in listed if item["run_id"] == run_id), "")

    def _not_started(self, tenant: str, stored: set[str]) -> list[dict[str, Any]]:
        """The tenant's accepted runs with no header stored yet: queued, or failed to start."""
        if self._jobs is None:
            return []
        items = []
        for job in self._jobs.fixture_runs(tenant):
            if job.run_id in stored:
                continue
            accepted = self._accepted.get(job.run_id)
            failure = job.failure or (accepted.failure if accepted is not None else None)
            if job.done and failure is None:
                continue  # ended (its header may have been stored after `runs()` was read)
            items.append(queued_item(job.run_id, job.name, failure))
        return items

    def transitions(self, key: ApiKey, run_id: str, after: int, limit: int) -> dict[str, Any]:
        self.check_tenant(key, run_id)
        records = self.store().transitions_after(run_id, after, limit)
        return {
            "run_id": run_id,
            "transitions": [transition_json(r) for r in records],
            "next_after": records[-1].seq if records else after,
        }

    def events_after(self, run_id: str, after: int) -> tuple[list[dict[str, Any]], Any]:
        """Transitions after `after` and the run's end (its summary, or the failure that kept it
        from starting), for the events stream: a poll reads only what follows `after`."""
        store = self.store()
        summary = store.summary(run_id)  # first: an end read means every transition is stored
        records = store.transitions_after(run_id, after, EVENTS_PAGE)
        end: dict[str, Any] | None = None
        if summary is not None:
            end = {"run_id": run_id, "terminal": str(summary.terminal), "reason": summary.reason}
        else:
            failure = self._failure(run_id)  # it stopped: nothing follows until a restart
            if failure is not None:
                end = {"run_id": run_id, "terminal": None, "reason": failure}
        return [transition_json(r) for r in records], end

    def last_seq(self, run_id: str, at_most: int) -> int:
        """The seq of the run's last stored transition, if it is below `at_most`; else
        `at_most` (-1: the run has none)."""
        store = self.store()
        if at_most < 1 or store.transitions_after(run_id, at_most - 1, 1):
            return at_most
        records = self._logs.read(store, run_id)  # a seq past the end: a client's mistake
        return records[-1].seq if records else -1

    # -- approvals -----------------------------------------------------------------------------

    def approvals(self, key: ApiKey) -> list[dict[str, Any]]:
        return [proposal_json(p) for p in pending_approvals(self.store()) if p.tenant == key.tenant]

    def _proposal(self, key: ApiKey, approval_id: str) -> Proposal:
        run_id, _, operation = approval_id.partition("~")
        for proposal in pending_approvals(self.store(), run_id or None):
            if proposal.operation_key == operation and proposal.tenant == key.tenant:
                return proposal
        for proposal in self._decided(run_id):
            if proposal.operation_key == operation and proposal.tenant == key.tenant:
                raise ApiError(409, "decided", f"approval {approval_id} is already decided")
        raise ApiError(404, "no_approval", f"no pending approval {approval_id}")

    def _decided(self, run_id: str) -> list[Proposal]:
        if not run_id:
            return []
        return [p for p in ledger_of(self.store()).proposals(run_id) if p.status != "pending"]

    def decide(
        self, key: ApiKey, approval_id: str, verdict: str, note: str | None
    ) -> dict[str, Any]:
        proposal = self._proposal(key, approval_id)
        if self.secret is None:
            raise ApiError(409, "no_secret", "approvals need the service's approval secret")
        now = self.clock.now()
        try:
            if verdict == "approve":
                approve(
                    self.store(),
                    proposal.run_id,
                    proposal.operation_key,
                    approver=key.principal.id,
                    secret=self.secret,
                    now=now,
                    note=note,
                )
            else:
                deny(
                    self.store(),
                    proposal.run_id,
                    proposal.operation_key,
                    approver=key.principal.id,
                    now=now,
                    note=note,
                )
        except ApprovalRefused as exc:
            raise ApiError(409, exc.problem, str(exc)) from None
        # Continued once every proposal is decided: asked before, it would only be refused
        # (the others still wait), which is no error. Of two last decisions made at once,
        # the later one to be stored sees both.
        if not self._waits_for(proposal.run_id):
            self.continue_decided(key, proposal.run_id, now)
        return {
            "approval_id": approval_id,
            "run_id": proposal.run_id,
            "verdict": "approved" if verdict == "approve" else "denied",
            "approver": key.principal.id,
        }

    def continue_decided(self, key: ApiKey, run_id: str, now: datetime) -> None:
        """Continue `run_id`, its approvals decided at `now` (here: on this process's threads;
        kept in the service's jobs first, so a restart continues it if this process stops). Its
        tokens are checked when it starts, not at `now`: every run thread may be busy."""
        with self._lock:  # a run from before this process: continued here all the same
            accepted = self._accepted.setdefault(
                run_id, Accepted(run_id, key.tenant, "", now, finished=True)
            )
        with accepted.lock:
            if accepted.continuing:  # one at a time: the one in hand saw every decision
                return
            accepted.continuing = True
        try:
            if self._jobs is not None:
                self._jobs.add(
                    run_id,
                    "continue",
                    tenant=key.tenant,
                    name=accepted.name,
                    document={},
                    model=None,
                    accepted_at=now,
                )
        except BaseException:
            with accepted.lock:
                accepted.continuing = False
            raise
        self._hand(accepted)

    def _waits_for(self, run_id: str) -> int:
        """How many of the run's proposals are not decided yet."""
        return sum(1 for p in ledger_of(self.store()).proposals(run_id) if p.status == "pending")

    def _hand(self, accepted: Accepted, *, recovered: bool = False) -> None:
        """Queue the continuation of `accepted` on the run threads, marked `continuing` till it
        is done; an error of an earlier one is no longer the truth."""
        with accepted.lock:
            accepted.continuing = True
            accepted.continuation_error = None
        self._executor.submit(self._continue, accepted, recovered=recovered)

    def _continue(self, accepted: Accepted, *, recovered: bool = False) -> None:
        """Continue the decided run on this run thread, its tokens checked against the clock
        now, as `runner continue` checks them: one that expired while the continuation waited
        for a thread (or, taken up after a restart, for a process) is refused."""
        driven: list[str] = []  # the continuation's run, once it is driven
        try:
            ended = self._ended_continuation(accepted.run_id) if recovered else None
            if ended is not None:  # taken up after a restart, and it had ended before
                accepted.continued_as = ended
                return
            if self.secret is None:
                raise RuntimeError("approvals need the service's approval secret")
            store = self._run_store()
            outcome = continue_fixture(
                accepted.run_id,
                self.contracts,
                store,
                world=self.world,
                secret=self.secret,
                now=self.clock.now(),
                store_dir=self.db.parent,
                model=self.live.continuing(store.header(accepted.run_id)),
                started=lambda handle: driven.append(self._continuation_started(accepted, handle)),
            )
            accepted.continued_as = outcome.result.run_id
        except ApprovalRefused as exc:  # refused before anything was stored or sent
            if exc.problem == "continued":  # made already (and ended): nothing went wrong
                accepted.continued_as = exc.continued_as
            elif exc.problem != "pending":  # still waiting is no error (see `decide`)
                accepted.continuation_error = f"{type(exc).__name__}: {exc}"
                _log.warning("continuation refused", run_id=accepted.run_id, error=str(exc))
        except Exception as exc:  # shown on the run (`continuation_error`), and logged
            accepted.continuation_error = f"{type(exc).__name__}: {exc}"
            _log.exception("continuation failed", run_id=accepted.run_id)
        finally:
            with accepted.lock:
                accepted.continuing = False
            for run_id in driven:  # ended, or stopped: no longer this process's to cancel
                self._continuing.pop(run_id).finished = True
                self._run_store().current = None
            if self._jobs is not None:
                self._jobs.finish(accepted.run_id, "continue", accepted.continuation_error)

    def _continuation_started(self, waiting: Accepted, handle: RunHandle) -> str:
        """A continuation of `waiting` is driven as `handle`: a cancel of it finds it now."""
        continuation = Accepted(
            run_id=handle.run_id, tenant=waiting.tenant, name=waiting.name,
            accepted_at=self.clock.now(),
        )  # fmt: skip
        continuation.started_as(handle)
        self._continuing[handle.run_id] = continuation
        self._run_store().current = continuation  # passes a cancel on (`RunThreadStore`)
        return handle.run_id

    def _ended_continuation(self, run_id: str) -> str | None:
        """The continuation of `run_id` that has already ended, if there is one (looked for only
        for a job taken up after a restart)."""
        found = self._continuation_in_store(run_id)
        return found if found is not None and self.store().summary(found) is not None else None

    def _continuation_view(
        self, run_id: str, summary: RunSummary | None
    ) -> ContinuationView | None:
        """Where the continuation of a run that ended waiting for approval stands now (None:
        the run did not end so)."""
        if summary is None or summary.terminal != State.ESCALATE:
            return None
        proposals = ledger_of(self.store()).proposals(run_id)
        if not proposals:
            return None
        continuation = self.continuation_of(run_id)
        ended = continuation is not None and self.store().summary(continuation) is not None
        in_hand, failure = self._continuation_in_hand(run_id)
        return continuation_view(
            ContinuationFacts(
                pending=sum(1 for p in proposals if p.status == "pending"),
                continuation=continuation,
                ended=ended,
                in_hand=in_hand,
                failure=failure,
            )
        )

    def _continuation_in_hand(self, run_id: str) -> tuple[bool, str | None]:
        """Whether a continuation of `run_id` is queued or going here, and why the last one
        could not go on: this process's (it handed it), else the job an earlier process on the
        file kept."""
        accepted = self._accepted.get(run_id)
        if accepted is not None:
            with accepted.lock:
                if accepted.continuing or accepted.continuation_error is not None:
                    return accepted.continuing, accepted.continuation_error
        job = self._jobs.get(run_id, "continue") if self._jobs is not None else None
        return False, job.failure if job is not None else None

    def continuation_of(self, run_id: str) -> str | None:
        """The run continuing `run_id`: the one this process made, or one found in the store
        (made before a restart; looked for only for a run that ended waiting for approval)."""
        accepted = self._accepted.get(run_id)
        if accepted is not None and accepted.continued_as is not None:
            return accepted.continued_as
        found = self._continuations.get(run_id)
        if found is None:
            summary = self.store().summary(run_id)
            if summary is None or summary.terminal != State.ESCALATE:
                return None
            found = self._continuation_in_store(run_id)
            if found is not None:
                self._continuations[run_id] = found
        return found

    def _continuation_in_store(self, run_id: str) -> str | None:
        for item in self.store().runs():
            if isinstance(item, RunListing) and continued_from(item.header.continues) == run_id:
                return item.header.run_id
        return None


def _status(ended: bool, failure: str | None) -> str:
    """A stored run's status: `ended`; `failed` when it stopped without ending (why is given
    beside it); `running` otherwise."""
    return "ended" if ended else "failed" if failure else "running"


def queued_item(run_id: str, name: str, failure: str | None = None) -> dict[str, Any]:
    """A listed run with no header stored yet: `queued`, or `failed` to start (and why)."""
    return {
        "run_id": run_id,
        "name": name,
        "status": "failed" if failure else "queued",
        "state": State.PLAN.value,
        "reason": failure,
        "attempts": None,
        "started_at": None,
        "continues": None,
    }


def unreadable_item(run_id: str, problem: str, name: str = "") -> dict[str, Any]:
    """A listed run whose stored record cannot be read back: its state is not known (null)."""
    _log.error("a stored run cannot be read back", run_id=run_id, problem=problem)
    return {
        "run_id": run_id,
        "name": name,
        "status": "unreadable",
        "state": None,
        "reason": "its stored record cannot be read back (the service log has more)",
        "attempts": None,
        "started_at": None,
        "continues": None,
    }


def continued_from(continues: dict[str, Any] | None) -> str | None:
    """The run a continuation continues (its header keeps the decisions too)."""
    found = continues.get("run_id") if continues else None
    return found if isinstance(found, str) else None


def proposal_json(proposal: Proposal) -> dict[str, Any]:
    return {
        "approval_id": f"{proposal.run_id}~{proposal.operation_key}",
        "run_id": proposal.run_id,
        "operation_key": proposal.operation_key,
        "tool": proposal.tool,
        "summary": proposal.summary,
        "params": proposal.params,
        "reasons": proposal.reasons,
        "proposed_at": proposal.created_at.isoformat(),
    }
