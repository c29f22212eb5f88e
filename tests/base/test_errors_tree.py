"""Every exception a user can catch or raise sits under `RunnerError`, drawn once: the tree in
`runner/base/errors.py`'s docstring is the classes' own hierarchy (the docs' exceptions page is
generated from that drawing when the site builds). Cancellation stays outside, an
`asyncio.CancelledError`, so that `except Exception` never swallows it; control-flow exceptions
of the runner's own stay private.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
import re
from types import ModuleType

import runner
import runner.models
import runner.models.base
from runner.base import errors
from runner.base.errors import ModelRejected, ModelUnavailable, RunnerError
from runner.engine._cancel import RunCancelled
from runner.tools._outcomes import ResponseLost, describe_exception

DEMO_WORLD = "runner.travel"
"""The demo domain: what its fake tools raise is a tool's own failure, recorded by its name (a
stored log says `ScriptExhausted`), never something a user of the library catches."""


def _every_module() -> list[ModuleType]:
    found = pkgutil.walk_packages(runner.__path__, "runner.")
    return [importlib.import_module(m.name) for m in found if m.name != "runner.__main__"]


def _drawing(text: str) -> list[str]:
    """The tree's lines, from its `RunnerError` line to the block's end, unindented."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "RunnerError")
    end = next(i for i in range(start, len(lines)) if lines[i].strip() in ("", "```"))
    indent = lines[start].index("RunnerError")
    return [line[indent:] for line in lines[start:end]]


def _edges(drawing: list[str]) -> set[tuple[str, str]]:
    """(parent, child) for every line but the root's, read from where each name starts."""
    root_column = drawing[0].index("RunnerError")
    parents: list[str] = []
    edges = set()
    for line in drawing:
        match = re.search(r"[A-Za-z_]\w*", line)
        assert match is not None, line
        depth = (match.start() - root_column) // 4
        del parents[depth:]
        if parents:
            edges.add((parents[-1], match.group()))
        parents.append(match.group())
    return edges


def _hierarchy(top: type[BaseException]) -> set[tuple[str, str]]:
    edges = set()
    for sub in top.__subclasses__():
        if sub.__module__.startswith("runner."):
            edges.add((top.__name__, sub.__name__))
            edges |= _hierarchy(sub)
    return edges


def test_the_drawn_tree_is_the_classes_tree() -> None:
    _every_module()  # a subclass exists once its module is imported
    assert errors.__doc__ is not None
    assert _edges(_drawing(errors.__doc__)) == _hierarchy(RunnerError)


def test_every_public_exception_is_under_runner_error_or_is_a_cancellation() -> None:
    outside = []
    for module in _every_module():
        if module.__name__.startswith(DEMO_WORLD):
            continue
        private_module = any(part.startswith("_") for part in module.__name__.split("."))
        for name, value in vars(module).items():
            if not (inspect.isclass(value) and issubclass(value, BaseException)):
                continue
            if value.__module__ != module.__name__ or name.startswith("_") or private_module:
                continue
            if not issubclass(value, RunnerError | asyncio.CancelledError):
                outside.append(f"{module.__name__}.{name}")
    assert outside == []


def test_a_cancel_is_never_swallowed_by_except_exception() -> None:
    assert issubclass(RunCancelled, asyncio.CancelledError)
    assert not issubclass(RunCancelled, Exception)
    assert not hasattr(runner, "RunCancelled")


def test_what_an_adapter_raises_is_caught_as_a_runner_error_where_it_always_was() -> None:
    """Adapters raise them (from `runner.models`); the run observes them, never the caller."""
    for cls in (ModelUnavailable, ModelRejected):
        assert issubclass(cls, RunnerError)
        assert getattr(runner.models, cls.__name__) is cls
        assert getattr(runner.models.base, cls.__name__) is cls
    unavailable = ModelUnavailable("busy", status=429, retry_after="2")
    assert (str(unavailable), unavailable.status, unavailable.retry_after) == ("busy", 429, "2")


def test_a_lost_response_is_still_described_as_stored_runs_recorded_it() -> None:
    """The stand-in went private; the name a write's unknown outcome carries did not."""
    assert describe_exception(ResponseLost("stopped")) == "ResponseLost: stopped"


def test_the_cancellation_a_handle_causes_has_a_public_name() -> None:
    """The docs name `RunCancelled`: it was only in the private `runner.engine._cancel`."""
    from runner.engine import RunCancelled as public  # noqa: PLC0415

    assert public is RunCancelled and issubclass(public, asyncio.CancelledError)
