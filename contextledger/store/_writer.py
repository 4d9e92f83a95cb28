"""The writer: one connection and its group commit.

How a write travels. A write is queued with the size of its rows. If no commit is in
progress, the caller leads: it takes every queued write and commits them in one
transaction. Writes that arrive while a commit is in progress wait, and the next leader
commits them together, so concurrent writes share commits (group commit). A write returns
only after the transaction holding it has committed.

Where the commit runs. A small commit at ``synchronous=NORMAL`` costs about 20 us (WAL
append, no fsync); a trip to a worker thread and back costs about 130 us, so such commits
run inline on the trio thread. Commits that can be slow (``inline`` off, for
``durability="full"``, which fsyncs every commit, or a batch over ``INLINE_COMMIT_BYTES``)
run on a worker thread and the event loop keeps going. An inline commit never waits for
another process's lock either: it moves to a worker thread, which waits up to
``BUSY_TIMEOUT_MS`` and then fails the whole batch with ``StoreBusyError`` (nothing
written).

Upkeep. Work the connection needs between two commits (restarting a WAL that grew too
long) is run when ``upkeep_due()`` says so, before the next commit and on its worker
thread: that commit pays for it, and the event loop keeps going.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import apsw
import structlog
import trio

from contextledger.store._connections import BUSY_TIMEOUT_MS, SQLITE_ERRORS, store_error
from contextledger.store._errors import StoreBusyError

#: Batches larger than this commit on a worker thread: writing 1 MiB into the WAL takes
#: about a millisecond, longer than the 130 us thread round trip that avoids blocking.
INLINE_COMMIT_BYTES: Final = 1 << 20
#: An inline commit never waits, so a task appending in a loop would never let others run;
#: after this long without a pause, an append yields to the scheduler once.
YIELD_SECONDS: Final = 0.001

_log = structlog.get_logger("contextledger.store._writer")

T = TypeVar("T")


class _Write:
    """One queued write: an append or a snapshot, with its outcome once committed."""

    __slots__ = ("done", "error", "nbytes", "result", "run", "wake")

    def __init__(self, run: Callable[[apsw.Cursor], Any], nbytes: int) -> None:
        self.run = run
        self.nbytes = nbytes
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.wake: trio.Event | None = None


class _WouldBlock(Exception):
    """Another process holds the write lock: this commit must not wait on the trio thread."""


class GroupCommit:
    """Commits the writes queued on the writer connection ``conn`` of the store at ``path``,
    many to a transaction. Around each transaction it calls ``begun(cursor)`` first,
    ``rolled_back()`` when a failure undid the whole transaction, and ``committed()`` after
    it (whether or not it committed). ``upkeep()``, which must not raise, runs between two
    commits whenever ``upkeep_due()``."""

    def __init__(
        self,
        conn: apsw.Connection,
        path: str,
        *,
        inline: bool,
        begun: Callable[[apsw.Cursor], None],
        rolled_back: Callable[[], None],
        committed: Callable[[], None],
        upkeep_due: Callable[[], bool],
        upkeep: Callable[[], None],
    ) -> None:
        self._conn = conn
        self.path = path
        self._inline = inline
        self._begun = begun
        self._rolled_back = rolled_back
        self._committed = committed
        self._upkeep_due = upkeep_due
        self._upkeep = upkeep
        self._queue: list[_Write] = []
        self._leading = False
        self._last_yield = 0.0

    async def drain(self) -> None:
        """Wait until no commit is in progress and nothing is queued."""
        while self._leading or self._queue:
            await trio.sleep(0.001)

    async def alone(self, work: Callable[[], None]) -> None:
        """Run ``work`` on a worker thread while no commit runs: after the commit in progress
        and before any queued or later write, which wait as behind a commit. Shielded."""
        with trio.CancelScope(shield=True):
            await self.drain()
            self._leading = True
            try:
                await trio.to_thread.run_sync(work)
            finally:
                self._finish([])

    async def submit(self, run: Callable[[apsw.Cursor], T], nbytes: int) -> T:
        """Queue a write (``run``, called with the transaction's cursor; ``nbytes`` its
        size), then lead a commit or wait for the leader's, and return what ``run``
        returned. Once queued, a write is decided (committed or failed) before this returns:
        the wait is shielded."""
        write = _Write(run, nbytes)
        self._queue.append(write)
        if self._leading or not self._commit_here():
            with trio.CancelScope(shield=True):
                while not write.done:
                    if self._leading:
                        write.wake = trio.Event()
                        await write.wake.wait()
                    elif not self._commit_here():
                        batch = self._take_queue()
                        try:
                            await trio.to_thread.run_sync(self._commit_on_thread, batch)
                        finally:
                            self._finish(batch)
        elif (now := time.monotonic()) - self._last_yield >= YIELD_SECONDS:
            # Inline commits do not wait for anything; let other tasks run now and then.
            self._last_yield = now
            await trio.lowlevel.cancel_shielded_checkpoint()
        if write.error is not None:
            raise write.error
        result: T = write.result
        return result

    def _commit_here(self) -> bool:
        """Commit the queue inline if it may be: True once done, False (queue untouched)
        when it must go to a worker thread."""
        return not self._upkeep_due() and self._fits_inline() and self._commit_inline()

    def _commit_on_thread(self, batch: list[_Write]) -> None:
        if self._upkeep_due():
            self._upkeep()
        self._commit(batch, True)

    def _fits_inline(self) -> bool:
        if not self._inline:
            return False
        queue = self._queue
        if len(queue) == 1:
            return queue[0].nbytes <= INLINE_COMMIT_BYTES
        return sum(w.nbytes for w in queue) <= INLINE_COMMIT_BYTES

    def _commit_inline(self) -> bool:
        """Commit the queue on this thread; False (queue untouched) when another process
        holds the write lock, so the caller commits on a thread and waits there instead."""
        batch = self._take_queue()
        try:
            self._commit(batch, False)
        except _WouldBlock:
            self._queue[:0] = batch
            self._leading = False
            return False
        self._finish(batch)
        return True

    def _take_queue(self) -> list[_Write]:
        self._leading = True
        batch, self._queue = self._queue, []
        return batch

    def _finish(self, batch: list[_Write]) -> None:
        """After a commit: wake its waiting writers, promote the next queued write to lead,
        and tell the store (``committed``)."""
        self._leading = False
        for write in batch:
            if write.wake is not None:
                write.wake.set()
        if self._queue and self._queue[0].wake is not None:
            self._queue[0].wake.set()
        self._committed()

    def _commit(self, batch: list[_Write], wait: bool) -> None:
        """Run every write of ``batch`` in one transaction. A write that fails while the
        transaction goes on (a version conflict, a snapshot SQLite refuses, a stream row
        that does not match its checksum) is rolled back to its savepoint and fails alone;
        the others commit. A failure that ends the transaction (SQLite rolls it back on a
        full disk or an I/O error) fails every write of the batch. Without ``wait``, raise
        ``_WouldBlock`` (nothing done) instead of waiting for another process's lock."""
        cur = self._conn.cursor()
        if wait:
            self._conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        try:
            cur.execute("BEGIN IMMEDIATE")
        except apsw.BusyError as exc:
            if not wait:
                raise _WouldBlock from None
            self._fail(batch, StoreBusyError(self.path, BUSY_TIMEOUT_MS))
            _log.warning("append failed: database locked", path=self.path, error=str(exc))
            return
        except apsw.Error as exc:
            self._fail(batch, store_error(exc, self.path, self._conn.system_errno))
            return
        finally:
            if wait:
                self._conn.set_busy_timeout(0)
        try:
            self._begun(cur)
            for write in batch:
                if len(batch) == 1:
                    write.result = write.run(cur)
                    continue
                cur.execute("SAVEPOINT write")
                try:
                    write.result = write.run(cur)
                except Exception as exc:
                    if self._conn.getautocommit():
                        raise  # SQLite ended the transaction: the whole batch failed
                    # Nothing of this write stays in the database or the caches.
                    cur.execute("ROLLBACK TO write")
                    write.error = (
                        store_error(exc, self.path, self._conn.system_errno)
                        if isinstance(exc, SQLITE_ERRORS)
                        else exc
                    )
                cur.execute("RELEASE write")
            cur.execute("COMMIT")
        except BaseException as exc:
            system_errno = self._conn.system_errno  # before the rollback can change it
            if not self._conn.getautocommit():
                # SQLite may have rolled back already (a full disk, an I/O error); a failed
                # ROLLBACK must not keep the batch's writers from hearing how it ended.
                with contextlib.suppress(apsw.Error):
                    cur.execute("ROLLBACK")
            self._rolled_back()
            error = (
                store_error(exc, self.path, system_errno) if isinstance(exc, SQLITE_ERRORS) else exc
            )
            for write in batch:
                write.result = None
                write.error = error
        finally:
            for write in batch:
                write.done = True

    @staticmethod
    def _fail(batch: list[_Write], error: BaseException) -> None:
        for write in batch:
            write.result, write.error, write.done = None, error, True
