"""The logger a run writes to: silent unless the application configures logging.

The library never prints. When the application has configured structlog (the CLI does, in
`log.py`), runs log through it. Otherwise they log through the stdlib `runner` logger, whose
events go nowhere until the application configures `logging` (and then at the level it sets).
Either way the engine asks once per run whether info events are wanted, so a run nobody listens
to builds no events at all. structlog itself is imported only once someone listens: an
application that configured it has imported it already, and a run nobody hears gets `SILENT`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Final

STDLIB_NAME = "runner"


class _Silent:
    """The logger of a run nobody listens to: every event is dropped unbuilt."""

    def is_enabled_for(self, level: int) -> bool:
        return False

    def bind(self, **context: Any) -> _Silent:
        return self

    def _drop(self, event: str, **fields: Any) -> None:
        return None

    debug = info = warning = error = critical = exception = _drop


SILENT: Final = _Silent()


def run_logger(**context: Any) -> Any:
    """A structlog logger bound to `context`, with `is_enabled_for(level)` (or `SILENT`)."""
    configured = sys.modules.get("structlog")  # not imported: nobody configured it
    if configured is not None and configured.is_configured():
        return configured.get_logger("runner").bind(**context)
    stdlib = logging.getLogger(STDLIB_NAME)
    if not stdlib.hasHandlers():
        return SILENT  # nobody listens
    import structlog  # noqa: PLC0415  # someone listens through stdlib logging: worth the import

    # The level is read once, at the run's start: a run keeps the verbosity it started with.
    level = stdlib.getEffectiveLevel()
    wrapper = structlog.make_filtering_bound_logger(level)
    renderer = structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True)
    return structlog.wrap_logger(stdlib, wrapper_class=wrapper, processors=[renderer]).bind(
        **context
    )
