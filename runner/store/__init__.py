"""Stores for run headers, transition records and run summaries."""

from .base import Store
from .fanout import FanoutStore
from .jsonl import JsonlStore
from .memory import MemoryStore

__all__ = ["FanoutStore", "JsonlStore", "MemoryStore", "Store"]
