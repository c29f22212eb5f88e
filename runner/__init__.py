"""runner: drive a language model's tool-calling loop as an explicit, persisted state machine.

Every name below is imported on first use (PEP 562), so `import runner` loads nothing heavy: a
program that only reads a log does not pay for the engine, and none pays for the command line,
YAML, OpenTelemetry, the provider SDKs or jsonschema until it uses them.
"""

# Aliased: every public name at the top level is an export (tests/test_exports.py).
import importlib as _importlib
import typing as _typing

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
        RunFailure,
        RunnerError,
        StoreError,
    )
    from .core.budget import Bound, Limits
    from .core.machine import Decision, Trigger
    from .core.policy import Backoff, Policy
    from .core.states import TERMINAL, State
    from .engine.engine import Engine
    from .engine.handle import RunHandle
    from .models.base import ModelAdapter, ModelReply, TokenUsage, ToolCall, ToolSpec
    from .models.scripted import ScriptedModel
    from .record.spec import RunResult, RunSpec
    from .record.trace import TransitionRecord, read_log
    from .store import FanoutStore, JsonlLog, MemoryStore, SqliteStore, Store
    from .tools.contracts import CompiledContract, Contract, ContractSet, load_contracts
    from .tools.invocation import Principal, ToolInvocation, ToolRegistry, ToolResponse

_HOMES: _typing.Final[dict[str, str]] = {
    "TERMINAL": ".core.states",
    "Backoff": ".core.policy",
    "Bound": ".core.budget",
    "BudgetExceeded": ".base.errors",
    "Clock": ".base.clock",
    "CompiledContract": ".tools.contracts",
    "ConfigError": ".base.errors",
    "Contract": ".tools.contracts",
    "ContractError": ".base.errors",
    "ContractSet": ".tools.contracts",
    "Decision": ".core.machine",
    "Engine": ".engine.engine",
    "FakeClock": ".base.clock",
    "FanoutStore": ".store",
    "FixtureError": ".base.errors",
    "IllegalTransition": ".base.errors",
    "JsonlLog": ".store",
    "Limits": ".core.budget",
    "LoadError": ".base.errors",
    "LogFormatError": ".base.errors",
    "MemoryStore": ".store",
    "ModelAdapter": ".models.base",
    "ModelReply": ".models.base",
    "Policy": ".core.policy",
    "Principal": ".tools.invocation",
    "RunFailure": ".base.errors",
    "RunHandle": ".engine.handle",
    "RunResult": ".record.spec",
    "RunSpec": ".record.spec",
    "RunnerError": ".base.errors",
    "ScriptedModel": ".models.scripted",
    "SqliteStore": ".store",
    "State": ".core.states",
    "Store": ".store",
    "StoreError": ".base.errors",
    "SystemClock": ".base.clock",
    "TokenUsage": ".models.base",
    "ToolCall": ".models.base",
    "ToolInvocation": ".tools.invocation",
    "ToolRegistry": ".tools.invocation",
    "ToolResponse": ".tools.invocation",
    "ToolSpec": ".models.base",
    "TransitionRecord": ".record.trace",
    "Trigger": ".core.machine",
    "load_contracts": ".tools.contracts",
    "read_log": ".record.trace",
}
"""Where each exported name lives, relative to this package."""

__all__ = [
    "TERMINAL",
    "Backoff",
    "Bound",
    "BudgetExceeded",
    "Clock",
    "CompiledContract",
    "ConfigError",
    "Contract",
    "ContractError",
    "ContractSet",
    "Decision",
    "Engine",
    "FakeClock",
    "FanoutStore",
    "FixtureError",
    "IllegalTransition",
    "JsonlLog",
    "Limits",
    "LoadError",
    "LogFormatError",
    "MemoryStore",
    "ModelAdapter",
    "ModelReply",
    "Policy",
    "Principal",
    "RunFailure",
    "RunHandle",
    "RunResult",
    "RunSpec",
    "RunnerError",
    "ScriptedModel",
    "SqliteStore",
    "State",
    "Store",
    "StoreError",
    "SystemClock",
    "TokenUsage",
    "ToolCall",
    "ToolInvocation",
    "ToolRegistry",
    "ToolResponse",
    "ToolSpec",
    "TransitionRecord",
    "Trigger",
    "load_contracts",
    "read_log",
]


def __getattr__(name: str) -> _typing.Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    value = getattr(_importlib.import_module(home, __name__), name)
    globals()[name] = value  # once imported, found without coming back here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
