"""A run's loop: `plan -> call -> observe` until a terminal state, then its summary.

A cancel asked for through the run's handle ends the run `abstain` (`cancelled`) between steps,
or abandons a model request in flight; re-driving a cancelled run ends it where it was cut.
"""

from __future__ import annotations

import asyncio

from ..base.errors import OutsideRecording
from ..core.decide import PlanFacts, decide
from ..core.machine import Trigger, detach
from ..core.observations import CancelRequested
from ..core.states import TERMINAL, State
from ..core.verdicts import CANCELLED, Move
from ..record.spec import RunResult
from ..store.step_commits import StepCommits
from ._acting import call, observe
from ._cancel import take_cancellation
from ._core import Core
from ._planning import plan
from ._run_ends import finish
from ._state import RunState


async def drive(core: Core, commits: StepCommits | None, run: RunState) -> RunResult:
    """Drive `run` to a terminal state and finish it (`commits`: the engine's step commits)."""
    pending = core.runtime.pending
    try:
        while run.moves.lifecycle.current not in TERMINAL:
            if pending is not None:  # what the last phase recorded, before the next acts
                await pending.flush(run.setup.run_id)
            state = run.moves.lifecycle.current
            try:
                if state is State.PLAN:
                    if run.setup.cancel.requested and _live(run):
                        _end_cancelled(core, run)  # the batch is done: end before asking again
                    else:
                        await plan(core, run)
                elif state is State.CALL:
                    await call(core, run)
                else:
                    await observe(core, run)
            except asyncio.CancelledError as exc:
                # Only a model request (in `plan`) is ever abandoned for the handle's cancel.
                if state is not State.PLAN or not take_cancellation(run.setup.cancel, exc):
                    raise  # the loop or caller cancelled: the run stays unfinished, resumable
                _end_cancelled(core, run)
            except OutsideRecording:
                if not _cancelled_next(run):
                    raise
                _end_cancelled(core, run)  # re-driving a cancelled run: its inputs end here
    finally:
        for slot in run.calls.batch.calls:
            if isinstance(slot.sending, asyncio.Future):
                slot.sending.cancel()
            elif slot.sending is not None:
                slot.sending.close()  # type: ignore[attr-defined]  # a never-awaited coroutine
        detach(run.moves.lifecycle)
        if commits is not None:
            commits.release(run.setup.run_id)  # whatever it did is committed, even cut
    result = finish(core.runtime, run)
    if pending is not None:
        await pending.flush(run.setup.run_id)
        pending.forget(run.setup.run_id)
    return result


def _end_cancelled(core: Core, run: RunState) -> None:
    verdict = decide(core.runtime.policy, CancelRequested(), PlanFacts(), run.rng)
    assert isinstance(verdict, Move), verdict
    core.carry(run, verdict)


def _live(run: RunState) -> bool:
    """Whether `run` is past its recorded transitions (a resume re-drives those as they were: a
    cancel asked for meanwhile ends the run only where its record ends)."""
    return len(run.moves.records) >= len(run.setup.known)


def _cancelled_next(run: RunState) -> bool:
    """Whether the stored run being re-driven was cancelled at this point (its next record)."""
    seq = len(run.moves.records)
    if run.moves.lifecycle.current is not State.PLAN or seq >= len(run.setup.known):
        return False
    following = run.setup.known[seq]
    return following.trigger == Trigger.GIVE_UP.value and following.reason == CANCELLED
