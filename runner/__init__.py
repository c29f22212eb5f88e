"""runner: drive a language model's tool-calling loop as an explicit, persisted state machine."""

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
