"""An in-memory event store with the same contract as the SQLite one, for tests."""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator, Sequence

import trio

from contextledger.events._catalogue import Event, RecordedEvent
from contextledger.events._codec import DEFAULT_CODEC, EventCodec
from contextledger.store._errors import SnapshotBaseError, StoreClosedError
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


def _position(recorded: RecordedEvent) -> int:
    return recorded.position


class MemoryStore:
    """Keeps every event in lists. Events are round-tripped through the codec on append, so a
    test on this store catches an event that would not survive a real one."""

    def __init__(self, codec: EventCodec = DEFAULT_CODEC) -> None:
        self._codec = codec
        # Every event in position order; positions have gaps where streams were deleted.
        self._log: list[RecordedEvent] = []
        self._last_position = 0
        self._streams: dict[str, list[RecordedEvent]] = {}
        # Each stream's encoded bytes, what ``reclaim_space`` reports.
        self._nbytes: dict[str, int] = {}
        self._snapshots: dict[str, Snapshot] = {}
        self._chunks: dict[str, dict[str, bytes]] = {}
        self._committed = trio.Event()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the store is closed")

    async def append(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[Event],
        *,
        expected_position: int | None = None,
    ) -> list[RecordedEvent]:
        """See ``EventStore.append``."""
        self._check_open()
        check_append(stream, expected_version, events, expected_position)
        if not events:
            await trio.lowlevel.checkpoint()
            return []
        existing = self._streams.get(stream, [])
        end = existing[-1].position if existing else 0
        check_expected(stream, expected_version, expected_position, len(existing), end)
        codec = self._codec
        batch = codec.encode_batch(events)
        decoded = [
            codec.decode(codec.tag_of(event), v, data, stream=stream)
            for event, v, data in zip(events, batch.versions, batch.datas(), strict=True)
        ]
        last = self._last_position
        recorded = [
            RecordedEvent(stream, len(existing) + i + 1, last + i + 1, e)
            for i, e in enumerate(decoded)
        ]
        self._streams.setdefault(stream, []).extend(recorded)
        self._nbytes[stream] = self._nbytes.get(stream, 0) + batch.nbytes
        self._log.extend(recorded)
        self._last_position = last + len(recorded)
        self._committed.set()
        self._committed = trio.Event()
        # Written: a cancellation takes effect at the caller's next checkpoint, as with SQLite.
        await trio.lowlevel.cancel_shielded_checkpoint()
        return recorded

    async def read(
        self, stream: str, from_seq: int = 1, limit: int | None = None
    ) -> list[RecordedEvent]:
        """See ``EventStore.read``."""
        self._check_open()
        check_read(from_seq, limit)
        await trio.lowlevel.checkpoint()
        start = from_seq - 1
        end = None if limit is None else start + limit
        return self._streams.get(stream, [])[start:end]

    def _from(self, position: int) -> int:
        """The index in ``_log`` of the first event at ``position`` or after."""
        return bisect.bisect_left(self._log, position, key=_position)

    async def read_all(
        self, from_position: int = 1, limit: int | None = None
    ) -> list[RecordedEvent]:
        """See ``EventStore.read_all``."""
        self._check_open()
        check_read(from_position, limit, counted="position")
        await trio.lowlevel.checkpoint()
        start = self._from(from_position)
        end = None if limit is None else start + limit
        return self._log[start:end]

    async def subscribe(self, from_position: int = 1) -> AsyncIterator[RecordedEvent]:
        """See ``EventStore.subscribe``."""
        position = max(from_position, 1)
        while True:
            self._check_open()
            batch = self._log[self._from(position) :]
            for recorded in batch:
                yield recorded
            if batch:
                position = batch[-1].position + 1
            else:
                await self._committed.wait()

    async def stream_version(self, stream: str) -> int:
        """See ``EventStore.stream_version``."""
        self._check_open()
        await trio.lowlevel.checkpoint()
        return len(self._streams.get(stream, ()))

    async def streams(self) -> list[str]:
        """See ``EventStore.streams``."""
        self._check_open()
        await trio.lowlevel.checkpoint()
        return list(self._streams)

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        """See ``EventStore.save_snapshot``."""
        self._check_open()
        check_snapshot(snapshot)
        await trio.lowlevel.checkpoint()
        stored = self._snapshots.get(snapshot.stream)
        problem = snapshot_base_error(
            snapshot, None if stored is None else (stored.seq, stored.schema)
        )
        if problem is not None:
            raise SnapshotBaseError(f"snapshot of {snapshot.stream!r} not saved: {problem}")
        head = Snapshot(snapshot.stream, snapshot.seq, snapshot.schema, snapshot.data)
        self._snapshots[snapshot.stream] = head
        if not snapshot.base:
            self._chunks[snapshot.stream] = {}
        self._chunks[snapshot.stream].update(snapshot.chunks)

    async def load_snapshot(self, stream: str) -> Snapshot | None:
        """See ``EventStore.load_snapshot``."""
        self._check_open()
        await trio.lowlevel.checkpoint()
        head = self._snapshots.get(stream)
        if head is None:
            return None
        chunks = dict(sorted(self._chunks[stream].items()))
        return Snapshot(stream, head.seq, head.schema, head.data, chunks)

    async def load_snapshot_head(self, stream: str) -> Snapshot | None:
        """See ``EventStore.load_snapshot_head``."""
        self._check_open()
        await trio.lowlevel.checkpoint()
        return self._snapshots.get(stream)

    def snapshot_reader(self, stream: str) -> SnapshotReader:
        """See ``EventStore.snapshot_reader``."""
        return _Reader(self, stream)

    async def delete_streams(self, streams: Sequence[str]) -> int:
        """See ``EventStore.delete_streams``."""
        self._check_open()
        names = set(check_stream_names(streams))
        await trio.lowlevel.checkpoint()
        deleted = 0
        for name in names:
            self._snapshots.pop(name, None)
            self._chunks.pop(name, None)
            self._nbytes.pop(name, None)
            deleted += len(self._streams.pop(name, ()))
        if deleted:
            self._log = [r for r in self._log if r.stream not in names]
        return deleted

    async def reclaim_space(self) -> tuple[int, int]:
        """See ``EventStore.reclaim_space``: the encoded bytes of the events and snapshots
        held, twice (a deleted stream's memory is given back at once)."""
        self._check_open()
        await trio.lowlevel.checkpoint()
        held = sum(self._nbytes.values()) + sum(
            len(s.data) + sum(map(len, self._chunks[name].values()))
            for name, s in self._snapshots.items()
        )
        return held, held

    async def aclose(self) -> None:
        """See ``EventStore.aclose``."""
        self._closed = True
        self._committed.set()


class _Reader:
    """A ``SnapshotReader`` of one stream of a ``MemoryStore``."""

    __slots__ = ("_store", "_stream")

    def __init__(self, store: MemoryStore, stream: str) -> None:
        self._store = store
        self._stream = stream

    def chunk(self, key: str) -> bytes | None:
        """See ``SnapshotReader.chunk``."""
        self._store._check_open()
        return self._store._chunks.get(self._stream, {}).get(key)

    def events(self) -> list[RecordedEvent]:
        """See ``SnapshotReader.events``."""
        self._store._check_open()
        return list(self._store._streams.get(self._stream, ()))
