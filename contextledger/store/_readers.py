"""The reader pool: connections for reads, each used by one worker thread at a time.

A read takes a connection from the pool (opening one when none is free), runs on it and
gives it back. A connection goes back only when no read transaction is left open on it:
pooled inside one, it would serve every later read from an old snapshot of the data and
hold back every checkpoint past it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import apsw

from contextledger.store._connections import SQLITE_ERRORS, Access, open_reader, store_error

T = TypeVar("T")


class ReaderPool:
    """Reader connections to the store at ``path``; ``query`` is called on worker threads."""

    def __init__(self, path: str, access: Access) -> None:
        self.path = path
        self._access = access
        self._idle: list[apsw.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def query(self, run: Callable[[apsw.Cursor], T]) -> T:
        """Run ``run`` with a cursor of a pooled connection.

        Whatever happens, the cursor is closed before the connection goes back: a read that
        fails half-way (an event that does not decode) leaves its statement, and with it a
        read transaction, open. SQLite's errors leave as ``StoreError``s (``store_error``)."""
        conn: apsw.Connection | None = None
        cursor: apsw.Cursor | None = None
        try:
            conn = self.take()
            cursor = conn.cursor()
            return run(cursor)
        except SQLITE_ERRORS as exc:
            raise store_error(exc, self.path) from exc
        finally:
            if cursor is not None:
                cursor.close(force=True)
            if conn is not None:
                self.give_back(conn)

    def take(self) -> apsw.Connection:
        """An idle connection, or a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return open_reader(self.path, self._access)

    def give_back(self, conn: apsw.Connection) -> None:
        """Pool ``conn`` again, unless the pool is closed or a read transaction is still
        open on it (then it is closed instead)."""
        with self._lock:
            if not self._closed and conn.txn_state() == apsw.SQLITE_TXN_NONE:
                self._idle.append(conn)
                return
        conn.close()

    def pooled(self, conn: apsw.Connection) -> bool:
        """Whether ``conn`` waits in the pool."""
        with self._lock:
            return conn in self._idle

    def close(self) -> None:
        """Close every idle connection; connections given back later are closed too."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
