"""The engine: drives a run through its plan, call and observe phases (admission, the approval
gate, continuation, the run's two ends, effects, the handle and cancel), and the child-run tool
that starts a run of its own in it (`children.py`). It carries verdicts out; it decides nothing.

May import: `base`, `core`, `models`, `tools`, `record`, `store`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._cancel import RunCancelled
    from .engine import Engine

__all__ = ["Engine", "RunCancelled"]


def __getattr__(name: str) -> Any:
    # Imported on first use: `runner.engine.handle` and the like load without the whole engine.
    if name == "Engine":
        from .engine import Engine  # noqa: PLC0415

        return Engine
    if name == "RunCancelled":  # what a cancel through a run's handle raises in its task
        from ._cancel import RunCancelled  # noqa: PLC0415

        return RunCancelled
    raise AttributeError(f"module 'runner.engine' has no attribute {name!r}")
