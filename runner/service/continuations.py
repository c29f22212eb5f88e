"""Where the continuation of a run waiting for approval stands: what `GET /v1/runs/{id}` says of
it in `continuation`, and when `continuation_error` shows.

A waiting run is continued once every proposal it made is decided (a refusal because others still
wait is no error: it is waiting). From the facts a service process can read (pending decisions,
the continuation's run and its end, whether a continuation is in hand here or in the queue, and
why the last one could not go on) one pure function says which of five states holds now; an
error is shown only in `failed`, so one that a later continuation made stale is never shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ContinuationState = Literal["waiting", "queued", "running", "ended", "failed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuationFacts:
    """What the service read of one waiting run's continuation."""

    pending: int
    """Proposals of the waiting run not decided yet."""
    continuation: str | None
    """The run continuing it, once its header is stored."""
    ended: bool
    """That run has ended."""
    in_hand: bool
    """A continuation is queued or going: on this process's run threads, or in the queue."""
    failure: str | None
    """Why the last continuation could not start or go on (None: none failed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuationView:
    state: ContinuationState
    waiting_for: int
    """Decisions still awaited (0 unless `waiting`)."""
    run_id: str | None
    """The continuation's run, once it is stored."""
    error: str | None
    """Why it could not go on: only in `failed`, the state that holds now."""

    def as_json(self) -> dict[str, Any]:
        return {"state": self.state, "waiting_for": self.waiting_for, "run_id": self.run_id}


def continuation_view(facts: ContinuationFacts) -> ContinuationView:
    """The state that holds now. An ended continuation is the last word (a refused second
    attempt after it changes nothing); decisions still awaited come before anything queued; a
    continuation in hand is `queued` until its run is stored, then `running`; a failure counts
    only while nothing newer is in hand. Decided with none of these: `queued` (a process that
    stopped between a decision and its continuation left it; the next one takes it up)."""
    run_id = facts.continuation
    if run_id is not None and facts.ended:
        return ContinuationView(state="ended", waiting_for=0, run_id=run_id, error=None)
    if facts.pending:
        return ContinuationView(
            state="waiting", waiting_for=facts.pending, run_id=run_id, error=None
        )
    if not facts.in_hand and facts.failure is not None:
        return ContinuationView(state="failed", waiting_for=0, run_id=run_id, error=facts.failure)
    state: ContinuationState = "running" if run_id is not None else "queued"
    return ContinuationView(state=state, waiting_for=0, run_id=run_id, error=None)
