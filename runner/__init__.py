"""runner: drive a language model's tool-calling loop as an explicit, persisted state machine.

What the docs teach is importable from here: the engine and a run's spec and result, the ways
of handing an engine its tools (`ToolBox`: `FunctionTools`, `DeclaredTools`, `FirstOf`), contracts,
the model types and the scripted and function models, stores, clocks, the transition log, reading
the store (`replay_run`, `list_runs`, `run_status`) and the common errors. The rest lives in its
layer's package (`runner.core`, `runner.tools`, `runner.models`, ...).

Every name below is imported on first use (PEP 562), so `import runner` loads nothing heavy: a
program that only reads a log does not pay for the engine, and none pays for the command line,
YAML, OpenTelemetry, the provider SDKs or jsonschema until it uses them.
"""

# Aliased: every public name at the top level is an export (tests/test_exports.py).
import importlib as _importlib
import typing as _typing
import warnings as _warnings

from ._moved import install as _install_moved

_install_moved()  # the module paths of the flat layout still import, with a warning

if _typing.TYPE_CHECKING:
    from .base.clock import Clock, FakeClock, SystemClock
    from .base.errors import (
        BudgetExceeded,
        ConfigError,
        ContractError,
        FixtureError,
        IllegalTransition,
        LoadError,
        LogFormatError,
        ModelRejected,
        ModelUnavailable,
        RunFailure,
        RunnerError,
        StoreError,
    )
    from .core.budget import Limits
    from .core.policy import Backoff, Policy
    from .core.states import State
    from .engine.app import App
    from .engine.engine import Engine
    from .engine.handle import RunHandle
    from .models.base import ModelAdapter, ModelReply, TokenUsage, ToolCall, ToolSpec
    from .models.scripted import ScriptedModel
    from .models.transcript import Transcript
    from .proof.api import RunStatus, list_runs, replay_run, run_status
    from .record.spec import RunResult, RunSpec, spec_from_header
    from .record.trace import TransitionRecord, read_log
    from .store import FanoutStore, JsonlLog, MemoryStore, SqliteStore, Store
    from .testing import FunctionModel
    from .tools.contracts import CompiledContract, ContractSet, load_contracts
    from .tools.declare import DeclaredTools
    from .tools.invocation import Principal, ToolInvocation, ToolResponse
    from .tools.toolbox import FirstOf, FunctionTools, ToolBox

_HOMES: _typing.Final[dict[str, str]] = {
    "App": ".engine.app",
    "Backoff": ".core.policy",
    "BudgetExceeded": ".base.errors",
    "Clock": ".base.clock",
    "CompiledContract": ".tools.contracts",
    "ConfigError": ".base.errors",
    "ContractError": ".base.errors",
    "ContractSet": ".tools.contracts",
    "DeclaredTools": ".tools.declare",
    "Engine": ".engine.engine",
    "FakeClock": ".base.clock",
    "FanoutStore": ".store",
    "FirstOf": ".tools.toolbox",
    "FixtureError": ".base.errors",
    "FunctionModel": ".testing",
    "FunctionTools": ".tools.toolbox",
    "IllegalTransition": ".base.errors",
    "JsonlLog": ".store",
    "Limits": ".core.budget",
    "LoadError": ".base.errors",
    "LogFormatError": ".base.errors",
    "MemoryStore": ".store",
    "ModelAdapter": ".models.base",
    "ModelRejected": ".base.errors",
    "ModelReply": ".models.base",
    "ModelUnavailable": ".base.errors",
    "Policy": ".core.policy",
    "Principal": ".tools.invocation",
    "RunFailure": ".base.errors",
    "RunHandle": ".engine.handle",
    "RunResult": ".record.spec",
    "RunSpec": ".record.spec",
    "RunStatus": ".proof.api",
    "RunnerError": ".base.errors",
    "ScriptedModel": ".models.scripted",
    "SqliteStore": ".store",
    "State": ".core.states",
    "Store": ".store",
    "StoreError": ".base.errors",
    "SystemClock": ".base.clock",
    "TokenUsage": ".models.base",
    "ToolBox": ".tools.toolbox",
    "ToolCall": ".models.base",
    "ToolInvocation": ".tools.invocation",
    "ToolResponse": ".tools.invocation",
    "ToolSpec": ".models.base",
    "Transcript": ".models.transcript",
    "TransitionRecord": ".record.trace",
    "list_runs": ".proof.api",
    "load_contracts": ".tools.contracts",
    "read_log": ".record.trace",
    "replay_run": ".proof.api",
    "run_status": ".proof.api",
    "spec_from_header": ".record.spec",
}
"""Where each exported name lives, relative to this package."""

_DROPPED: _typing.Final[dict[str, tuple[str, str]]] = {
    "TERMINAL": (".core.states", "TERMINAL"),
    "Bound": (".core.budget", "Bound"),
    "Contract": (".tools.contracts", "Contract"),
    "Decision": (".core.machine", "Decision"),
    "ToolRegistry": (".tools.toolbox", "FunctionTools"),
    "Trigger": (".core.machine", "Trigger"),
}
"""Names no longer exported here (a rule's own types, or renamed): each still imports for one
release, with a warning naming where it lives now."""

__all__ = [
    "App",
    "Backoff",
    "BudgetExceeded",
    "Clock",
    "CompiledContract",
    "ConfigError",
    "ContractError",
    "ContractSet",
    "DeclaredTools",
    "Engine",
    "FakeClock",
    "FanoutStore",
    "FirstOf",
    "FixtureError",
    "FunctionModel",
    "FunctionTools",
    "IllegalTransition",
    "JsonlLog",
    "Limits",
    "LoadError",
    "LogFormatError",
    "MemoryStore",
    "ModelAdapter",
    "ModelRejected",
    "ModelReply",
    "ModelUnavailable",
    "Policy",
    "Principal",
    "RunFailure",
    "RunHandle",
    "RunResult",
    "RunSpec",
    "RunStatus",
    "RunnerError",
    "ScriptedModel",
    "SqliteStore",
    "State",
    "Store",
    "StoreError",
    "SystemClock",
    "TokenUsage",
    "ToolBox",
    "ToolCall",
    "ToolInvocation",
    "ToolResponse",
    "ToolSpec",
    "Transcript",
    "TransitionRecord",
    "list_runs",
    "load_contracts",
    "read_log",
    "replay_run",
    "run_status",
    "spec_from_header",
]


def __getattr__(name: str) -> _typing.Any:
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(_importlib.import_module(home, __name__), name)
        globals()[name] = value  # once imported, found without coming back here
        return value
    dropped = _DROPPED.get(name)
    if dropped is None:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    module, new = dropped
    where = f"runner{module}.{new}"
    _warnings.warn(
        f"runner.{name} is no longer exported from runner: use {where}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(_importlib.import_module(module, __name__), new)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
