"""The runner as a service (`runner serve`): an HTTP API over a store, live events over SSE,
approvals, cancel, and a run inspector page. Needs the optional extra `runner[service]`
(FastAPI, sse-starlette, uvicorn); `import runner` never imports it.

The service is outermost, like the command line: it wires the travel world's fixtures to the
core (`tests/test_import_graph.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog
from fastapi import FastAPI

from ..base.clock import Clock
from ..core.confirm import SECRET_ENV, ApprovalSecret
from ..tools.contracts import ContractSet
from .app import create_app
from .config import ApiKey, ServiceConfig
from .runs import RunService

_log = structlog.get_logger("runner.service")

__all__ = ["ApiKey", "RunService", "ServiceConfig", "build_app", "build_queued_app", "create_app"]


def build_app(
    config: ServiceConfig, db: Path, contracts: ContractSet, *, clock: Clock | None = None
) -> FastAPI:
    """The service's app on the SQLite store `db` (created when missing); `clock`: the
    service's wall clock (default: the system's; see `RunService`)."""
    service = RunService(config, db, contracts, _approval_secret(config), clock=clock)
    service.recover()  # what a stopped or crashed process on this file left unfinished
    app = create_app(service)
    app.state.service = service
    return app


def build_queued_app(
    config: ServiceConfig,
    url: str,
    contracts: ContractSet,
    world: Path,
    *,
    clock: Clock | None = None,
) -> FastAPI:
    """The service's app on the PostgreSQL store `url`: runs go to `runner worker`s."""
    from .queued import QueuedRunService  # noqa: PLC0415  # psycopg, procrastinate: optional

    service = QueuedRunService(config, url, contracts, _approval_secret(config), world, clock=clock)
    service.recover()  # decided approvals a stopped process left without a continuation
    app = create_app(service)
    app.state.service = service
    return app


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
