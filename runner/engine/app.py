"""An application factory: how a command rebuilds an embedder's engine and model for a run.

A command that must drive a run it did not start (`runner resume --app`, `runner worker --app`,
`runner submit --app`) is told where the application's factory is, as `module:function` (the
convention uvicorn and others use). The function is called with the stored run's header, or with
None when the command starts a new run, and returns an `App`: the engine, the model and, for a
new run, the spec. A resume still goes through `Engine.resume`, so every check that a resume
uses the run's own tools, model and limits applies to what the factory returns.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, TypeAlias

from ..base.errors import ConfigError
from ..models.base import ModelAdapter
from ..record.spec import RunSpec
from ..record.trace import RunHeader
from .engine import Engine


class App(NamedTuple):
    """What an application factory returns (a plain `(engine, model[, spec])` tuple is one)."""

    engine: Engine
    model: ModelAdapter
    spec: RunSpec | None = None
    """The spec of a new run; for a resume, the run's own (its credentials, say), or None to
    resume with the spec its header holds (`spec_from_header`)."""


AppFactory: TypeAlias = Callable[[RunHeader | None], App | tuple[object, ...]]
"""`factory(header)`: the stored run's header for a resume, None for a new run."""


def load_app(target: str, *, app_dir: Path | None = None) -> AppFactory:
    """The factory `module:function` names (`function` may be dotted: `module:obj.method`),
    imported with `app_dir` (default: the working directory) first on the import path."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"--app {target!r}: expected module:function, e.g. myservice.app:build")
    folder = str((app_dir or Path.cwd()).resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        found: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--app {target!r}: cannot import {module_name}: {exc}") from exc
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ConfigError(f"--app {target!r}: {module_name} has no {attribute}")
        found = getattr(found, part)
    if not callable(found):
        raise ConfigError(f"--app {target!r}: {attribute} is not callable")
    factory: AppFactory = found
    return factory


def build_app(factory: AppFactory, header: RunHeader | None, *, target: str = "--app") -> App:
    """Call the factory and check what it returned: an engine, a model, and a spec when `header`
    is None (a new run needs one)."""
    made = factory(header)
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise ConfigError(
            f"{target} returned {type(made).__name__}; expected App(engine, model[, spec])"
        )
    engine, model, *rest = made
    spec = rest[0] if rest else None
    if not isinstance(engine, Engine):
        raise ConfigError(f"{target} returned {type(engine).__name__} as its engine, not an Engine")
    if not callable(getattr(model, "generate", None)):
        raise ConfigError(
            f"{target} returned {type(model).__name__} as its model: it has no generate()"
        )
    if spec is not None and not isinstance(spec, RunSpec):
        raise ConfigError(f"{target} returned {type(spec).__name__} as its spec, not a RunSpec")
    if header is None and spec is None:
        raise ConfigError(f"{target} returned no spec for a new run: App(engine, model, spec)")
    return App(engine, model, spec)  # type: ignore[arg-type]  # checked: has generate()
