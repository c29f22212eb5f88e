"""What the service keeps of the runs it read lately: their transitions, decoded, so a run read
again (a page polling `GET /v1/runs/{id}` while the run goes) reads from the store only what the
run appended since. A run's log only grows, one `seq` after another, so what was read stays true.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..store.base import Store
from ..trace import TransitionRecord

PAGE = 1000
"""Transitions read from the store at a time."""


class RunLogs:
    """The transitions of the last `keep` runs read (least recently read dropped first)."""

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._logs: OrderedDict[str, list[TransitionRecord]] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, store: Store, run_id: str) -> list[TransitionRecord]:
        """Every transition of `run_id`, in `seq` order: the ones kept, then those after them."""
        with self._lock:
            known = self._logs.get(run_id, [])
        last = known[-1].seq if known else 0
        new: list[TransitionRecord] = []
        while True:
            page = store.transitions_after(run_id, last, PAGE)
            new.extend(page)
            if len(page) < PAGE:
                break
            last = page[-1].seq
        records = known + new if new else known  # a new list: a reader's stays as it was
        with self._lock:
            kept = self._logs.get(run_id, [])
            if len(records) >= len(kept):
                self._logs[run_id] = records
            self._logs.move_to_end(run_id)
            while len(self._logs) > self.keep:
                self._logs.popitem(last=False)
        return records
