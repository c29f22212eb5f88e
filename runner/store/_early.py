"""Inputs stored before their transition (`RunLog.append_inputs`, optional; see `base.py`).

A wrapper (step commits, fan-out, write-behind, the sync/async bridges) offers `append_inputs`
whatever it wraps: a log that has it is given the inputs at once, and one that has not (a user's
own `RunLog`) gets them with the run's next `append`, ahead of that transition's own inputs, as
before the method existed.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..record.recording import Recorded


class HeldInputs:
    """Per run, the inputs a log could not take alone, until its next append."""

    __slots__ = ("runs",)

    def __init__(self) -> None:
        self.runs: dict[str, list[Recorded]] = {}

    def hold(self, run_id: str, inputs: Sequence[Recorded]) -> None:
        self.runs.setdefault(run_id, []).extend(inputs)

    def ahead(self, run_id: str, inputs: Sequence[Recorded]) -> Sequence[Recorded]:
        """`inputs`, after what `run_id` holds (which is then no longer held)."""
        held = self.runs.pop(run_id, None)
        return inputs if held is None else [*held, *inputs]


def pass_on(log: object, held: HeldInputs, run_id: str, inputs: Sequence[Recorded]) -> None:
    """Give `inputs` to `log` now if it takes inputs alone, else hold them for its next append."""
    take = getattr(log, "append_inputs", None)
    if take is None:
        held.hold(run_id, inputs)
    else:
        take(run_id, inputs)
