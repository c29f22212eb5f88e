"""`runner serve`: the HTTP service (needs `pip install 'runner-fsm[service]'`)."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..base.errors import ConfigError
from ._arguments import port_number
from ._common import contracts_for, world_dir


def add_serve_parser(
    commands: argparse._SubParsersAction[Any],
    with_db: Callable[[argparse.ArgumentParser], None],
) -> None:
    serve = commands.add_parser("serve", help="serve the HTTP API and the run inspector page")
    serve.add_argument("--config", type=Path, required=True, help="service config (YAML)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=port_number, default=8000, help="port (8000)")
    with_db(serve)


def serve_command(args: argparse.Namespace) -> int:
    try:
        import uvicorn  # noqa: PLC0415  # the optional extra

        from ..service import ServiceConfig, build_app  # noqa: PLC0415
    except ImportError as exc:
        raise ConfigError(f"runner serve needs: pip install 'runner-fsm[service]' ({exc})") from exc
    config = ServiceConfig.load(args.config)
    check_listening(args.host, args.port)  # before the app takes up any unfinished run
    if args.db.url is not None:  # many service processes and `runner worker`s share it
        from ..service import build_queued_app  # noqa: PLC0415

        app = build_queued_app(
            config, args.db.url, contracts_for(args.contracts), world_dir(args.db)
        )
    else:
        app = build_app(config, args.db.path, contracts_for(args.contracts))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def check_listening(host: str, port: int) -> None:
    """`ConfigError` when `host:port` cannot be listened on (a port in use, a host that is not
    this machine's): one `error:` line, not the server's own log line and exit 3."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
            probe.bind(address)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
