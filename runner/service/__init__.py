"""The runner as a service (`runner serve`): an HTTP API over a store, live events over SSE,
approvals, cancel, and a run inspector page. Needs the optional extra `runner-fsm[service]`
(FastAPI, sse-starlette, uvicorn); `import runner` never imports it.

A face, like the command line: it may import every layer. It plays fixtures through the
harness in the world it is given (`runner.harness.world.World`); only the factories below name
a world, the travel demo's, when none is given (`tests/test_import_graph.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog
from fastapi import FastAPI

from ..base.clock import Clock
from ..core.confirm import SECRET_ENV, ApprovalSecret
from ..harness.world import World
from ..tools.contracts import ContractSet
from .app import create_app
from .config import ApiKey, ServiceConfig
from .runs import RunService

_log = structlog.get_logger("runner.service")

__all__ = ["ApiKey", "RunService", "ServiceConfig", "build_app", "build_queued_app", "create_app"]


def build_app(
    config: ServiceConfig,
    db: Path,
    contracts: ContractSet,
    *,
    world: World | None = None,
    clock: Clock | None = None,
) -> FastAPI:
    """The service's app on the SQLite store `db` (created when missing); `world`: the world
    its fixtures play in (default: the travel demo's); `clock`: the service's wall clock
    (default: the system's; see `RunService`)."""
    service = RunService(
        config, db, contracts, _approval_secret(config), world=world or _travel(), clock=clock
    )
    service.recover()  # what a stopped or crashed process on this file left unfinished
    app = create_app(service)
    app.state.service = service
    return app


def build_queued_app(
    config: ServiceConfig,
    url: str,
    contracts: ContractSet,
    world_dir: Path,
    *,
    world: World | None = None,
    clock: Clock | None = None,
) -> FastAPI:
    """The service's app on the PostgreSQL store `url`: runs go to `runner worker`s, their
    places in `world` (default: the travel demo's) under `world_dir`."""
    from .queued import QueuedRunService  # noqa: PLC0415  # psycopg, procrastinate: optional

    secret = _approval_secret(config)
    service = QueuedRunService(
        config, url, contracts, secret, world_dir, world=world or _travel(), clock=clock
    )
    service.recover()  # decided approvals a stopped process left without a continuation
    app = create_app(service)
    app.state.service = service
    return app


def _travel() -> World:
    """The default world, named here only: the rest of the service knows the protocol."""
    from ..travel import TRAVEL  # noqa: PLC0415  # the service itself depends on no world

    return TRAVEL


def _approval_secret(config: ServiceConfig) -> ApprovalSecret | None:
    """The confirm tokens' key: the config's, or `$RUNNER_APPROVAL_SECRET`; without one the
    service still starts (fixture runs need none) and says what it cannot do."""
    value = config.approval_secret or os.environ.get(SECRET_ENV)
    if not value:
        _log.warning(
            "no approval secret (approval_secret in the config, or $RUNNER_APPROVAL_SECRET): "
            "approvals are listed, but approving or denying one answers 409 no_secret"
        )
        return None
    return ApprovalSecret(value)
