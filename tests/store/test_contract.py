"""The store contract suite (contract.py) on every backend: memory, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runner.store import MemoryStore, SqliteStore
from runner.store.adapters import as_async
from runner.store.base import AsyncStore
from runner.store.postgres import PostgresStore
from tests.support.store_contract import StoreContract


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def memory(self) -> MemoryStore:
        return MemoryStore()

    @pytest.fixture
    def store(self, memory: MemoryStore) -> AsyncStore:
        return as_async(memory)

    @pytest.fixture
    def another(self, memory: MemoryStore) -> AsyncStore:
        return as_async(memory.another_handle())


class TestSqliteStore(StoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[AsyncStore]:
        made = as_async(SqliteStore(tmp_path / "s.sqlite"))
        yield made
        await made.close()

    @pytest.fixture
    async def another(self, tmp_path: Path, store: AsyncStore) -> AsyncIterator[AsyncStore]:
        made = as_async(SqliteStore(tmp_path / "s.sqlite"))
        yield made
        await made.close()


class TestPostgresStore(StoreContract):
    @pytest.fixture
    async def store(self, pg_url: str) -> AsyncIterator[AsyncStore]:
        made = await PostgresStore.open(pg_url)
        yield made
        await made.close()

    @pytest.fixture
    async def another(self, pg_url: str, store: AsyncStore) -> AsyncIterator[AsyncStore]:
        made = await PostgresStore.open(pg_url)
        yield made
        await made.close()
