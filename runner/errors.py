"""The runner's exception tree.

Expected model and tool failures are observations, not exceptions. Exceptions are for mistakes
made before a run starts (bad contracts, fixtures, configuration) and for bugs or broken
infrastructure during one::

    RunnerError
    ├── LoadError                 bad input found before any run starts
    │   ├── ContractError         a tool contract does not compile or breaks a rule
    │   ├── FixtureError          a scenario file is malformed or fails its schema
    │   ├── ConfigError           settings or environment unusable (policy, budget, checker)
    │   └── LogFormatError        a persisted transition log cannot be read
    └── RunFailure                the run itself cannot go on
        ├── IllegalTransition     the engine asked the machine for a move the table forbids (a bug)
        ├── BudgetExceeded        a bound found exceeded where it must have been enforced
        └── StoreError            the store refused or failed a write
"""

from __future__ import annotations

from pathlib import Path


class RunnerError(Exception):
    """Base of every error the runner raises on purpose."""


class LoadError(RunnerError):
    """Bad input found before a run starts; nothing has been executed."""


class ContractError(LoadError):
    """A tool contract does not compile or breaks a contract rule."""

    def __init__(self, source: str | Path, message: str) -> None:
        self.source = str(source)
        super().__init__(f"contract {self.source}: {message}")


class FixtureError(LoadError):
    """A scenario file is malformed or does not match the fixture schema."""

    def __init__(self, source: str | Path, message: str) -> None:
        self.source = str(source)
        super().__init__(f"fixture {self.source}: {message}")


class ConfigError(LoadError):
    """Settings, policy or environment cannot be used as given."""


class LogFormatError(LoadError):
    """A transition log is truncated, edited or of an unknown version."""

    def __init__(self, source: str | Path, line: int, message: str) -> None:
        self.source = str(source)
        self.line = line
        super().__init__(f"log {self.source}, line {line}: {message}")


class RunFailure(RunnerError):
    """The run cannot continue; raised only for bugs and broken infrastructure."""


class IllegalTransition(RunFailure):
    """The transition table has no edge for this state and trigger."""

    def __init__(self, state: str, trigger: str) -> None:
        self.state = state
        self.trigger = trigger
        super().__init__(f"no transition from state {state!r} on trigger {trigger!r}")


class BudgetExceeded(RunFailure):
    """A bound was exceeded where the engine should already have stopped (a bug)."""

    def __init__(self, bound: str, used: float, limit: float) -> None:
        self.bound = bound
        super().__init__(f"bound {bound} exceeded: used {used}, limit {limit}")


class StoreError(RunFailure):
    """The store failed or refused a write."""
