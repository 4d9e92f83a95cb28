"""Event stores: the ``EventStore`` contract, SQLite (the embedded default) and memory."""

from contextledger.store._checker import Problem
from contextledger.store._errors import (
    ConcurrencyError,
    SnapshotBaseError,
    StoreArgumentError,
    StoreBusyError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreIntegrityError,
    StoreIOError,
    StoreReadOnlyError,
    StoreSchemaError,
)
from contextledger.store._memory import MemoryStore
from contextledger.store._protocol import ANY_VERSION, EventStore, Snapshot, SnapshotReader
from contextledger.store._sqlite import Durability, SQLiteStore

__all__ = [
    "ANY_VERSION",
    "ConcurrencyError",
    "Durability",
    "EventStore",
    "MemoryStore",
    "Problem",
    "SQLiteStore",
    "Snapshot",
    "SnapshotBaseError",
    "SnapshotReader",
    "StoreArgumentError",
    "StoreBusyError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreFullError",
    "StoreIOError",
    "StoreIntegrityError",
    "StoreReadOnlyError",
    "StoreSchemaError",
]
