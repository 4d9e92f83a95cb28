"""Verifying rows as they are read: checksums, ownership and seq order.

A bit flipped in a row, in its record header (which can turn a number into text) or in an
index entry (which can drop a row from a lookup or point it at another row) must never give
an event that differs from the one written. Each row read is therefore checked against its
checksum, its owner and its place: a stream's rows are its seqs from the first one asked for,
without a gap, up to the version recorded in its row. Anything else raises
``StoreIntegrityError`` naming the stream and position.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from contextledger.store._errors import StoreIntegrityError
from contextledger.store._schema import chunk_crc, event_crc, snapshot_crc, stream_crc

CHUNK_MISMATCH = "a snapshot chunk's row does not match its checksum"
#: A stream row as read: id, name, version, crc.
StreamRow = tuple[Any, Any, Any, Any]
#: An event row as read: position, stream id, seq, version, data, crc.
EventRow = tuple[Any, Any, Any, Any, Any, Any]


class StreamHead(NamedTuple):
    """A verified stream row: its id, name and version (the seq of its last event)."""

    id: int
    name: str
    version: int


def verified_stream(row: StreamRow, name: str | None = None) -> StreamHead:
    """The head in stream ``row``; raises ``StoreIntegrityError`` when the row's checksum does
    not match or it is not the row of ``name`` (when given)."""
    stream_id, found, version, crc = row
    shown = name if name is not None else found if isinstance(found, str) else None
    if not (
        type(stream_id) is int
        and type(found) is str
        and type(version) is int
        and type(crc) is int
        and crc == stream_crc(stream_id, version, found)
    ):
        raise StoreIntegrityError(shown, None, "the stream's row does not match its checksum")
    if name is not None and found != name:
        raise StoreIntegrityError(name, None, f"the lookup found the row of stream {found!r}")
    return StreamHead(stream_id, found, version)


def verified_event(row: EventRow, head: StreamHead) -> tuple[int, int, int, bytes]:
    """``(position, seq, v, data)`` of an event row of stream ``head``; raises
    ``StoreIntegrityError`` when its checksum does not match or it is another stream's."""
    position, stream_id, seq, v, data, crc = row
    where = position if type(position) is int else None
    if not (
        type(position) is int
        and type(stream_id) is int
        and type(seq) is int
        and type(v) is int
        and type(data) is bytes
        and type(crc) is int
        and crc == event_crc(stream_id, seq, position, v, data)
    ):
        raise StoreIntegrityError(head.name, where, "the event's row does not match its checksum")
    if stream_id != head.id or not 0 < seq <= head.version:
        raise StoreIntegrityError(
            head.name, position, f"a row of stream id {stream_id} at seq {seq} was read"
        )
    return position, seq, v, data


def verified_stream_events(
    rows: Iterable[EventRow], head: StreamHead, from_seq: int, limit: int | None
) -> list[tuple[int, int, int, bytes]]:
    """The rows of a read of stream ``head`` from ``from_seq`` (at most ``limit``), verified:
    each row's checksum and owner, and their seqs exactly those the stream holds there."""
    first = max(from_seq, 1)
    last = head.version if limit is None else min(head.version, first + limit - 1)
    out = []
    expected = first
    for row in rows:
        position, seq, v, data = verified_event(row, head)
        if seq != expected:
            raise StoreIntegrityError(
                head.name, position, f"seq {seq} was read where seq {expected} belongs"
            )
        out.append((position, seq, v, data))
        expected += 1
    if expected <= last:
        raise StoreIntegrityError(
            head.name, None, f"seq {expected} of its {head.version} events cannot be found"
        )
    return out


def verified_snapshot(
    row: tuple[Any, Any, Any, Any, Any], stream: str
) -> tuple[int, int, int, bytes]:
    """``(seq, schema, chunks, data)`` of a snapshot's head row of ``stream``, checksum
    verified."""
    seq, schema, chunks, data, crc = row
    if not (
        type(seq) is int
        and type(schema) is int
        and type(chunks) is int
        and type(data) is bytes
        and type(crc) is int
        and crc == snapshot_crc(stream, seq, schema, chunks, data)
    ):
        raise StoreIntegrityError(stream, None, "the snapshot's row does not match its checksum")
    return seq, schema, chunks, data


def chunk_ok(stream: object, key: object, data: object, crc: object) -> bool:
    """Whether a snapshot chunk row matches its checksum."""
    return (
        type(stream) is str
        and type(key) is str
        and type(data) is bytes
        and type(crc) is int
        and crc == chunk_crc(stream, key, data)
    )


def verified_chunks(
    rows: Iterable[tuple[Any, Any, Any]], stream: str, count: int
) -> dict[str, bytes]:
    """The chunks of ``stream``'s snapshot from its ``(key, data, crc)`` rows, each checksum
    verified, and exactly the ``count`` its head row records."""
    chunks: dict[str, bytes] = {}
    for key, data, crc in rows:
        if not chunk_ok(stream, key, data, crc):
            raise StoreIntegrityError(stream, None, CHUNK_MISMATCH)
        chunks[key] = data
    if len(chunks) != count:
        raise StoreIntegrityError(
            stream, None, f"the snapshot has {len(chunks)} of its {count} chunks"
        )
    return chunks
