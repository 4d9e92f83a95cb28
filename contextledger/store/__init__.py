"""Event stores: the ``EventStore`` contract, SQLite (the embedded default) and memory."""

from contextledger.store._errors import (
    ConcurrencyError,
    StoreBusyError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreIOError,
    StoreReadOnlyError,
    StoreSchemaError,
)
from contextledger.store._memory import MemoryStore
from contextledger.store._protocol import ANY_VERSION, EventStore, Snapshot
from contextledger.store._sqlite import Durability, SQLiteStore

__all__ = [
    "ANY_VERSION",
    "ConcurrencyError",
    "Durability",
    "EventStore",
    "MemoryStore",
    "SQLiteStore",
    "Snapshot",
    "StoreBusyError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreFullError",
    "StoreIOError",
    "StoreReadOnlyError",
    "StoreSchemaError",
]
