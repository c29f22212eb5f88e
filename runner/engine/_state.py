"""The state of one run, owned by one `Engine` call and dropped when the run ends.

`RunState` is frozen: the run's setup (`RunSetup`, what it was started with) and what is fixed
once at its start (its clock, its random generator, its retriever), and the parts that change.
Each part is written by one module, named in `WRITERS` below (`tests/test_state_owners.py` holds
every assignment and mutating call to it there); every other module only reads it:
- `Moves` (`_core`): the machine, the transition records, the ending.
- `Spending` (`_spending`): the budget used (`Usage`), the meters, the price of the model now
  asked, what child-run calls hold, a spent bound waiting for the final request.
- `Calls` (`_calls`): the batch in flight (each call's `Slot` in it) and the next work on it,
  and what calls have come to across batches (ids, settled calls, corrections, evidence, the
  write keys minted).
- `Planning` (`_planning`): what `plan` keeps between requests (its offer, refused answers).
- the `Transcript`, written through its own methods (`models/transcript.py`).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from enum import Enum
from typing import Any, Final

from ..base.clock import Clock
from ..core.budget import INPUT_PROJECTION, Bound, Usage
from ..core.decide import Batch, Verdict
from ..core.machine import Lifecycle
from ..core.observations import ToolObservation
from ..core.policy import Policy
from ..core.states import OperationStatus
from ..core.verdicts import Ending
from ..models.base import ToolCall, ToolSpec
from ..models.pricing import ModelPrice
from ..models.transcript import Transcript
from ..record.spec import RunSpec
from ..record.trace import TransitionRecord
from ..store.base import Store
from ..store.writebehind import PendingWrites
from ..tools.contracts import CompiledContract, ContractSet
from ..tools.invocation import BudgetLeft, ToolResponse
from ..tools.retrieval import Retriever
from ..tools.toolbox import ToolBox
from ._cancel import Cancellation
from .effects import Effects


@dataclass(frozen=True, slots=True, kw_only=True)
class Runtime:
    """What every run of one engine shares: built once, read by every step."""

    contracts: ContractSet
    toolbox: ToolBox
    store: Store
    clock: Clock
    policy: Policy
    retry_horizon: timedelta
    pending: PendingWrites | None = None
    """Set when the store is awaited: `store` is then this queue (store/writebehind.py)."""
    manifests: dict[tuple[str, ...], int] = field(default_factory=dict)
    """The manifest tokens of each set of offered tools (by name) seen so far: worked out once,
    not per run."""


class WriteProgress(Enum):
    """How far the latest dispatch of a call has got (a lookup matters for writes only)."""

    SENT = "sent"
    """Sent (or answered without dispatch), and not looked up since."""
    LOOKED_UP = "looked_up"
    """Looked up by its operation key since it was last sent (or nothing could look it up)."""


Outcome = tuple[ToolResponse | BaseException, float, float | None]
"""What a dispatch comes to: the outcome, when it came on the run's clock, and when as recorded."""


@dataclass(slots=True, kw_only=True)
class Slot:
    """One proposed call on its way through admission, dispatch and classification."""

    call: ToolCall
    contract: CompiledContract | None = None
    fingerprint: str | None = None
    """The tool and its canonical arguments (`_admission.call_fingerprint`): set when, and only
    when, they have passed validation (so it also says that they have)."""
    observation: ToolObservation | None = None
    """Set at admission when the call is answered without dispatch."""
    sending: Awaitable[Outcome] | None = None
    """The dispatch in flight: a task when the batch has several calls (they run concurrently),
    the bare coroutine when it has one (awaited in place; no task to schedule). It gives the
    outcome, when it came on the run's clock, and when as recorded (`Effects.output_ended`)."""
    sent_at: float = 0.0
    """When its latest dispatch started, on the run's clock."""
    came_at: float | None = None
    """When its last dispatch's outcome came as recorded, in seconds from the run's start
    (None: none dispatched, or not recorded): the wall time a Retry-After date is read at."""
    retries: int = 0
    operation_key: str | None = None
    params_hash: str | None = None
    progress: WriteProgress = WriteProgress.SENT
    """Whether a lookup by key has been made for this write since it was last sent."""
    duplicate_of: Slot | None = None
    """An earlier call of this batch holding the same operation key: this one is never
    dispatched; it is answered as a duplicate of that call's outcome."""
    answered: str | None = None
    """The result class this call was answered with."""
    approval: dict[str, str] | None = None
    """The approval decision this write goes (or does not go) out under, for its record."""
    provenance: dict[str, str] | None = None
    """Where the write's argument values first appeared, when some came from a tool result."""
    proposed_key: str | None = None
    """The operation key of a write recorded as a proposal instead of being claimed."""
    held: BudgetLeft | None = None
    """What this child-run call holds of the run's budget while it is in flight."""
    charged: bool = False
    """Its child's spending has been charged (a later lookup of the same child is not)."""


