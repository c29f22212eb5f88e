"""`--app module:function`: the commands that drive a run an embedded application started.

`runner resume RUN_ID --app myservice.app:build` reads the run's header from `--db`, calls the
factory with it (`runner.engine.app`), and resumes the run with the engine and model it
returns, through `Engine.resume` and so through every check that a resume goes on as the run
began. The factory's engine must keep its runs in the store `--db` names.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from ..base.errors import LoadError
from ..engine.app import App, build_app, load_app
from ..record.spec import spec_from_header
from ..record.trace import RunHeader
from ..store.base import Store


def add_app_arguments(sub: argparse.ArgumentParser, purpose: str) -> None:
    sub.add_argument(
        "--app",
        default=None,
        metavar="MODULE:FUNCTION",
        help=f"{purpose}: your application's factory, called with the run's header",
    )
    sub.add_argument(
        "--app-dir",
        type=Path,
        default=None,
        help="with --app: the folder to import MODULE from (default: the working directory)",
    )


def app_for(args: argparse.Namespace, header: RunHeader | None) -> App:
    """What the factory `--app` names returns for `header` (None: a new run)."""
    factory = load_app(args.app, app_dir=args.app_dir)
    return build_app(factory, header, target=f"--app {args.app}")


def resume_with_app(args: argparse.Namespace, store: Store) -> str:
    """Resume the stored run `args.run_id` with the application's engine and model; the run's
    terminal state and reason, once it ended."""
    header = store.header(args.run_id)
    if header is None:
        raise LoadError(f"no run {args.run_id} in {args.db}")
    app = app_for(args, header)
    spec = app.spec if app.spec is not None else spec_from_header(header)
    with asyncio.Runner(loop_factory=app.engine.clock.loop_factory) as runner:
        result = runner.run(app.engine.resume(args.run_id, spec, app.model))
    return f"{result.terminal} ({result.reason})"
