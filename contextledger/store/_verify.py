"""Verifying rows as they are read: checksums, ownership and seq order.

A bit flipped in a row, in its record header (which can turn a number into text) or in an
index entry (which can drop a row from a lookup or point it at another row) must never give
an event that differs from the one written. Each batch row read is therefore checked against
its checksum, its owner and its place: a stream's rows hold its seqs from the first one
asked for, without a gap or an overlap, up to the version recorded in its row. Anything else
raises ``StoreIntegrityError`` naming the stream and the row's positions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from contextledger.store._errors import StoreIntegrityError
from contextledger.store._schema import (
    batch_crc,
    chunk_crc,
    snapshot_crc,
    split_batch,
    stream_crc,
)

CHUNK_MISMATCH = "a snapshot chunk's row does not match its checksum"
#: A stream row as read: id, name, version, crc.
StreamRow = tuple[Any, Any, Any, Any]
#: A batch row as read: its last event's position, stream id, its last event's seq, its
#: number of events, data, crc.
BatchRow = tuple[Any, Any, Any, Any, Any, Any]
#: An event as verified: position, seq, schema version, bytes.
StoredEvent = tuple[int, int, int, bytes]


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


def batch_start(row: BatchRow) -> tuple[int | None, int | None]:
    """The position and seq of a batch row's first event, as far as its (maybe damaged)
    values tell: the last ones when its count is not a plausible one."""
    position, _, seq, count = row[:4]
    if not all(type(x) is int for x in (position, seq, count)):
        return (position if type(position) is int else None), None
    if not 0 < count <= min(position, seq):
        return position, seq
    return position - count + 1, seq - count + 1


def verified_batch(row: BatchRow, head: StreamHead) -> list[StoredEvent]:
    """The events of a batch row of stream ``head``; raises ``StoreIntegrityError`` when its
    checksum does not match or it is another stream's."""
    position, stream_id, seq, count, data, crc = row
    ints = all(type(x) is int for x in (position, stream_id, seq, count, crc))
    if not (
        ints
        and type(data) is bytes
        and count > 0
        and crc == batch_crc(stream_id, seq, position, count, data)
    ):
        start, _ = batch_start(row)
        last = position if type(position) is int else None
        raise StoreIntegrityError(
            head.name, start, "the batch's row does not match its checksum", last
        )
    first: int = position - count + 1
    if stream_id != head.id or not count <= seq <= head.version:
        raise StoreIntegrityError(
            head.name,
            first,
            f"a row of stream id {stream_id} at seqs {seq - count + 1}-{seq} was read",
            position,
        )
    split = split_batch(data, count)
    if split is None:
        raise StoreIntegrityError(
            head.name, first, f"the row does not hold its {count} events", position
        )
    versions, datas = split
    positions, seqs = range(first, position + 1), range(seq - count + 1, seq + 1)
    return list(zip(positions, seqs, versions, datas, strict=True))


def verified_stream_events(
    rows: Iterable[BatchRow], head: StreamHead, from_seq: int, limit: int | None
) -> list[StoredEvent]:
    """The events of a read of stream ``head`` from ``from_seq`` (at most ``limit``), from
    the batch rows holding them, verified: each row's checksum and owner, and their seqs
    exactly those the stream holds there (the first row may begin before ``from_seq``)."""
    first = max(from_seq, 1)
    last = head.version if limit is None else min(head.version, first + limit - 1)
    out: list[StoredEvent] = []
    expected = first
    for row in rows:
        if expected > last:
            break
        events = verified_batch(row, head)
        begins, ends = events[0][1], events[-1][1]
        if begins > expected or ends < expected or (out and begins != expected):
            held = f"where seq {expected} belongs" if begins > expected else "twice"
            raise StoreIntegrityError(
                head.name, events[0][0], f"seqs {begins}-{ends} were read {held}", events[-1][0]
            )
        out.extend(events[expected - begins : last - begins + 1])
        expected = out[-1][1] + 1
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
