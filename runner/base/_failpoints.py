"""Crash injection for the crash-and-resume sweep: SIGKILL this process after the N-th commit.

Set `RUNNER_KILL_AFTER_COMMITS=N` in a runner subprocess's environment; every durable commit (the
run store's and the simulated supplier's) counts. Unset, `committed()` costs one comparison.
"""

from __future__ import annotations

import os
import signal

_LIMIT = int(os.environ.get("RUNNER_KILL_AFTER_COMMITS", "0") or 0)
_count = 0


def committed() -> None:
    """Count one durable commit; die at the configured one."""
    global _count  # noqa: PLW0603  # a process-wide counter is the point
    if not _LIMIT:
        return
    _count += 1
    if _count >= _LIMIT:
        os.kill(os.getpid(), signal.SIGKILL)
