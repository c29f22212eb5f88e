"""The runner as a service (`runner serve`): an HTTP API over a store, live events over SSE,
approvals, cancel, and a run inspector page. Needs the optional extra `runner[service]`
(FastAPI, sse-starlette, uvicorn); `import runner` never imports it.

The service is outermost, like the command line: it wires the travel world's fixtures to the
core (`tests/test_import_graph.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI

from ..confirm import SECRET_ENV, ApprovalSecret
from ..contracts import ContractSet
from .app import create_app
from .config import ApiKey, ServiceConfig
from .runs import RunService

__all__ = ["ApiKey", "RunService", "ServiceConfig", "build_app", "build_queued_app", "create_app"]


def build_app(config: ServiceConfig, db: Path, contracts: ContractSet) -> FastAPI:
    """The service's app on the SQLite store `db` (created when missing)."""
    value = config.approval_secret or os.environ.get(SECRET_ENV)
    secret = ApprovalSecret(value) if value else None
    service = RunService(config, db, contracts, secret)
    app = create_app(service)
    app.state.service = service
    return app


def build_queued_app(
    config: ServiceConfig, url: str, contracts: ContractSet, world: Path
) -> FastAPI:
    """The service's app on the PostgreSQL store `url`: runs go to `runner worker`s."""
    from .queued import QueuedRunService  # noqa: PLC0415  # psycopg, procrastinate: optional

    value = config.approval_secret or os.environ.get(SECRET_ENV)
    secret = ApprovalSecret(value) if value else None
    service = QueuedRunService(config, url, contracts, secret, world)
    app = create_app(service)
    app.state.service = service
    return app
