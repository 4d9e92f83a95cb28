"""Fixtures shared by the store tests: one store of every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from contextledger.store import EventStore, MemoryStore, SQLiteStore

BACKENDS = ("memory", "sqlite")


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventStore]:
    """An empty, open store of each backend in turn (closed again after the test)."""
    if request.param == "memory":
        memory = MemoryStore()
        try:
            yield memory
        finally:
            await memory.aclose()
    else:
        async with SQLiteStore.open(tmp_path / "x.db") as sqlite:
            yield sqlite
