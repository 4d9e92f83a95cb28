"""The checkpointer: one long-lived thread with a connection of its own that copies the WAL
into the database file while commits go on, so that no commit pays for it.

The writer reports the WAL's size after each commit (``wal_grew``, in pages of the file's
``page_size``); each time it has grown by ``CHECKPOINT_BYTES`` the checkpointer is woken
(started the first time) and runs a ``PASSIVE`` checkpoint, which copies what it can without
waiting for anyone. Under a steady stream of commits a passive checkpoint never copies the
very last frames, so the WAL file is never started over and only grows: past
``WAL_RESTART_BYTES`` it first tries a ``RESTART`` without waiting, which succeeds only in a
gap between commits and then copies just the few frames written since the last passive
round; until the gap comes it looks again every ``RESTART_RETRY_SECONDS``, sleeping in
between.
"""

from __future__ import annotations

import threading
import time
from typing import Final

import apsw
import structlog

from contextledger.store._connections import BUSY_TIMEOUT_MS, Access, open_reader

#: Checkpoint each time the WAL grows by this much (SQLite's own default: 1,000 pages of
#: 4 KiB).
CHECKPOINT_BYTES: Final = 4_096_000
#: Past this size the checkpointer looks for a gap between commits to start the WAL over,
#: instead of letting it grow without bound.
WAL_RESTART_BYTES: Final = 16 * CHECKPOINT_BYTES
#: How often it looks for that gap while the WAL is past the limit.
RESTART_RETRY_SECONDS: Final = 0.01

_log = structlog.get_logger("contextledger.store._checkpointer")


class Checkpointer:
    """Checkpoints the WAL of the store at ``path``, whose pages are of ``page_size`` bytes,
    on a thread of its own."""

    def __init__(self, path: str, access: Access, page_size: int) -> None:
        self.path = path
        self._access = access
        self._every = max(1, CHECKPOINT_BYTES // page_size)
        self._restart = max(1, WAL_RESTART_BYTES // page_size)
        self._thread: threading.Thread | None = None
        self._wanted = threading.Event()
        self._closed = False
        self._mark = 0
        #: The WAL's size in pages, as last reported.
        self.wal_pages = 0

    def wal_grew(self, pages: int) -> None:
        """The WAL holds ``pages`` pages after a commit: wake the thread (starting it the
        first time) each time it has grown by ``CHECKPOINT_BYTES`` since the last wake."""
        self.wal_pages = pages
        if pages < self._mark:  # the WAL started over
            self._mark = 0
        if pages - self._mark >= self._every:
            self._mark = pages
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="contextledger-checkpoint", daemon=True
                )
                self._thread.start()
            self._wanted.set()

    def close(self) -> None:
        """Stop the thread after the checkpoint it may be running (blocks until then)."""
        self._closed = True
        if self._thread is not None:
            self._wanted.set()
            self._thread.join()

    def _loop(self) -> None:
        try:
            conn = open_reader(self.path, self._access)
            # A connection learns that the file is in WAL mode on its first read; before
            # that, a checkpoint request does nothing.
            conn.execute("PRAGMA journal_mode").fetchall()
        except apsw.Error as exc:
            # Commits go on without checkpoints (the WAL only grows); the next store retries.
            _log.warning("checkpointer could not start", path=self.path, error=str(exc))
            return
        try:
            while True:
                self._wanted.wait()
                self._wanted.clear()
                if self._closed:
                    return
                self._checkpoint(conn)
        finally:
            conn.close()

    def _checkpoint(self, conn: apsw.Connection) -> None:
        try:
            if self.wal_pages >= self._restart:
                conn.set_busy_timeout(0)
                try:
                    conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_RESTART)
                    return
                except apsw.BusyError:
                    # Try again in a moment (a sleep, not a spin: this thread must not
                    # compete with the writer for the CPU).
                    time.sleep(RESTART_RETRY_SECONDS)
                    self._wanted.set()
                finally:
                    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
        except apsw.BusyError:
            _log.info("checkpoint postponed: the database is busy", path=self.path)
        except apsw.Error as exc:
            # The next request tries again; the WAL only grows meanwhile.
            _log.warning("checkpoint failed", path=self.path, error=str(exc))