@dataclass(frozen=True, slots=True)
class AdmitBatch:
    """`call`: a fresh batch; admit every call in call order, then classify the first."""


@dataclass(frozen=True, slots=True)
class NextCall:
    """`call`: classify the next call of the batch (admitted with it)."""


@dataclass(frozen=True, slots=True)
class Retry:
    """`call`: send `slot`'s call again (the verdict's wait has been slept)."""

    slot: Slot


@dataclass(frozen=True, slots=True)
class LookUp:
    """`call`: look `slot`'s write up by its operation key."""

    slot: Slot


@dataclass(frozen=True, slots=True, kw_only=True)
class Decided:
    """`observe`: carry out the verdict on `slot`'s outcome."""

    slot: Slot
    verdict: Verdict
    latency_ms: float | None


@dataclass(slots=True, kw_only=True)
class InFlight:
    """The batch of calls the model proposed last, owned by the run while it is worked off."""

    calls: deque[Slot] = field(default_factory=deque)
    """Its outstanding calls in call order; the front one is being called or observed."""
    writes: dict[str, Slot] = field(default_factory=dict)
    """Operation key -> the first call of the batch that claimed it."""
    standing: Batch = field(default_factory=Batch)
    """Its strongest decision so far (frozen: replaced, never changed, as its calls are
    decided)."""


Work = AdmitBatch | NextCall | Retry | LookUp | Decided
"""What the run is doing next, as a value: set by each phase for the next one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSetup:
    """What one run was started with: built once, read by every step, never changed."""

    run_id: str
    spec: RunSpec
    seed: int
    """The spec's seed, or the one drawn for the run; recorded in its header."""
    offered: tuple[ToolSpec, ...]
    offered_names: frozenset[str]
    log: Any
    logging: bool
    """Whether `log` emits info events (transitions, tool spans) at all."""
    effects: Effects
    started_wall: datetime
    known: list[TransitionRecord]
    """Transitions already stored (resume): re-driven moves must match them, not be re-stored."""
    cancel: Cancellation = field(default_factory=Cancellation)
    """The cancel request of the run's handle (never made for a run without one)."""
    key_scope: str = ""
    """The run whose id operation keys are minted under: this run's, or for the continuation of
    an approved run, the original's (so the approved write keeps its key)."""
    grants: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Operation key -> the approval decision this run continues with (`RunSpec.continuation`)."""
    input_projection: int = INPUT_PROJECTION
    """How the run projects its requests' input (`budget.INPUT_PROJECTION`)."""
    render_limit: int = 4000
    """The most characters of one tool result the model is shown (the spec's, else the
    engine's; recorded in the header)."""
    manifest_tokens: int = 0
    """The whole offered catalogue's manifest, in tokens (`retrieval.manifest_tokens`): what a
    request that offers it all sends beside the transcript."""


@dataclass(slots=True, kw_only=True)
class Meters:
    """What the run has spent, counted (by `_spending`) where it is spent; read into its summary
    and spans."""

    model_requests: int = 0
    dispatches: int = 0
    model_tokens: tuple[int, int] = (0, 0)
    """Input and output tokens of the latest model reply (the one that proposed the calls)."""
    model_cost: Decimal = Decimal(0)
    """What the latest model reply cost at its model's price (priced runs)."""
    unpriced_replies: int = 0
    """Replies from a model with no price (an unpriced run's, or a fallback's no price was
    found for): the run's total cost is then not known."""
    waits: list[float] = field(default_factory=list)
    prefill: list[int] = field(default_factory=list)
    """Input tokens of each model request, in order."""
    prefill_untruncated: list[int] = field(default_factory=list)
    """What each request's input would have been had no tool result been truncated."""
    asked_chars: int = 0
    """The transcript's length when the latest answered request was sent: what it grew by
    since is what the next request adds to that one's billed input."""
    asked_manifest: int = 0
    """The manifest tokens of the tools that request sent (`Planning.offering` then): the part
    of its bill the next request's own tools replace."""


