"""What the service keeps of the runs it read lately: their transitions, decoded, so a run read
again (a page polling `GET /v1/runs/{id}` while the run goes) reads from the store only what the
run appended since. A run's log only grows, one `seq` after another, so what was read stays true.
An ended run's output limits (read from its turns) are kept too: they can no longer change.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..proof.report import RequestsSent, requests_sent
from ..record.trace import TransitionRecord
from ..store.base import Store

PAGE = 1000
"""Transitions read from the store at a time."""


class RunLogs:
    """The transitions of the last `keep` runs read (least recently read dropped first)."""

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._logs: OrderedDict[str, list[TransitionRecord]] = OrderedDict()
        self._sent: OrderedDict[str, RequestsSent] = OrderedDict()
        self._lock = threading.Lock()

    def requests_sent(self, store: Store, run_id: str, *, ended: bool) -> RequestsSent:
        """What each model request of `run_id` was sent as (`show --json`'s
        `max_output_tokens_per_step` and `fallback_requests`): read from its turns, and kept
        once it has ended (the page polls an ended run while its approval's continuation
        starts)."""
        with self._lock:
            kept = self._sent.get(run_id)
        if kept is not None:
            return kept
        sent = requests_sent(store.turns(run_id))
        if ended:
            with self._lock:
                self._sent[run_id] = sent
                while len(self._sent) > self.keep:
                    self._sent.popitem(last=False)
        return sent

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
