"""An in-memory event store with the same contract as the SQLite one, for tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import trio

from contextledger.events._catalogue import Event, RecordedEvent
from contextledger.events._codec import DEFAULT_CODEC, EventCodec
from contextledger.store._errors import ConcurrencyError, StoreClosedError
from contextledger.store._protocol import ANY_VERSION, Snapshot, check_append, check_snapshot


class MemoryStore:
    """Keeps every event in lists. Events are round-tripped through the codec on append, so a
    test on this store catches an event that would not survive a real one."""

    def __init__(self, codec: EventCodec = DEFAULT_CODEC) -> None:
        self._codec = codec
        self._log: list[RecordedEvent] = []
        self._streams: dict[str, list[RecordedEvent]] = {}
        self._snapshots: dict[str, Snapshot] = {}
        self._committed = trio.Event()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the store is closed")

    async def append(
        self, stream: str, expected_version: int, events: Sequence[Event]
    ) -> list[RecordedEvent]:
        """See ``EventStore.append``."""
        self._check_open()
        check_append(stream, expected_version, events)
        if not events:
            await trio.lowlevel.checkpoint()
            return []
        existing = self._streams.get(stream, [])
        if expected_version not in (ANY_VERSION, len(existing)):
            raise ConcurrencyError(stream, expected_version, len(existing))
        codec = self._codec
        batch = codec.encode_batch(events)
        decoded = [
            codec.decode(codec.tag_of(event), v, data, stream=stream)
            for event, v, data in zip(events, batch.versions, batch.datas, strict=True)
        ]
        recorded = [
            RecordedEvent(stream, len(existing) + i + 1, len(self._log) + i + 1, e)
            for i, e in enumerate(decoded)
        ]
        self._streams.setdefault(stream, []).extend(recorded)
        self._log.extend(recorded)
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
        await trio.lowlevel.checkpoint()
        start = max(from_seq, 1) - 1
        end = None if limit is None else start + limit
        return self._streams.get(stream, [])[start:end]

    async def read_all(
        self, from_position: int = 1, limit: int | None = None
    ) -> list[RecordedEvent]:
        """See ``EventStore.read_all``."""
        self._check_open()
        await trio.lowlevel.checkpoint()
        start = max(from_position, 1) - 1
        end = None if limit is None else start + limit
        return self._log[start:end]

    async def subscribe(self, from_position: int = 1) -> AsyncIterator[RecordedEvent]:
        """See ``EventStore.subscribe``."""
        position = max(from_position, 1)
        while True:
            self._check_open()
            batch = self._log[position - 1 :]
            for recorded in batch:
                yield recorded
            position += len(batch)
            if not batch:
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
        self._snapshots[snapshot.stream] = snapshot

    async def load_snapshot(self, stream: str) -> Snapshot | None:
        """See ``EventStore.load_snapshot``."""
        self._check_open()
        await trio.lowlevel.checkpoint()
        return self._snapshots.get(stream)

    async def aclose(self) -> None:
        """See ``EventStore.aclose``."""
        self._closed = True
        self._committed.set()
