"""The ``EventStore`` contract every backend implements.

A store holds named streams (one per session) of events. Each stream has a version: the
number of events in it. ``append`` is optimistic: it names the version it expects and fails
with ``ConcurrencyError``, writing nothing, when another writer got there first. Every event
also gets a global ``position`` in commit order (gap-free until streams are deleted; never
given twice), which ``read_all`` and ``subscribe`` follow. Snapshots of a stream's
projection are stored beside it so that a long session loads from its latest snapshot plus
the events after it; a snapshot is a head and named chunks, and saving one writes only the
chunks that changed since the snapshot it builds on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Final, Protocol

import msgspec

from contextledger.events._catalogue import Event, RecordedEvent
from contextledger.store._errors import ConcurrencyError, StoreArgumentError

#: Pass as ``expected_version`` to append without a concurrency check.
ANY_VERSION: Final = -1


class Snapshot(msgspec.Struct, frozen=True):
    """A projection of ``stream`` as of ``seq``, encoded by its owner under ``schema``: its
    head ``data`` and its ``chunks``, parts named by a key (``History`` keeps one per
    message, keyed by message id).

    Saved with ``base`` 0, it replaces the stored snapshot and every chunk of it. Saved with
    a ``base``, it builds on the stored snapshot, which must be of the same schema at a seq
    from ``base`` to ``seq``: its chunks replace the stored ones of the same key and every
    other stored chunk is kept, so it holds only what changed after ``base``. Loaded, a
    snapshot holds every chunk, in key order, and ``base`` 0.
    """

    stream: str
    seq: int
    schema: int
    data: bytes
    chunks: dict[str, bytes] = {}
    base: int = 0


def check_stream_names(streams: object) -> list[str]:
    """``streams`` as a list; raise ``StoreArgumentError`` unless it is a list or tuple of
    text."""
    if not isinstance(streams, list | tuple) or not all(type(s) is str for s in streams):
        raise StoreArgumentError("stream names come as a list of text")
    return list(streams)


def check_append(
    stream: object, expected_version: object, events: object, expected_position: object = None
) -> None:
    """Raise ``StoreArgumentError`` unless ``stream`` is text, ``expected_version`` an int
    (not a bool), ``events`` a list or tuple and ``expected_position`` None or an int of 0 or
    more: what every backend's ``append`` checks first. (The events themselves are checked by
    encoding them, ``EventEncodeError``.)"""
    if type(stream) is not str:
        raise StoreArgumentError(f"a stream name is text, not {type(stream).__name__}")
    if type(expected_version) is not int:
        kind = type(expected_version).__name__
        raise StoreArgumentError(f"an expected version is an int, not {kind}")
    if not isinstance(events, list | tuple):
        raise StoreArgumentError(f"events come as a list, not {type(events).__name__}")
    if expected_position is not None and type(expected_position) is not int:
        kind = type(expected_position).__name__
        raise StoreArgumentError(f"an expected position is an int or None, not {kind}")
    if expected_position is not None and expected_position < 0:
        raise StoreArgumentError(f"an expected position is 0 or more, not {expected_position}")


def check_read(start: object, limit: object, *, counted: str = "seq") -> None:
    """Raise ``StoreArgumentError`` unless ``start`` (the first ``counted``, from 1) is an
    int of 1 or more and ``limit`` None or an int of 0 or more: what every backend's
    ``read`` and ``read_all`` check first."""
    if type(start) is not int or start < 1:
        raise StoreArgumentError(f"reads start at a {counted} of 1 or more, not {start!r}")
    if limit is not None and (type(limit) is not int or limit < 0):
        raise StoreArgumentError(f"a read's limit is None or an int of 0 or more, not {limit!r}")


def check_expected(
    stream: str,
    expected_version: int,
    expected_position: int | None,
    version: int,
    position: int | None,
) -> None:
    """Raise ``ConcurrencyError`` unless ``stream``, at ``version`` with its last event at
    ``position`` (0 when it has none), is where an append expects it: at
    ``expected_version`` (unless ``ANY_VERSION``) and ending at ``expected_position``
    (unless None; ``position`` may be None only then)."""
    if expected_version not in (ANY_VERSION, version):
        raise ConcurrencyError(stream, expected_version, version, expected_position)
    if expected_position is not None and expected_position != position:
        raise ConcurrencyError(stream, expected_version, version, expected_position, position)


def check_snapshot(snapshot: object) -> None:
    """Raise ``StoreArgumentError`` unless ``snapshot`` is a ``Snapshot`` whose fields have
    their types (msgspec structs check none when built)."""
    if type(snapshot) is not Snapshot:
        raise StoreArgumentError(f"a snapshot is a Snapshot, not {type(snapshot).__name__}")
    fields = (snapshot.stream, snapshot.seq, snapshot.schema, snapshot.data, snapshot.chunks)
    if tuple(map(type, (*fields, snapshot.base))) != (str, int, int, bytes, dict, int):
        kinds = ", ".join(type(f).__name__ for f in (*fields, snapshot.base))
        raise StoreArgumentError(
            f"a snapshot holds (str, int, int, bytes, dict, int), not ({kinds})"
        )
    for key, chunk in snapshot.chunks.items():
        if type(key) is not str or type(chunk) is not bytes:
            kinds = f"{type(key).__name__}: {type(chunk).__name__}"
            raise StoreArgumentError(f"a snapshot's chunks are str: bytes, not {kinds}")
    if not 0 <= snapshot.base <= snapshot.seq:
        raise StoreArgumentError(f"a snapshot's base {snapshot.base} is not from 0 to its seq")


def snapshot_base_error(snapshot: Snapshot, stored: tuple[int, int] | None) -> str | None:
    """Why ``snapshot`` cannot be saved on top of the stored one (its ``(seq, schema)``, None
    when there is none), or None when it can: a snapshot with a ``base`` builds on a stored
    snapshot of its schema from ``base`` to its own seq."""
    if not snapshot.base:
        return None
    if stored is None:
        return f"it builds on the snapshot at seq {snapshot.base}, and none is stored"
    seq, schema = stored
    if schema != snapshot.schema or not snapshot.base <= seq <= snapshot.seq:
        return (
            f"it builds on a snapshot of schema {snapshot.schema} from seq {snapshot.base} to "
            f"{snapshot.seq}, and the stored one is of schema {schema} at seq {seq}"
        )
    return None


class SnapshotReader(Protocol):
    """Synchronous reads of one stream's snapshot and events, for a projection that reads
    its snapshot's chunks as it needs them (``History.restore``) while it is being read."""

    def chunk(self, key: str) -> bytes | None:
        """The chunk ``key`` of the stream's snapshot as stored now, None when there is
        none; raises ``StoreIntegrityError`` when it does not match its checksum."""
        ...

    def events(self) -> list[RecordedEvent]:
        """Every event of the stream, as ``EventStore.read`` gives them."""
        ...


