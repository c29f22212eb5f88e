"""runner: drive a language model's tool-calling loop as an explicit, persisted state machine.

Every name below is imported on first use (PEP 562), so `import runner` loads nothing heavy: a
program that only reads a log does not pay for the engine, and none pays for the command line,
YAML, OpenTelemetry, the provider SDKs or jsonschema until it uses them.
"""

# Aliased: every public name at the top level is an export (tests/test_exports.py).
import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from .budget import Bound, Limits
    from .clock import Clock, FakeClock, SystemClock
    from .contracts import CompiledContract, Contract, ContractSet, load_contracts
    from .engine import Engine
    from .errors import (
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
    from .handle import RunHandle
    from .machine import Decision, Trigger
    from .models.base import ModelAdapter, ModelReply, TokenUsage, ToolCall, ToolSpec
    from .models.scripted import ScriptedModel
    from .policy import Backoff, Policy
    from .spec import RunResult, RunSpec
    from .states import TERMINAL, State
    from .store import FanoutStore, JsonlLog, MemoryStore, SqliteStore, Store
    from .tools import Principal, ToolInvocation, ToolRegistry, ToolResponse
    from .trace import TransitionRecord, read_log

_HOMES: _typing.Final[dict[str, str]] = {
    "TERMINAL": ".states",
    "Backoff": ".policy",
    "Bound": ".budget",
    "BudgetExceeded": ".errors",
    "Clock": ".clock",
    "CompiledContract": ".contracts",
    "ConfigError": ".errors",
    "Contract": ".contracts",
    "ContractError": ".errors",
    "ContractSet": ".contracts",
    "Decision": ".machine",
    "Engine": ".engine",
    "FakeClock": ".clock",
    "FanoutStore": ".store",
    "FixtureError": ".errors",
    "IllegalTransition": ".errors",
    "JsonlLog": ".store",
    "Limits": ".budget",
    "LoadError": ".errors",
    "LogFormatError": ".errors",
    "MemoryStore": ".store",
    "ModelAdapter": ".models.base",
    "ModelReply": ".models.base",
    "Policy": ".policy",
    "Principal": ".tools",
    "RunFailure": ".errors",
    "RunHandle": ".handle",
    "RunResult": ".spec",
    "RunSpec": ".spec",
    "RunnerError": ".errors",
    "ScriptedModel": ".models.scripted",
    "SqliteStore": ".store",
    "State": ".states",
    "Store": ".store",
    "StoreError": ".errors",
    "SystemClock": ".clock",
    "TokenUsage": ".models.base",
    "ToolCall": ".models.base",
    "ToolInvocation": ".tools",
    "ToolRegistry": ".tools",
    "ToolResponse": ".tools",
    "ToolSpec": ".models.base",
    "TransitionRecord": ".trace",
    "Trigger": ".machine",
    "load_contracts": ".contracts",
    "read_log": ".trace",
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
