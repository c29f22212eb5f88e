"""The runner's exception tree.

Expected model and tool failures are observations, not exceptions. Exceptions are for mistakes
made before a run starts (bad contracts, fixtures, configuration), for a model adapter to say how
a request failed (the run observes it, it never escapes a run), and for bugs or broken
infrastructure during one. The tree (the docs' exceptions page is generated from it, and
`tests/base/test_errors_tree.py` holds it to the classes)::

    RunnerError
    ├── LoadError                 bad input found before any run starts
    │   ├── ContractError         a tool contract does not compile or breaks a rule
    │   ├── FixtureError          a scenario file is malformed or fails its schema
    │   ├── ConfigError           settings or environment unusable (policy, budget, checker)
    │   │   └── NotDrivableHere   this worker lacks what a queued run needs (another may not)
    │   ├── LogFormatError        a persisted transition log cannot be read
    │   └── ResumeRefused         a stored run cannot go on as it began (its model or world)
    │       └── RunDriven         another driver holds the run (named); nothing was stored or sent
    ├── ModelFailure              a model adapter's failed request (observed: never escapes a run)
    │   ├── ModelUnavailable      the provider cannot answer now (429, 5xx...): may be retried
    │   └── ModelRejected         the provider refused the request (400, 401...): never retried
    ├── ApiError                  the service refuses an HTTP request (its status and code)
    └── RunFailure                the run itself cannot go on
        ├── IllegalTransition     the engine asked the machine for a move the table forbids (a bug)
        ├── BudgetExceeded        a bound found exceeded where it must have been enforced
        ├── OutsideRecording      a replay needed an input the recording does not have
        ├── ReplayDivergence      a re-driven run made a transition other than the recorded one
        ├── StoreError            the store refused or failed a read or write
        │   ├── StoreLocked       another process holds the store's write lock
        │   ├── StoreCorrupt      the file is not a store, or a newer schema than this runner knows
        │   ├── StoreConflict     an operation key presented with another parameter hash
        │   └── LeaseLost         another worker took the run over; this one must stop writing
        └── ApprovalRefused       a confirm token or decision cannot be used (nothing dispatched)
            ├── TokenForged       the signature does not verify under the runtime's secret
            ├── TokenExpired      past its expiry
            ├── TokenReused       already used by another run
            └── TokenMismatch     bound to other parameters, tenant, run, operation or policy

Cancellation is not in it: a run cancelled through its handle is stopped by `RunCancelled`, an
`asyncio.CancelledError` (so a `BaseException`), which `except Exception` never swallows.
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


class NotDrivableHere(ConfigError):
    """A queued run this worker cannot drive: it lacks what the run needs (a live run's model
    config, key or SDK; a continuation's approval secret), which another worker may have."""


class LogFormatError(LoadError):
    """A transition log is truncated, edited or of an unknown version."""

    def __init__(self, source: str | Path, line: int, message: str) -> None:
        self.source = str(source)
        self.line = line
        super().__init__(f"log {self.source}, line {line}: {message}")


class ResumeRefused(LoadError):
    """A stored run cannot be continued as it began (its model, its world, its limits);
    nothing ran."""

    def __init__(self, run_id: str, message: str) -> None:
        self.run_id = run_id
        super().__init__(f"cannot resume run {run_id}: {message}")


class RunDriven(ResumeRefused):
    """Another driver (a process, or a task of this one) holds the run: refused before
    anything was stored or sent. `holder`: the lease's owner (host, pid, ...)."""

    def __init__(self, run_id: str, holder: str, message: str) -> None:
        self.holder = holder
        self.run_id = run_id
        # Not "cannot resume": a new run, a continuation or a worker's drive is refused alike.
        LoadError.__init__(self, f"cannot drive run {run_id}: {message}")


class ModelFailure(RunnerError):
    """What a model adapter raises for a request that failed. The engine observes it (the
    policy retries, falls back or ends the run); it never escapes a run. Anything else an
    adapter raises ends the run `abstain` (`model_error: <Type>`)."""


class ModelUnavailable(ModelFailure):  # named for what happened, like the observations
    """The provider could not answer now (429, 5xx, a timeout, a dropped connection).

    The runner's policy decides whether and when to ask again; adapters never retry.
    """

    def __init__(self, message: str, *, status: int | None = None, retry_after: str | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class ModelRejected(ModelFailure):
    """The provider refused the request itself (400, 401, 403, 404, 422): asking again is futile."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


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


class OutsideRecording(RunFailure):
    """A replay reached a model request or tool call the recording has no answer for."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"outside the recording: {what}")


class ReplayDivergence(RunFailure):
    """Re-driving a recorded run produced another transition than the one stored."""

    def __init__(self, where: str, expected: str, got: str) -> None:
        self.where = where
        self.expected = expected
        self.got = got
        super().__init__(f"divergence at {where}: expected {expected}, got {got}")


class StoreError(RunFailure):
    """The store failed or refused a read or write; nothing was half-written."""


class StoreLocked(StoreError):
    """Another process holds the store's lock past the busy timeout."""


class StoreCorrupt(StoreError):
    """The file is not a runner store, is damaged, or has a newer schema."""


class StoreConflict(StoreError):
    """An operation key was presented with a parameter hash other than the one it is bound to."""

    def __init__(self, key: str, bound_hash: str, offered_hash: str) -> None:
        self.key = key
        super().__init__(
            f"idempotency_mismatch: key {key} is bound to parameters {bound_hash[:12]}, "
            f"not {offered_hash[:12]}"
        )


class LeaseLost(StoreError):
    """This worker no longer owns the run: its lease was taken over after it expired, so its
    writes are refused (fenced) and it must stop driving the run."""


class ApprovalRefused(RunFailure):
    """A confirm token or approval decision cannot be used; nothing was dispatched.

    `problem` names which check failed: `forged`, `expired`, `reused`, `other_parameters`,
    `other_tenant`, `other_run`, `other_operation`, `other_policy`, `not_pending`, `no_proposal`.
    """

    def __init__(self, problem: str, message: str, *, continued_as: str | None = None) -> None:
        self.problem = problem
        self.continued_as = continued_as
        """For `continued`: the continuation's run id."""
        super().__init__(f"approval refused ({problem}): {message}")


class TokenForged(ApprovalRefused):
    """The token's signature does not verify under the runtime's secret (or it is not a token)."""


class TokenExpired(ApprovalRefused):
    """The token's expiry has passed."""


class TokenReused(ApprovalRefused):
    """The token was already used by another run."""


class TokenMismatch(ApprovalRefused):
    """The token is genuine but bound to another payload, tenant, run, operation or policy."""
