"""structlog configuration: JSON lines in production, readable console output in a terminal."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(*, json: bool | None = None, level: int = logging.WARNING) -> None:
    """Configure structlog once for the process. `json=None` picks console output on a TTY."""
    if json is None:
        json = not sys.stderr.isatty()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