class EventStore(Protocol):
    """An append-only store of event streams. All methods are trio-async."""

    async def append(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[Event],
        *,
        expected_position: int | None = None,
    ) -> list[RecordedEvent]:
        """Append ``events`` to ``stream`` atomically and return them as recorded.

        Returns only after the events are committed. Raises ``StoreArgumentError`` for
        wrongly typed arguments (``check_append``) and ``ConcurrencyError`` (nothing
        written) when the stream's version is not ``expected_version`` (``ANY_VERSION`` skips
        the check), or when ``expected_position`` is given and the stream's last event is
        not at that position (0: the stream has none). Positions are never given twice, so
        the position of the last event read tells that stream apart from one deleted and
        written again to the same version since (``check_expected``). An empty ``events``
        writes nothing, checks nothing and returns ``[]``.
        Once called, an append runs to completion: a cancellation arriving meanwhile takes
        effect at the caller's next checkpoint, so a returned result is always committed and
        a raised error always means nothing was written.
        """
        ...

    async def read(
        self, stream: str, from_seq: int = 1, limit: int | None = None
    ) -> list[RecordedEvent]:
        """The events of ``stream`` with ``seq >= from_seq``, in order (at most ``limit``).
        Raises ``StoreArgumentError`` for a ``from_seq`` below 1 or a negative ``limit``
        (``check_read``)."""
        ...

    async def read_all(
        self, from_position: int = 1, limit: int | None = None
    ) -> list[RecordedEvent]:
        """Every stream's events with ``position >= from_position``, in commit order (at most
        ``limit``). Raises ``StoreArgumentError`` for a ``from_position`` below 1 or a
        negative ``limit`` (``check_read``)."""
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
        """Store ``snapshot`` in one transaction: with ``base`` 0 in place of the stored one
        and all its chunks, else on top of it (see ``Snapshot``). A snapshot whose fields are
        wrongly typed raises ``StoreArgumentError`` (``check_snapshot``); one that cannot
        build on the stored snapshot raises ``SnapshotBaseError`` (``snapshot_base_error``).
        Nothing is written then."""
        ...

    async def load_snapshot(self, stream: str) -> Snapshot | None:
        """The latest snapshot of ``stream`` with every chunk, if any."""
        ...

    async def load_snapshot_head(self, stream: str) -> Snapshot | None:
        """The latest snapshot of ``stream`` without its chunks (``chunks`` empty), if any:
        they are read one by one through ``snapshot_reader``."""
        ...

    def snapshot_reader(self, stream: str) -> SnapshotReader:
        """Reads of ``stream``'s snapshot chunks and events that run on the calling thread,
        each as the store holds it at that moment."""
        ...

    async def delete_streams(self, streams: Sequence[str]) -> int:
        """Delete ``streams`` (their events and snapshots) atomically and return how many
        events went; a name that is no stream is skipped, a name that is not text raises
        ``StoreArgumentError`` with nothing deleted. Positions are never given again: the log
        keeps its order, with gaps where the streams were."""
        ...

    async def reclaim_space(self) -> tuple[int, int]:
        """Give the room of deleted streams back and return the bytes the store held before
        and after (a file store shrinks its file here)."""
        ...

    async def aclose(self) -> None:
        """Release the store's resources; later calls raise ``StoreClosedError``."""
        ...
