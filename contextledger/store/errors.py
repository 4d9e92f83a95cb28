"""Errors raised by event stores."""

from __future__ import annotations

from contextledger.events.errors import LedgerError


class ConcurrencyError(LedgerError):
    """An append expected the stream at one version and found another; nothing was written."""

    def __init__(self, stream: str, expected: int, actual: int) -> None:
        super().__init__(
            f"stream {stream!r} is at version {actual}, the append expected {expected}"
        )
        self.stream = stream
        self.expected = expected
        self.actual = actual


class StoreClosedError(LedgerError):
    """The store was used after it was closed."""


class StoreSchemaError(LedgerError):
    """The database was written by a release with another store schema."""


class StoreBusyError(LedgerError):
    """Another process kept the database locked longer than the store waits; nothing of the
    append was written. Retrying later may succeed."""

    def __init__(self, path: str, waited_ms: int) -> None:
        super().__init__(f"{path} stayed locked by another process for {waited_ms} ms")
        self.path = path
        self.waited_ms = waited_ms
