"""Errors raised by event stores: one family, ``StoreError``.

A store raises nothing else of its own: the SQLite backend turns every ``apsw`` exception
into one of these at its boundary (``SQLiteStore``), so a caller handles a damaged file, a
locked one, a full disk or a read-only medium without knowing the backend. Events that cannot
be decoded raise ``EventDecodeError`` (``contextledger.events``), which names the stream and
position. Every one is a ``LedgerError``.
"""

from __future__ import annotations

from contextledger.events._errors import LedgerError


class StoreError(LedgerError):
    """Base class of the errors a store raises."""


class ConcurrencyError(StoreError):
    """An append expected the stream at one version, or its last event at one position, and
    found another; nothing was written. ``expected`` and ``actual`` are the versions;
    ``expected_position`` is the position the append named (None when it named none) and
    ``actual_position`` the position of the stream's last event (0 when it has none) when
    the version was as expected and the position was not, else None."""

    def __init__(
        self,
        stream: str,
        expected: int,
        actual: int,
        expected_position: int | None = None,
        actual_position: int | None = None,
    ) -> None:
        if actual_position is None:
            message = f"stream {stream!r} is at version {actual}, the append expected {expected}"
        else:
            message = (
                f"stream {stream!r} ends at position {actual_position}, the append expected "
                f"its last event at position {expected_position}"
            )
        super().__init__(message)
        self.stream = stream
        self.expected = expected
        self.actual = actual
        self.expected_position = expected_position
        self.actual_position = actual_position


class SnapshotBaseError(StoreError):
    """A snapshot built on another one (``Snapshot.base``) did not find it stored: none is,
    or the stored one is of another schema or outside ``base`` to the snapshot's seq (another
    writer's, or a later one). Nothing was written; a whole snapshot (``base`` 0) can be."""


class StoreArgumentError(StoreError, TypeError):
    """A store method was given a value of the wrong type (a stream name that is not text, a
    version that is not an int, events that are not a list, a snapshot whose fields are not
    of their types); nothing was written."""


class StoreClosedError(StoreError):
    """The store was used after it was closed."""


class StoreSchemaError(StoreError):
    """The file is not a store this release reads (missing, another application's database,
    not SQLite at all, or written under another store schema); nothing was changed."""


class StoreBusyError(StoreError):
    """Another process kept the database locked longer than the store waits; nothing of the
    append was written. Retrying later may succeed."""

    def __init__(self, path: str, waited_ms: int) -> None:
        super().__init__(f"{path} stayed locked by another process for {waited_ms} ms")
        self.path = path
        self.waited_ms = waited_ms


class StoreCorruptError(StoreError):
    """The file is damaged (truncated, overwritten, a page that does not read back as it was
    written). Reads of the damaged part fail; nothing is repaired."""


class StoreIntegrityError(StoreCorruptError):
    """A row does not read back as it was written: its checksum does not match, or it breaks
    the store's structure (a seq gap, a row of another stream, a stream shorter than its
    recorded version). ``stream`` names the stream (None when the row's stream is unknown),
    ``position`` the event's global position, or the first of the batch row's events and
    ``last_position`` the last (None for a stream's or a snapshot's row)."""

    def __init__(
        self,
        stream: str | None,
        position: int | None,
        reason: str,
        last_position: int | None = None,
    ) -> None:
        where = "" if stream is None else f"stream {stream!r}"
        if position is not None:
            if last_position is None or last_position == position:
                where = f"{where} position {position}".strip()
            else:
                where = f"{where} positions {position}-{last_position}".strip()
        super().__init__(f"{where or 'store'}: {reason}")
        self.stream = stream
        self.position = position
        self.last_position = last_position
        self.reason = reason


class StoreFullError(StoreError):
    """The disk (or the file size limit) is full; nothing of the write was committed."""


class StoreReadOnlyError(StoreError):
    """A write to a store opened read-only (a read-only file or medium); nothing was
    written."""


class StoreIOError(StoreError):
    """Any other failure of the medium or the database engine (an I/O error, a file that
    can no longer be opened); the operation did not take effect."""
