"""`runner submit` and `runner worker`: runs queued on procrastinate, driven by many workers on a
PostgreSQL store. The queue's modules (and psycopg) are imported only when these commands run."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.clock import Clock, SystemClock
from ..base.errors import (
    ApprovalRefused,
    ConfigError,
    LoadError,
    NotDrivableHere,
)
from ..core.confirm import SECRET_ENV, ApprovalSecret
from ..engine._ownership import RenewedHolds, let_go_renewed, stays_ended, take_renewed
from ..engine.handle import RunHandle
from ..harness.fixtures import Fixture, collect_fixture_paths, load_fixture
from ..harness.scenario import continue_fixture, resume_fixture, run_fixture
from ..models.base import ModelAdapter
from ..record.trace import RunHeader
from ..store.adapters import BlockingStore
from ..store.base import Store
from ..tools.contracts import ContractSet
from ._arguments import ArgumentParser, count, seconds, seed
from ._common import WORLD, Database, contracts_for, world_dir

if TYPE_CHECKING:
    from ..service.config import LiveConfig


def add_distributed_parsers(
    commands: argparse._SubParsersAction[ArgumentParser],
    with_db: Callable[[argparse.ArgumentParser], None],
) -> None:
    submit = commands.add_parser("submit", help="queue fixture runs for the workers")
    submit.add_argument("paths", nargs="+", type=Path, help="fixture files or folders")
    submit.add_argument("--repeat", type=count, default=1, help="queue each fixture N times")
    submit.add_argument(
        "--seed",
        type=seed,
        default=0,
        help="seed for backoff jitter; copy i of --repeat (from 0) runs with SEED + i (default 0)",
    )
    worker = commands.add_parser("worker", help="drive queued runs until stopped (SIGTERM)")
    worker.add_argument("--concurrency", type=count, default=1, help="runs driven at once")
    worker.add_argument("--lease", type=seconds, default=30.0, help="run lease, seconds (30)")
    worker.add_argument("--heartbeat", type=seconds, default=10.0, help="seconds (10)")
    worker.add_argument(
        "--stalled-after", type=seconds, default=30.0, help="a silent worker is dead after (30)"
    )
    worker.add_argument(
        "--grace", type=seconds, default=30.0, help="on SIGTERM, seconds to finish runs (30)"
    )
    worker.add_argument("--name", default=None, help="this worker's name (default host:pid)")
    worker.add_argument(
        "--config",
        type=Path,
        default=None,
        help="the service config whose `live` section (providers, key variables) builds the "
        "models of queued live runs",
    )
    worker.add_argument(
        "--pace", type=seconds, default=0.0, help="real seconds a run pauses per transition (0)"
    )
    worker.add_argument(
        "--handback",
        type=seconds,
        default=30.0,
        help="a run this worker cannot drive (a live run without --config) goes back to the "
        "queue for this long, seconds (30)",
    )
    for sub in (submit, worker):
        with_db(sub)


def _url(db: Database) -> str:
    if db.url is None:
        raise ConfigError(f"--db {db}: queued runs need a PostgreSQL store (postgresql://...)")
    try:
        import procrastinate  # noqa: F401, PLC0415  # the optional extra
        import psycopg  # noqa: F401, PLC0415
    except ImportError as exc:
        raise ConfigError(f"--db {db} needs: pip install 'runner-fsm[postgres]'") from exc
    return db.url


def submit_command(args: argparse.Namespace) -> int:
    url = _url(args.db)
    from ..distributed.queue import ensure_queue_schema, make_app, submit  # noqa: PLC0415

    if args.repeat < 1:
        raise LoadError(f"--repeat must be at least 1, got {args.repeat}")
    contracts = contracts_for(args.contracts)
    fixtures = [load_fixture(path, contracts) for path in collect_fixture_paths(args.paths)]
    runs = [fixture_job(f, args.seed + i) for f in fixtures for i in range(args.repeat)]

    async def queue() -> list[str]:
        await _check_store(url)
        app = make_app(url)
        async with app.open_async():
            await ensure_queue_schema(app, url)
            return await submit(app, runs)

    for run_id in asyncio.run(queue()):
        print(run_id)
    return 0


def worker_command(args: argparse.Namespace) -> int:
    url = _url(args.db)
    from ..distributed.worker import WorkerSettings, run_worker  # noqa: PLC0415

    settings = WorkerSettings(
        concurrency=args.concurrency,
        lease_s=args.lease,
        heartbeat_s=args.heartbeat,
        stalled_after_s=args.stalled_after,
        grace_s=args.grace,
        pace_s=args.pace,
        handback_s=args.handback,
        **({"name": args.name} if args.name else {}),
    )

    def report(line: str) -> None:
        print(line, flush=True)

    secret = ApprovalSecret.from_env() if os.environ.get(SECRET_ENV) else None
    live = _live(args.config)
    for line in unready_providers(live):
        report(line)
    play = fixture_player(
        contracts_for(args.contracts), world_dir(args.db), live=live, secret=secret
    )
    asyncio.run(_check_store(url))
    asyncio.run(run_worker(url, play, settings, report))
    return 0


async def _check_store(url: str) -> None:
    """Open the store once before the queue: a database that cannot be reached, or one from a
    newer runner, is one clear `StoreError` (the queue's pool would retry for 30 s, then raise)."""
    from ..store.postgres import PostgresStore  # noqa: PLC0415

    await (await PostgresStore.open(url, max_size=1)).close()


@contextmanager
def drive_lease(store: Store, db: Database, run_id: str) -> Iterator[None]:
    """`runner run` and `runner resume` on a PostgreSQL store drive the run under its lease, as
    the engine does on SQLite and an application's engine on PostgreSQL (`_ownership.py`):
    renewed on the store's own loop while the command drives, released after (left to expire
    once the run ended). A second driver (a worker, another command) is refused with
    `RunDriven` before anything is read or sent; one whose process died on this host (SIGKILL)
    is taken over at once, so a resume right after a crash goes on.

    `runner continue` (and `approve`, `deny`) hold the waiting run's lease the same way, as a
    worker does for a queued continuation, so two never continue one run at once; a run waiting
    for approval is released after (`stays_ended`), so its continuation need not wait."""
    holds = store.store if isinstance(store, BlockingStore) else None
    if db.url is None or not isinstance(holds, RenewedHolds):
        yield
        return
    assert isinstance(store, BlockingStore)
    held = store.on_its_loop(take_renewed(holds, run_id))
    try:
        yield
    finally:
        summary = store.summary(run_id)
        ended = summary is not None and stays_ended(summary.terminal, summary.reason)
        store.on_its_loop(let_go_renewed(held, ended=ended))


def fixture_job(fixture: Fixture, seed: int) -> dict[str, Any]:
    """A queued run of `fixture` (its document travels in the job)."""
    from ..distributed.queue import job_arguments  # noqa: PLC0415

    return job_arguments(fixture.model_dump(mode="json", exclude_unset=True), seed)


def _live(config: Path | None) -> LiveConfig | None:
    """The `live` section of the service config `--config` names (None: no config given)."""
    if config is None:
        return None
    try:
        from ..service.config import ServiceConfig  # noqa: PLC0415  # the service extra
    except ImportError as exc:
        raise ConfigError(f"--config needs: pip install 'runner-fsm[service]' ({exc})") from exc
    return ServiceConfig.load(config).live


def unready_providers(live: LiveConfig | None) -> list[str]:
    """A line for each configured provider this worker cannot build models of (its SDK or its
    key missing here): said at start, since its runs would be handed back."""
    if live is None:
        return []
    from ..service.live import sdk_installed  # noqa: PLC0415  # the service extra

    lines = []
    for provider, settings in live.providers.items():
        if not sdk_installed(provider):
            lines.append(
                f"live runs of {provider} are handed back: pip install 'runner-fsm[{provider}]'"
            )
        if not os.environ.get(settings.api_key_env):
            lines.append(
                f"live runs of {provider} are handed back: ${settings.api_key_env} is not set"
            )
    return lines


LIVE_MODEL = "live_model"
"""Where a queued live run's document names its model (`runner.service.live.live_document`)."""


def _live_model(
    live: LiveConfig | None, run_id: str, spec: str, header: RunHeader | None = None
) -> ModelAdapter | None:
    """The live model of a queued live run: `spec` for a new run, the one its `header` names
    for a run an earlier worker began; `NotDrivableHere` (said, and the job handed back) when
    this worker cannot build it."""
    if live is None:
        raise NotDrivableHere(
            f"run {run_id} is a live run ({spec}) and this worker has no service config: "
            "start the worker with --config SERVICE_YAML"
        )
    from ..service.live import continuing_model, model_for  # noqa: PLC0415  # the service extra

    try:
        return continuing_model(live, header) if header is not None else model_for(live, spec)
    except NotDrivableHere:
        raise
    except ConfigError as exc:  # its provider, key or SDK is not here: maybe on another worker
        raise NotDrivableHere(
            f"run {run_id} is a live run this worker cannot drive: {exc}"
        ) from exc


def fixture_player(
    contracts: ContractSet,
    world: Path,
    *,
    live: LiveConfig | None = None,
    secret: ApprovalSecret | None = None,
    clock: Clock | None = None,
) -> Callable[[Store, str, dict[str, Any], int, Callable[[RunHandle], None]], str | None]:
    """What a worker does with a queued fixture run (`distributed.worker.Play`), or with the
    continuation of one whose approvals were decided (which needs the approval `secret`, and
    checks its tokens against `clock`, the system's by default, when it starts); a live run
    (queued by the service) gets its model from `live`, its key from this process's
    environment."""
    wall: Clock = clock or SystemClock()

    def play(
        store: Store,
        run_id: str,
        document: dict[str, Any],
        seed: int,
        started: Callable[[RunHandle], None],
    ) -> str | None:
        from ..distributed.queue import CONTINUE  # noqa: PLC0415

        if CONTINUE in document:
            return _continued(store, run_id, document[CONTINUE], started)
        spec = document.get(LIVE_MODEL)
        if store.header(run_id) is None:
            fixture = Fixture.model_validate({k: v for k, v in document.items() if k != LIVE_MODEL})
            outcome = run_fixture(
                fixture,
                contracts,
                store,
                world=WORLD,
                seed=seed,
                world_dir=world,
                run_id=run_id,
                started=started,
                model=_live_model(live, run_id, spec) if spec is not None else None,
            )
            how = "ran"
        elif store.summary(run_id) is not None:
            return None  # ended under an earlier owner, after this job was re-queued
        else:
            model = _live_model(live, run_id, spec, store.header(run_id)) if spec else None
            outcome = resume_fixture(
                run_id, contracts, store, world=WORLD, store_dir=world, model=model, started=started
            )
            how = "resumed"
        result = outcome.result
        return f"{run_id} {how} {result.terminal.value} ({result.reason})"

    def _continued(
        store: Store, run_id: str, job: dict[str, Any], started: Callable[[RunHandle], None]
    ) -> str:
        if secret is None:  # handed back: a worker with the secret may take it
            raise NotDrivableHere(f"continuing run {run_id} needs {SECRET_ENV} on the worker")
        # The tokens are checked now, when the continuation starts, not when the job says it
        # was decided: it may have waited in the queue past their expiry (every worker busy).
        try:
            outcome = continue_fixture(
                run_id,
                contracts,
                store,
                world=WORLD,
                secret=secret,
                now=wall.now(),
                store_dir=world,
                started=started,
                model=_continuing(store.header(run_id)),
            )
        except ApprovalRefused as exc:  # decided for good: retrying would refuse it again
            return f"{run_id} not continued: {exc}"
        result = outcome.result
        return f"{run_id} continued as {result.run_id}: {result.terminal.value} ({result.reason})"

    def _continuing(header: RunHeader | None) -> ModelAdapter | None:
        """A live waiting run's model as this worker's config offers it (without one, the
        continuation rebuilds it from the header and the environment alone)."""
        if live is None:
            return None
        from ..service.live import continuing_model  # noqa: PLC0415  # the service extra

        return continuing_model(live, header)

    return play
