"""The embedded default store: SQLite through apsw, in WAL mode, behind one writer.

Its parts: the writer and its group commit (``_writer``), the reader pool (``_readers``), the
checkpointer (``_checkpointer``), opening connections and typed errors (``_connections``),
the tables and their checksums (``_schema``), and verifying what is read (``_verify``,
``_checker``). The writer never checkpoints on commit (``wal_autocheckpoint=0``); the
checkpointer does, on a thread of its own, so no commit pays for it, until the WAL passes
``WAL_LIMIT_BYTES``: then the writer restarts it between two commits.

Durability. ``"normal"`` (the default) survives a crash of the process at any moment: an
acknowledged append is never lost and no partial transaction is ever visible. It can lose the
last commits on a power failure or an OS crash. ``"full"`` fsyncs the WAL on every commit and
survives those too, at the cost of an fsync per commit (group commit amortises it).

Errors. No ``apsw`` exception leaves this module: each becomes a ``StoreError`` (corrupt,
busy, full, read-only, schema, I/O; ``store_error``). A read that fails, whatever the
reason, ends its read transaction before its connection goes back to the pool.

Read-only files. A store file that cannot be written (no write permission bit, or on a
read-only mount) is opened for reading only, without creating ``-wal`` or ``-shm`` files:
as ``immutable`` when no ``-wal`` file exists (nobody has it open; nothing to lock), through
the existing ``-wal`` otherwise. Writes then raise ``StoreReadOnlyError``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from itertools import repeat
from typing import Any, Final, Literal, TypeVar

import apsw
import structlog
import trio

from contextledger.events._catalogue import Event, RecordedEvent
from contextledger.events._codec import DEFAULT_CODEC, EventCodec
from contextledger.store._checker import Problem, find_problems
from contextledger.store._checkpointer import Checkpointer, checkpoint_until
from contextledger.store._connections import (
    BUSY_TIMEOUT_MS,
    SQLITE_ERRORS,
    access_of,
    open_writer,
    store_error,
)
from contextledger.store._errors import (
    SnapshotBaseError,
    StoreClosedError,
    StoreCorruptError,
    StoreIntegrityError,
    StoreReadOnlyError,
)
from contextledger.store._protocol import (
    Snapshot,
    SnapshotReader,
    check_append,
    check_expected,
    check_read,
    check_snapshot,
    check_stream_names,
    snapshot_base_error,
)
from contextledger.store._readers import ReaderPool
from contextledger.store._schema import (
    BATCH_HEAD_BYTES,
    INSERT_BATCH,
    LAST_POSITION,
    batch_crc,
    batch_row_data,
    chunk_crc,
    one,
    snapshot_crc,
    stream_crc,
)
from contextledger.store._verify import (
    CHUNK_MISMATCH,
    StreamHead,
    chunk_ok,
    verified_batch,
    verified_chunks,
    verified_snapshot,
    verified_stream,
    verified_stream_events,
)
from contextledger.store._writer import GroupCommit

Durability = Literal["normal", "full"]

#: ``subscribe`` re-reads this often even without a local commit, to see other processes'.
SUBSCRIBE_POLL_SECONDS: Final = 0.5
#: Rows fetched per page by ``subscribe``.
SUBSCRIBE_PAGE: Final = 1000

_STREAM: Final = "SELECT id, name, version, crc FROM streams WHERE name = ?"
#: The same lookup past the index on ``name``: tells a missing stream from a damaged index.
_STREAM_UNINDEXED: Final = "SELECT id, name, version, crc FROM streams NOT INDEXED WHERE name = ?"

_log = structlog.get_logger("contextledger.store._sqlite")

T = TypeVar("T")


class SQLiteStore:
    """An ``EventStore`` in one SQLite file. Open it with ``SQLiteStore.open(path)``."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "normal",
        codec: EventCodec = DEFAULT_CODEC,
        create: bool = True,
    ) -> None:
        if durability not in ("normal", "full"):
            raise ValueError(f"durability must be 'normal' or 'full', not {durability!r}")
        self.path = os.fspath(path)
        self.durability: Durability = durability
        self._codec = codec
        self._access = access_of(self.path, create)
        #: Whether the file could only be opened for reading (``file_is_read_only``).
        self.read_only = self._access.read_only
        self._writer = open_writer(self.path, self._access, durability, create)
        self._writer.set_busy_timeout(0)
        # stream name -> (its row id in ``streams``, its version, the position of its last
        # event: None until an append asks for it), for the writer.
        self._versions: dict[str, tuple[int, int, int | None]] = {}
        self._last_position = 0
        self._data_version = -1
        #: The WAL's size in pages as SQLite reported it since the last commit or checkpoint
        #: of the writer: None once the checkpointer has it (a rolled-back transaction
        #: reports nothing, its WAL is where the last commit left it).
        self._wal_pages: int | None = None
        self._writer.set_wal_hook(self._on_wal)
        self._readers = ReaderPool(self.path, self._access)
        (page_size,) = one(self._writer.cursor(), "PRAGMA page_size")
        self._checkpointer = Checkpointer(self.path, self._access, page_size)
        self._commits = GroupCommit(
            self._writer,
            self.path,
            inline=durability == "normal",
            begun=self._refresh_caches,
            rolled_back=self._forget_caches,
            committed=self._committed_one,
            upkeep_due=self._checkpointer.limit_reached,
            upkeep=lambda: self._checkpointer.restart_wal(self._writer),
        )
        self._closed = False
        self._committed: trio.Event | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "normal",
        codec: EventCodec = DEFAULT_CODEC,
        create: bool = True,
    ) -> AsyncIterator[SQLiteStore]:
        """Open the store at ``path`` for the duration of the block, creating it unless
        ``create`` is false. Raises ``StoreSchemaError``, changing nothing, for a file that
        is not a store of this release. A file that cannot be written is opened read-only
        (``read_only``; writes raise ``StoreReadOnlyError``)."""
        store = await trio.to_thread.run_sync(
            lambda: cls(path, durability=durability, codec=codec, create=create)
        )
        try:
            yield store
        finally:
            await store.aclose()

    # --- writing --------------------------------------------------------------------------

    async def append(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[Event],
        *,
        expected_position: int | None = None,
    ) -> list[RecordedEvent]:
        """See ``EventStore.append``."""
        self._check_writable()
        check_append(stream, expected_version, events, expected_position)
        if not events:
            return []
        batch = self._codec.encode_batch(events, BATCH_HEAD_BYTES * len(events))
        data = batch_row_data(batch)
        # The caller's own events come back: they encode to exactly the stored bytes. (Inside
        # untyped fields a tuple is read back as a list; use lists there for equality.)
        given = list(events)

        def run(cur: apsw.Cursor) -> list[RecordedEvent]:
            return self._insert(cur, stream, (expected_version, expected_position), data, given)

        result: list[RecordedEvent] = await self._commits.submit(run, len(data))
        return result

    def _insert(
        self,
        cur: apsw.Cursor,
        stream: str,
        expected: tuple[int, int | None],
        data: bytearray,
        events: list[Event],
    ) -> list[RecordedEvent]:
        """Write ``events`` (encoded in ``data``) to ``stream`` if it is where ``expected``,
        its version and the position of its last event, says (``check_expected``)."""
        known = self._versions.get(stream)
        if known is None:
            row = cur.execute(_STREAM, (stream,)).fetchone()
            if row is not None:
                head = verified_stream(row, stream)
                known = (head.id, head.version, None if head.version else 0)
            else:
                known = (0, 0, 0)
        stream_id, version, end = known
        expected_version, expected_position = expected
        if expected_position is not None and end is None:
            end = self._stream_end(cur, stream, stream_id, version)
        check_expected(stream, expected_version, expected_position, version, end)
        new_version = version + len(events)
        if stream_id:
            cur.execute(
                "UPDATE streams SET version = ?, crc = ? WHERE id = ?",
                (new_version, stream_crc(stream_id, new_version, stream), stream_id),
            )
        else:
            (stream_id,) = one(cur, "SELECT coalesce(max(id), 0) + 1 FROM streams")
            cur.execute(
                "INSERT INTO streams (id, name, version, crc) VALUES (?, ?, ?, ?)",
                (stream_id, stream, new_version, stream_crc(stream_id, new_version, stream)),
            )
        last = self._last_position
        position = last + len(events)
        crc = batch_crc(stream_id, new_version, position, len(events), data)
        cur.execute(INSERT_BATCH, (position, stream_id, new_version, len(events), data, crc))
        # Only once the row is written: a write that fails leaves the caches as they were.
        self._versions[stream] = (stream_id, new_version, position)
        self._last_position = position
        seqs = range(version + 1, new_version + 1)
        return list(map(RecordedEvent, repeat(stream), seqs, range(last + 1, position + 1), events))

    @staticmethod
    def _stream_end(cur: apsw.Cursor, stream: str, stream_id: int, version: int) -> int:
        """The position of the last event of ``stream`` (its row ``stream_id``, at
        ``version`` > 0): its last batch row's, one lookup in the index on (stream, seq)."""
        row = cur.execute(
            "SELECT position FROM batches WHERE stream = ? AND seq = ?", (stream_id, version)
        ).fetchone()
        if row is None:
            missing = f"the batch row of its last seq {version} is missing"
            raise StoreIntegrityError(stream, None, missing)
        position: int = row[0]
        return position

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        """See ``EventStore.save_snapshot``: writes the head row and the chunks given, so a
        snapshot with a ``base`` costs what changed since it."""
        self._check_writable()
        check_snapshot(snapshot)

        def run(cur: apsw.Cursor) -> None:
            stream = snapshot.stream
            count = self._stored_chunks(cur, snapshot)
            if not snapshot.base:
                cur.execute("DELETE FROM snapshot_chunks WHERE stream = ?", (stream,))
            for key, data in snapshot.chunks.items():
                crc = chunk_crc(stream, key, data)
                cur.execute(
                    "UPDATE snapshot_chunks SET data = ?, crc = ? WHERE stream = ? AND key = ?",
                    (data, crc, stream, key),
                )
                if not self._writer.changes():
                    cur.execute(
                        "INSERT INTO snapshot_chunks (stream, key, data, crc) VALUES (?, ?, ?, ?)",
                        (stream, key, data, crc),
                    )
                    count += 1
            head = (stream, snapshot.seq, snapshot.schema, count, snapshot.data)
            cur.execute(
                "INSERT OR REPLACE INTO snapshots (stream, seq, schema, chunks, data, crc) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (*head, snapshot_crc(*head)),
            )

        nbytes = len(snapshot.data) + sum(map(len, snapshot.chunks.values()))
        await self._commits.submit(run, nbytes)

    def _stored_chunks(self, cur: apsw.Cursor, snapshot: Snapshot) -> int:
        """How many chunks the stored snapshot ``snapshot`` builds on holds (0 for a whole
        one); raises ``SnapshotBaseError`` when it cannot build on it."""
        if not snapshot.base:
            return 0
        row = cur.execute(
            "SELECT seq, schema, chunks, data, crc FROM snapshots WHERE stream = ?",
            (snapshot.stream,),
        ).fetchone()
        stored, chunks = None, 0
        if row is not None:
            with contextlib.suppress(StoreIntegrityError):  # a damaged head is none to build on
                seq, schema, chunks, _ = verified_snapshot(row, snapshot.stream)
                stored = (seq, schema)
        problem = snapshot_base_error(snapshot, stored)
        if problem is not None:
            raise SnapshotBaseError(f"snapshot of {snapshot.stream!r} not saved: {problem}")
        return chunks

    # --- retention ------------------------------------------------------------------------

    async def delete_streams(self, streams: Sequence[str]) -> int:
        """See ``EventStore.delete_streams``: in one transaction. The file keeps its size
        until ``reclaim_space``."""
        self._check_writable()
        names = check_stream_names(streams)

        def run(cur: apsw.Cursor) -> int:
            deleted = 0
            for name in names:
                row = cur.execute(_STREAM, (name,)).fetchone()
                cur.execute("DELETE FROM snapshots WHERE stream = ?", (name,))
                cur.execute("DELETE FROM snapshot_chunks WHERE stream = ?", (name,))
                if row is None:
                    continue
                head = verified_stream(row, name)
                (count,) = one(
                    cur, "SELECT coalesce(sum(count), 0) FROM batches WHERE stream = ?", (head.id,)
                )
                cur.execute("DELETE FROM batches WHERE stream = ?", (head.id,))
                deleted += count
                cur.execute("DELETE FROM streams WHERE id = ?", (head.id,))
                self._versions.pop(name, None)
            return deleted

        result: int = await self._commits.submit(run, 0)
        return result

    async def reclaim_space(self) -> tuple[int, int]:
        """See ``EventStore.reclaim_space``: gives the room of deleted rows back to the file
        system (``VACUUM``, then a checkpoint that truncates the WAL) and returns the size of
        the file and its WAL before and after, in bytes. Appends wait meanwhile; it needs a
        moment when no other connection reads (it waits up to ``BUSY_TIMEOUT_MS``, then
        ``StoreBusyError``)."""
        self._check_writable()
        before = self._size()
        await self._commits.alone(self._vacuum)
        self._forget_caches()
        return before, self._size()

    def _vacuum(self) -> None:
        self._writer.set_busy_timeout(BUSY_TIMEOUT_MS)
        try:
            self._writer.execute("VACUUM")
            self._wal_pages = self._truncate_wal(time.monotonic() + BUSY_TIMEOUT_MS / 1000)
        except SQLITE_ERRORS as exc:
            raise store_error(exc, self.path, self._writer.system_errno) from exc
        finally:
            self._writer.set_busy_timeout(0)

    def _truncate_wal(self, deadline: float) -> int:
        """A ``TRUNCATE`` checkpoint, tried again until ``deadline`` while another connection
        checkpoints (a checkpointer thread, this store's or another process's); the pages
        the WAL then holds (none)."""
        return checkpoint_until(self._writer, apsw.SQLITE_CHECKPOINT_TRUNCATE, deadline)

    def _size(self) -> int:
        return sum(
            os.path.getsize(name)
            for name in (self.path, self.path + "-wal")
            if os.path.exists(name)
        )

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreClosedError("the store is closed")
        if self.read_only:
            raise StoreReadOnlyError(f"{self.path} is read-only: the store was opened for reading")

    def _committed_one(self) -> None:
        """After each commit: wake subscribers, and the checkpointer when the WAL has grown."""
        if self._committed is not None:
            self._committed.set()
            self._committed = None
        if self._wal_pages is not None:
            self._checkpointer.wal_grew(self._wal_pages)
            self._wal_pages = None

    def _forget_caches(self) -> None:
        """The caches may hold rolled-back writes (or the file changed): reload them."""
        self._data_version = -1

    def _commit_event(self) -> trio.Event:
        """An event set by the next commit of this store."""
        if self._committed is None:
            self._committed = trio.Event()
        return self._committed

    def _refresh_caches(self, cur: apsw.Cursor) -> None:
        """Forget cached stream versions if another connection committed since our last
        transaction (``PRAGMA data_version`` changes exactly then)."""
        (data_version,) = one(cur, "PRAGMA data_version")
        if data_version != self._data_version:
            self._data_version = data_version
            self._versions.clear()
            (self._last_position,) = one(cur, LAST_POSITION)

    def _on_wal(self, conn: apsw.Connection, name: str, pages: int) -> int:
        # Called on whichever thread committed; ``_finish`` acts on it after the commit.
        self._wal_pages = pages
        return int(apsw.SQLITE_OK)

    # --- reading --------------------------------------------------------------------------

    async def _run_query(self, run: Callable[[apsw.Cursor], T]) -> T:
        """``run`` in one read transaction of a pooled reader, on a worker thread."""
        if self._closed:
            raise StoreClosedError("the store is closed")
        return await trio.to_thread.run_sync(self._query_here, run)

    def _query_here(self, run: Callable[[apsw.Cursor], T]) -> T:
        """``run`` in one read transaction of a pooled reader, on this thread."""
        if self._closed:
            raise StoreClosedError("the store is closed")

        def transaction(cur: apsw.Cursor) -> T:
            cur.execute("BEGIN")
            try:
                return run(cur)
            finally:
                # Only ends the read; a connection left in it is closed, not pooled.
                with contextlib.suppress(apsw.Error):
                    cur.execute("COMMIT")

        return self._readers.query(transaction)

    def _head(self, cur: apsw.Cursor, stream: str) -> StreamHead | None:
        """The verified row of ``stream``, or None when there is none; a stream the index on
        names has lost but the table holds raises ``StoreIntegrityError``."""
        row = cur.execute(_STREAM, (stream,)).fetchone()
        if row is not None:
            return verified_stream(row, stream)
        if cur.execute(_STREAM_UNINDEXED, (stream,)).fetchone() is not None:
            raise StoreIntegrityError(stream, None, "the index of stream names has lost it")
        return None

    async def read(
        self, stream: str, from_seq: int = 1, limit: int | None = None
    ) -> list[RecordedEvent]:
        """See ``EventStore.read``. Every row is verified (``verified_stream_events``); the
        rows are read from the one holding ``from_seq`` (a row's ``seq`` is its last event's)
        until enough events are read."""
        check_read(from_seq, limit)
        return await self._run_query(lambda cur: self._read(cur, stream, from_seq, limit))

    def _read(
        self, cur: apsw.Cursor, stream: str, from_seq: int = 1, limit: int | None = None
    ) -> list[RecordedEvent]:
        head = self._head(cur, stream)
        if head is None:
            return []
        rows = cur.execute(
            "SELECT position, stream, seq, count, data, crc FROM batches "
            "WHERE stream = ? AND seq >= ? ORDER BY seq",
            (head.id, from_seq),
        )
        return self._codec.decode_stream(
            stream, verified_stream_events(rows, head, from_seq, limit)
        )

    async def read_all(
        self, from_position: int = 1, limit: int | None = None
    ) -> list[RecordedEvent]:
        """See ``EventStore.read_all``. Every row and its stream's row are verified; the rows
        are read from the one holding ``from_position`` (a row's ``position`` is its last
        event's) until enough events are read."""
        check_read(from_position, limit, counted="position")

        def run(cur: apsw.Cursor) -> list[RecordedEvent]:
            heads: dict[Any, StreamHead] = {}
            rows: list[tuple[int, str, int, int, bytes]] = []
            for row in cur.execute(
                "SELECT batches.position, batches.stream, batches.seq, batches.count, "
                "batches.data, batches.crc, streams.id, streams.name, streams.version, "
                "streams.crc FROM batches LEFT JOIN streams ON streams.id = batches.stream "
                "WHERE batches.position >= ? ORDER BY batches.position",
                (from_position,),
            ):
                if limit is not None and len(rows) >= limit:
                    break
                head = heads.get(row[1])
                if head is None:
                    if row[6] is None:
                        raise StoreIntegrityError(None, row[0], "the row's stream does not exist")
                    head = heads[row[1]] = verified_stream(row[6:])
                rows.extend(
                    (position, head.name, seq, v, data)
                    for position, seq, v, data in verified_batch(row[:6], head)
                    if position >= from_position
                )
            return self._codec.decode_rows(rows if limit is None else rows[:limit])

        return await self._run_query(run)

    async def subscribe(self, from_position: int = 1) -> AsyncIterator[RecordedEvent]:
        """See ``EventStore.subscribe``. Commits of this process wake it at once; those of
        other processes are seen within ``SUBSCRIBE_POLL_SECONDS``."""
        position = max(from_position, 1)
        while True:
            committed = self._commit_event()
            batch = await self.read_all(position, SUBSCRIBE_PAGE)
            for recorded in batch:
                yield recorded
            if batch:
                position = batch[-1].position + 1
            else:
                with trio.move_on_after(SUBSCRIBE_POLL_SECONDS):
                    await committed.wait()

    async def stream_version(self, stream: str) -> int:
        """See ``EventStore.stream_version``."""
        head = await self._run_query(lambda cur: self._head(cur, stream))
        return 0 if head is None else head.version

    async def streams(self) -> list[str]:
        """See ``EventStore.streams``: in order of their row ids, given at their first
        append."""

        def run(cur: apsw.Cursor) -> list[str]:
            rows = cur.execute("SELECT id, name, version, crc FROM streams ORDER BY id")
            return [head.name for head in map(verified_stream, rows) if head.version]

        return await self._run_query(run)

    async def load_snapshot(self, stream: str) -> Snapshot | None:
        """See ``EventStore.load_snapshot``: the head and its chunks in one read transaction.
        Raises ``StoreIntegrityError`` when a row does not match its checksum or a chunk is
        missing."""

        def run(cur: apsw.Cursor) -> Snapshot | None:
            head = self._snapshot_head(cur, stream)
            if head is None:
                return None
            rows = cur.execute(
                "SELECT key, data, crc FROM snapshot_chunks WHERE stream = ? ORDER BY key",
                (stream,),
            )
            chunks = verified_chunks(rows, stream, head[2])
            return Snapshot(stream, head[0], head[1], head[3], chunks)

        return await self._run_query(run)

    async def load_snapshot_head(self, stream: str) -> Snapshot | None:
        """See ``EventStore.load_snapshot_head``: one row, checksum verified."""

        def run(cur: apsw.Cursor) -> Snapshot | None:
            head = self._snapshot_head(cur, stream)
            return None if head is None else Snapshot(stream, head[0], head[1], head[3])

        return await self._run_query(run)

    def _snapshot_head(self, cur: apsw.Cursor, stream: str) -> tuple[int, int, int, bytes] | None:
        row = cur.execute(
            "SELECT seq, schema, chunks, data, crc FROM snapshots WHERE stream = ?", (stream,)
        ).fetchone()
        return None if row is None else verified_snapshot(row, stream)

    def snapshot_reader(self, stream: str) -> SnapshotReader:
        """See ``EventStore.snapshot_reader``: each read is one indexed row, read on the
        calling thread (tens of microseconds)."""
        return _Reader(self, stream)

    async def check(self) -> list[Problem]:
        """Every problem in the file (``find_problems``): pages and indexes, every row's
        checksum, every event's owner, every stream's seqs, every snapshot. A file too
        damaged to be read through gives that one problem."""
        try:
            return await self._run_query(find_problems)
        except StoreCorruptError as exc:
            return [Problem("sqlite", str(exc))]

    async def aclose(self) -> None:
        """See ``EventStore.aclose``. Waits for an in-flight commit and the checkpointer, then
        closes every connection. Shielded: a cancellation cannot leave it half done."""
        if self._closed:
            return
        with trio.CancelScope(shield=True):
            await self._commits.drain()
            self._closed = True
            if self._committed is not None:
                self._committed.set()
            self._readers.close()
            await trio.to_thread.run_sync(self._checkpointer.close)
            self._writer.close()


class _Reader:
    """A ``SnapshotReader`` of one stream of a ``SQLiteStore``."""

    __slots__ = ("_store", "_stream")

    def __init__(self, store: SQLiteStore, stream: str) -> None:
        self._store = store
        self._stream = stream

    def chunk(self, key: str) -> bytes | None:
        """See ``SnapshotReader.chunk``."""
        stream = self._stream

        def run(cur: apsw.Cursor) -> bytes | None:
            row = cur.execute(
                "SELECT data, crc FROM snapshot_chunks WHERE stream = ? AND key = ?", (stream, key)
            ).fetchone()
            if row is None:
                return None
            if not chunk_ok(stream, key, *row):
                raise StoreIntegrityError(stream, None, CHUNK_MISMATCH)
            data: bytes = row[0]
            return data

        return self._store._query_here(run)

    def events(self) -> list[RecordedEvent]:
        """See ``SnapshotReader.events``."""
        return self._store._query_here(lambda cur: self._store._read(cur, self._stream))
