"""The ``EventStore`` contract (``contextledger.testing.StoreContract``) run against every
backend, so the backends cannot drift apart."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from contextledger.store import EventStore, MemoryStore, SQLiteStore
from contextledger.testing import StoreContract


@asynccontextmanager
async def memory_store() -> AsyncIterator[MemoryStore]:
    store = MemoryStore()
    try:
        yield store
    finally:
        await store.aclose()


class TestMemoryStore(StoreContract):
    def open_store(self, directory: Path) -> AbstractAsyncContextManager[EventStore]:
        return memory_store()


class TestSQLiteStore(StoreContract):
    def open_store(self, directory: Path) -> AbstractAsyncContextManager[EventStore]:
        return SQLiteStore.open(directory / "events.db")
