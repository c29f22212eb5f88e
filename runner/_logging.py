"""The logger a run writes to: silent unless the application configures logging.

The library never prints. When the application has configured structlog (the CLI does, in
`log.py`), runs log through it. Otherwise they log through the stdlib `runner` logger, whose
events go nowhere until the application configures `logging` (and then at the level it sets).
Either way the engine asks once per run whether info events are wanted, so a run nobody listens
to builds no events at all.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

STDLIB_NAME = "runner"


def run_logger(**context: Any) -> Any:
    """A structlog logger bound to `context`, with `is_enabled_for(level)`."""
    if structlog.is_configured():
        return structlog.get_logger("runner").bind(**context)
    stdlib = logging.getLogger(STDLIB_NAME)
    # The level is read once, at the run's start: a run keeps the verbosity it started with.
    level = stdlib.getEffectiveLevel()
    if not stdlib.hasHandlers():
        level = logging.CRITICAL  # nobody listens (the library logs nothing that high)
    wrapper = structlog.make_filtering_bound_logger(level)
    renderer = structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True)
    return structlog.wrap_logger(stdlib, wrapper_class=wrapper, processors=[renderer]).bind(
        **context
    )
