"""Module paths that moved when the runner was laid out in layer packages: importing an old path
still works for one release, with a `DeprecationWarning` naming the new one (the docs' architecture
page). No file stands at an old path: the finder below maps each to its module."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Final, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

MOVED: Final[dict[str, str]] = {
    "runner.errors": "runner.base.errors",
    "runner.clock": "runner.base.clock",
    "runner.log": "runner.base.log",
    "runner.tracing": "runner.base.tracing",
    "runner.states": "runner.core.states",
    "runner.machine": "runner.core.machine",
    "runner.observations": "runner.core.observations",
    "runner.classifier": "runner.tools.classifier",
    "runner.core.classifier": "runner.tools.classifier",
    "runner.decide": "runner.core.decide",
    "runner.policy": "runner.core.policy",
    "runner.budget": "runner.core.budget",
    "runner.evidence": "runner.core.evidence",
    "runner.result_classes": "runner.core.result_classes",
    "runner.pricing": "runner.models.pricing",
    "runner.confirm": "runner.core.confirm",
    "runner.sim": "runner.core.sim",
    "runner.sim.naive": "runner.core.sim.naive",
    "runner.contracts": "runner.tools.contracts",
    "runner.declare": "runner.tools.declare",
    "runner.retrieval": "runner.tools.retrieval",
    "runner.children": "runner.engine.children",
    "runner.mcp": "runner.tools.mcp",
    "runner.mcp.config": "runner.tools.mcp.config",
    "runner.mcp.pinning": "runner.tools.mcp.pinning",
    "runner.mcp.tools": "runner.tools.mcp.tools",
    "runner.transcript": "runner.models.transcript",
    "runner.trace": "runner.record.trace",
    "runner.recording": "runner.record.recording",
    "runner.operations": "runner.record.operations",
    "runner.spec": "runner.record.spec",
    "runner.redaction": "runner.record.redaction",
    "runner.handle": "runner.engine.handle",
    "runner.effects": "runner.engine.effects",
    "runner.approvals": "runner.engine.approvals",
    "runner.replay": "runner.proof.replay",
    "runner.grading": "runner.proof.grading",
    "runner.api": "runner.proof.api",
    "runner.report": "runner.proof.report",
    "runner.cli.report": "runner.proof.report",
    "runner.travel.fixtures": "runner.harness.fixtures",
}
"""Old public module path -> where it lives now (private `_` modules moved without an alias)."""


class _Alias:
    """The loader of an old path: the module at its new one (duck-typed, as importlib allows:
    `importlib.abc` would cost `import runner` a few milliseconds)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new}: import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        # The module itself: importlib sets only what it lacks, so its name stays its own.
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was imported under its new name."""


class _MovedFinder:
    """Finds the old paths only; every other name is left to the finders after it."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, cast("Loader", _Alias(new)))


def install() -> None:
    """Put the finder first on `sys.meta_path` (once): ahead of the path finder, which would
    take a folder left at an old path (a stale `__pycache__`) for an empty namespace package."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