@dataclass(slots=True, kw_only=True)
class Moves:
    """How the run has moved: written by `_core.Core` alone (`move`, `carry`)."""

    lifecycle: Lifecycle
    """The run's model on the shared machine (`transitions` keeps its state; `fire` moves it)."""
    records: list[TransitionRecord] = field(default_factory=list)
    """Every transition the run made, in order (`Core.move` appends each)."""
    ending: Ending | None = None
    """Set once, from the verdict of the move into a terminal state (`Core.carry`)."""


@dataclass(slots=True, kw_only=True)
class Spending:
    """What the run has spent and may still spend: written by `_spending`'s functions alone."""

    usage: Usage
    """What the budget's bounds are checked against."""
    meters: Meters = field(default_factory=Meters)
    price: ModelPrice | None = None
    """The price of the model now asked: the spec's, then, once the run has switched to the
    adapter's fallback (`fallen_back`), the fallback's (`spec.fallback_price`)."""
    fallen_back: bool = False
    """Whether the run's requests now go to the adapter's fallback model: switched once, for
    the rest of the run, where `_planning._ask` does (a re-drive switches at the same request)."""
    held_by_children: BudgetLeft | None = None
    """What child-run calls in flight hold of the budget (carved for them, not yet charged)."""
    tripped: Bound | None = None
    """A spent bound the next `plan` answers with its final request (set from a verdict)."""


@dataclass(slots=True, kw_only=True)
class Calls:
    """The batch in flight and what the run's calls came to across batches: written by
    `_calls`'s functions alone."""

    batch: InFlight = field(default_factory=InFlight)
    """The batch of calls in flight (replaced whole when the model proposes the next)."""
    work: Work = field(default_factory=NextCall)
    """What the next `call` or `observe` does (each phase leaves it for the next)."""
    ids: set[str] = field(default_factory=set)
    """Every call id given out in this run (ids are made unique at `plan`)."""
    settled: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Fingerprint of a call that settled -> (its call id, its result class): not sent again."""
    invalid_streak: dict[str, int] = field(default_factory=dict)
    """Tool -> invalid arguments in a row (the corrections the model has had)."""
    evidence: list[dict[str, Any]] = field(default_factory=list)
    """Every result the model was shown (ok or empty), for the run's result."""
    operations: dict[str, tuple[str, OperationStatus]] = field(default_factory=dict)
    """Every key this run minted: key -> (tool, status)."""


@dataclass(slots=True, kw_only=True)
class Planning:
    """What `plan` keeps between model requests: written by `_planning` alone."""

    premature_answers: int = 0
    """Final answers the completion gate has refused (`_planning._gate`: once, then abstain)."""
    selection: tuple[str, ...] | None = None
    """The tools the latest model request offered, when retrieval chose them (only these may
    be called until the next request)."""
    offering: int = 0
    """The manifest tokens of the tools the next model request sends, set as they are chosen
    (`_planning._offer`): what its projected input counts beside the transcript."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RunState:
    """One run: what it is fixed with (frozen here) and its parts, each written by one module."""

    setup: RunSetup
    clock: Clock
    """Where the run reads monotonic time and waits: the engine's, or for a re-driven run the
    engine's seen through `clock.CatchUp` (its recorded waits skipped)."""
    rng: random.Random
    """The run's own jitter source, seeded with `setup.seed` (never shared between runs)."""
    retriever: Retriever | None = None
    """Scores the catalogue when `spec.tool_retrieval` narrows it (None: offered whole)."""
    moves: Moves
    spending: Spending
    calls: Calls = field(default_factory=Calls)
    planning: Planning = field(default_factory=Planning)
    transcript: Transcript = field(default_factory=Transcript)


_ENGINE: Final = "runner.engine."
WRITERS: Final[Mapping[type, str]] = {
    Moves: _ENGINE + "_core",
    Lifecycle: _ENGINE + "_core",  # moved by `machine.fire`, which `Core.move` alone calls
    Spending: _ENGINE + "_spending",
    Usage: _ENGINE + "_spending",
    Meters: _ENGINE + "_spending",
    Calls: _ENGINE + "_calls",
    InFlight: _ENGINE + "_calls",
    Slot: _ENGINE + "_calls",
    Planning: _ENGINE + "_planning",
    Transcript: Transcript.__module__,
}
"""Each mutable part of a run (and each mutable value inside one) -> the one module that
assigns to its fields or changes them in place. `RunState` and `RunSetup` are frozen."""
