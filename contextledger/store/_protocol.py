"""The ``EventStore`` contract every backend implements.

A store holds named streams (one per session) of events. Each stream has a version: the
number of events in it. ``append`` is optimistic: it names the version it expects and fails
with ``ConcurrencyError``, writing nothing, when another writer got there first. Every event
also gets a global ``position`` in commit order (gap-free until streams are deleted; never
given twice), which ``read_all`` and ``subscribe`` follow. Snapshots of a stream's
projection are stored beside it so that a long session loads from its latest snapshot plus
the events after it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Final, Protocol

import msgspec

from contextledger.events._catalogue import Event, RecordedEvent
from contextledger.store._errors import StoreArgumentError

#: Pass as ``expected_version`` to append without a concurrency check.
ANY_VERSION: Final = -1


class Snapshot(msgspec.Struct, frozen=True):
    """A projection of ``stream`` as of ``seq``, encoded by its owner under ``schema``."""

    stream: str
    seq: int
    schema: int
    data: bytes


def check_append(stream: object, expected_version: object, events: object) -> None:
    """Raise ``StoreArgumentError`` unless ``stream`` is text, ``expected_version`` an int
    (not a bool) and ``events`` a list or tuple: what every backend's ``append`` checks
    first. (The events themselves are checked by encoding them, ``EventEncodeError``.)"""
    if type(stream) is not str:
        raise StoreArgumentError(f"a stream name is text, not {type(stream).__name__}")
    if type(expected_version) is not int:
        kind = type(expected_version).__name__
        raise StoreArgumentError(f"an expected version is an int, not {kind}")
    if not isinstance(events, list | tuple):
        raise StoreArgumentError(f"events come as a list, not {type(events).__name__}")


def check_snapshot(snapshot: object) -> None:
    """Raise ``StoreArgumentError`` unless ``snapshot`` is a ``Snapshot`` whose fields have
    their types (msgspec structs check none when built)."""
    if type(snapshot) is not Snapshot:
        raise StoreArgumentError(f"a snapshot is a Snapshot, not {type(snapshot).__name__}")
    fields = (snapshot.stream, snapshot.seq, snapshot.schema, snapshot.data)
    if tuple(map(type, fields)) != (str, int, int, bytes):
        kinds = ", ".join(type(f).__name__ for f in fields)
        raise StoreArgumentError(f"a snapshot holds (str, int, int, bytes), not ({kinds})")


class EventStore(Protocol):
    """An append-only store of event streams. All methods are trio-async."""

    async def append(
        self, stream: str, expected_version: int, events: Sequence[Event]
    ) -> list[RecordedEvent]:
        """Append ``events`` to ``stream`` atomically and return them as recorded.

        Returns only after the events are committed. Raises ``StoreArgumentError`` for
        wrongly typed arguments (``check_append``) and ``ConcurrencyError`` (nothing
        written) when the stream's version is not ``expected_version`` (``ANY_VERSION`` skips
        the check). An empty ``events`` writes nothing, checks nothing and returns ``[]``.
        Once called, an append runs to completion: a cancellation arriving meanwhile takes
        effect at the caller's next checkpoint, so a returned result is always committed and
        a raised error always means nothing was written.
        """
        ...

    async def read(
        self, stream: str, from_seq: int = 1, limit: int | None = None
    ) -> list[RecordedEvent]:
        """The events of ``stream`` with ``seq >= from_seq``, in order (at most ``limit``)."""
        ...

    async def read_all(
        self, from_position: int = 1, limit: int | None = None
    ) -> list[RecordedEvent]:
        """Every stream's events with ``position >= from_position``, in commit order."""
        ...

    def subscribe(self, from_position: int = 1) -> AsyncIterator[RecordedEvent]:
        """Yield every event from ``from_position`` on, then each new one as it commits."""
        ...

    async def stream_version(self, stream: str) -> int:
        """The number of events in ``stream`` (0 when it does not exist)."""
        ...

    async def streams(self) -> list[str]:
        """The names of all streams, in order of their first event."""
        ...

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        """Store ``snapshot``, replacing an older one of the same stream; a snapshot whose
        fields are wrongly typed raises ``StoreArgumentError`` (``check_snapshot``)."""
        ...

    async def load_snapshot(self, stream: str) -> Snapshot | None:
        """The latest snapshot of ``stream``, if any."""
        ...

    async def aclose(self) -> None:
        """Release the store's resources; later calls raise ``StoreClosedError``."""
        ...
