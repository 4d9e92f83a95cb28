"""The checkpointer: one long-lived thread with a connection of its own that copies the WAL
into the database file while commits go on, so that no commit pays for it (up to a limit).

The writer reports the WAL's size after each commit (``wal_grew``, in pages of the file's
``page_size``); each time it has grown by ``CHECKPOINT_BYTES`` the checkpointer is woken
(started the first time) and runs a ``PASSIVE`` checkpoint, which copies what it can without
waiting for anyone. Under a steady stream of commits a passive checkpoint never copies the
very last frames, so the WAL file is never started over and only grows: past
``WAL_RESTART_BYTES`` it first tries a ``RESTART`` without waiting, which succeeds only in a
gap between commits and then copies just the few frames written since the last passive
round; until the gap comes it looks again every ``RESTART_RETRY_SECONDS``, sleeping in
between.

Back-to-back commits may leave no such gap, so past ``WAL_LIMIT_BYTES`` the writer itself
restarts the WAL between two of its commits (``restart_wal``, on the worker thread of the
commit that pays for it). The two never checkpoint at once: the writer waits for the
thread's round in progress, which never waits for anyone.
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
#: Past this size the writer restarts the WAL itself between two commits: commits that come
#: back to back may leave the checkpointer no gap, and the WAL would grow without bound.
#: Twice its threshold, so that the checkpointer, whose restart no commit pays for, usually
#: finds a gap first (in the ledger benchmark's 500,000 appends, all but one or two times).
WAL_LIMIT_BYTES: Final = 2 * WAL_RESTART_BYTES
#: How long the writer's restart waits for readers of older data (in any process) and for
#: another process's checkpoint; then the commit goes on and the WAL keeps growing until
#: the next try, ``WAL_RESTART_BYTES`` later, so a reader that never ends costs one such
#: wait per ``WAL_RESTART_BYTES`` written.
WAL_LIMIT_WAIT_SECONDS: Final = 0.1
#: How often a checkpoint that needs the whole WAL tries again while another connection
#: checkpoints (SQLite then refuses at once, without waiting; a passive round of a few MB
#: takes milliseconds).
BUSY_RETRY_SECONDS: Final = 0.005

_log = structlog.get_logger("contextledger.store._checkpointer")


class Checkpointer:
    """Checkpoints the WAL of the store at ``path``, whose pages are of ``page_size`` bytes,
    on a thread of its own."""

    def __init__(self, path: str, access: Access, page_size: int) -> None:
        self.path = path
        self._access = access
        self._every = max(1, CHECKPOINT_BYTES // page_size)
        self._restart = max(1, WAL_RESTART_BYTES // page_size)
        self._limit = max(1, WAL_LIMIT_BYTES // page_size)
        #: The WAL's size (in pages) at which the writer next restarts it.
        self._next_limit = self._limit
        #: Held by whichever checkpoints: this thread or the writer.
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._wanted = threading.Event()
        self._closed = False
        self._mark = 0
        #: The WAL's size in pages, as last reported.
        self.wal_pages = 0

    def wal_grew(self, pages: int) -> None:
        """The WAL holds ``pages`` pages after a commit: wake the thread (starting it the
        first time) each time it has grown by ``CHECKPOINT_BYTES`` since the last wake."""
        if pages < self.wal_pages:  # the WAL started over
            self._mark = 0
            self._next_limit = self._limit
        self.wal_pages = pages
        if pages - self._mark >= self._every:
            self._mark = pages
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="contextledger-checkpoint", daemon=True
                )
                self._thread.start()
            self._wanted.set()

    def limit_reached(self) -> bool:
        """Whether the writer should restart the WAL (``restart_wal``) before its next
        commit."""
        return self.wal_pages >= self._next_limit

    def restart_wal(self, writer: apsw.Connection) -> None:
        """On the ``writer``'s connection, between two of its commits: a ``RESTART``
        checkpoint, after this thread's round in progress. It copies the rest of the WAL,
        waiting up to ``WAL_LIMIT_WAIT_SECONDS`` for readers of older data and another
        connection's checkpoint, so the next commit writes the WAL from its start. When the
        wait runs out it logs that and gives up until the WAL has grown by
        ``WAL_RESTART_BYTES`` more. Never raises; leaves the writer's busy timeout at 0."""
        with self._lock:
            try:
                checkpoint_until(
                    writer,
                    apsw.SQLITE_CHECKPOINT_RESTART,
                    time.monotonic() + WAL_LIMIT_WAIT_SECONDS,
                )
            except apsw.Error as exc:
                self._next_limit = self.wal_pages + self._restart
                busy = isinstance(exc, apsw.BusyError)
                (_log.info if busy else _log.warning)(
                    "wal restart postponed" if busy else "wal restart failed",
                    path=self.path,
                    wal_pages=self.wal_pages,
                    error=str(exc),
                )
            else:
                # What it held is in the database file; the next commit starts it over.
                self.wal_pages = self._mark = 0
                self._next_limit = self._limit
            finally:
                writer.set_busy_timeout(0)

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
                with self._lock:
                    gap_missed = self._checkpoint(conn)
                if gap_missed:
                    # Look again in a moment (a sleep, not a spin: this thread must not
                    # compete with the writer for the CPU).
                    time.sleep(RESTART_RETRY_SECONDS)
                    self._wanted.set()
        finally:
            conn.close()

    def _checkpoint(self, conn: apsw.Connection) -> bool:
        """One round; whether it missed the gap for a restart (and should look again)."""
        gap_missed = False
        try:
            if self.wal_pages >= self._restart:
                conn.set_busy_timeout(0)
                try:
                    conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_RESTART)
                    return False
                except apsw.BusyError:
                    gap_missed = True
                finally:
                    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
        except apsw.BusyError:
            _log.info("checkpoint postponed: the database is busy", path=self.path)
        except apsw.Error as exc:
            # The next request tries again; the WAL only grows meanwhile.
            _log.warning("checkpoint failed", path=self.path, error=str(exc))
        return gap_missed


def checkpoint_until(conn: apsw.Connection, mode: int, deadline: float) -> int:
    """A checkpoint of ``mode`` on ``conn``, waiting for other connections' locks (its busy
    timeout) and tried again every ``BUSY_RETRY_SECONDS`` while another connection
    checkpoints, until ``deadline`` (``time.monotonic``); then ``apsw.BusyError``. Returns
    the pages the WAL holds after it, as SQLite counts them (none after a ``TRUNCATE``).
    Leaves ``conn``'s busy timeout changed."""
    while True:
        conn.set_busy_timeout(max(0, int((deadline - time.monotonic()) * 1000)))
        try:
            pages, _ = conn.wal_checkpoint(mode=mode)
            return pages
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(BUSY_RETRY_SECONDS)
