"""What the one decision (`decide.decide`) returns: verdicts the engine carries out as they are.

A `Move` says which trigger to fire and what its transition records; one that ends the run
carries the run's `Ending`. A `Trip` and a `FinalRequest` say what `plan` does about a spent
bound; `AskAgain`, `FallBack` and `NoReply` what becomes of a model request that failed. The
tool-call verdicts (`Verdict`, `Exit`, `Batch`) sit with their rules in `decide.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .budget import Bound
from .machine import Decision, Trigger
from .observations import ModelGaveNoReply, ModelOutOfBudget

CANCELLED: Final = "cancelled"
"""The reason recorded on the terminal transition of a run cancelled through its handle."""


@dataclass(frozen=True, slots=True)
class Ending:
    """Why the run ended, and the model's final text (if it gave one)."""

    reason: str
    answer: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """Fire `trigger`; its transition records `decision`, `result_class`, `reason` and
    `operation_key`. With an `ending`, the move ends the run (its reason is the ending's)."""

    trigger: Trigger
    decision: Decision | None = None
    result_class: str | None = None
    reason: str | None = None
    operation_key: str | None = None
    ending: Ending | None = None


@dataclass(frozen=True, slots=True)
class Trip:
    """No move now: `bound` is spent, and the next `plan` makes the final tool-free request."""

    bound: Bound


@dataclass(frozen=True, slots=True)
class FinalRequest:
    """Make the one tool-free request `bound` being spent allows, then end the run."""

    bound: Bound


PlanVerdict = Move | Trip | FinalRequest
"""What `plan` does next."""


@dataclass(frozen=True, slots=True)
class AskAgain:
    """Ask the same model again after `wait` seconds (the wait fits before the deadline)."""

    wait: float


@dataclass(frozen=True, slots=True)
class FallBack:
    """Ask the adapter's fallback model now; with none (or once switched already), the
    request comes to `otherwise`."""

    otherwise: ModelOutOfBudget | ModelGaveNoReply


@dataclass(frozen=True, slots=True)
class NoReply:
    """The request ends with no reply: it came to `came_to`."""

    came_to: ModelOutOfBudget | ModelGaveNoReply


RequestVerdict = AskAgain | FallBack | NoReply
"""What becomes of a model request that failed."""
