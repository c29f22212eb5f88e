"""Stores for runs, transitions, recorded inputs and operation records: the protocol, memory,
SQLite, PostgreSQL and the JSONL log.

May import: `base`, `core`, `models`, `tools`, `record`.
"""

from .base import RunListing, RunLog, Store, UnreadableRun
from .fanout import FanoutStore
from .jsonl import JsonlLog
from .memory import MemoryStore
from .sqlite import SqliteStore

__all__ = [
    "FanoutStore",
    "JsonlLog",
    "MemoryStore",
    "RunListing",
    "RunLog",
    "SqliteStore",
    "Store",
    "UnreadableRun",
]
