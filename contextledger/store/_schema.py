"""The SQLite store's tables, their checksums, and opening a file of an older schema.

Events are stored in batches: one row per ``append`` of a stream (``batches``), holding its
events' schema versions and lengths, then their bytes, one after the other (``batch_data``),
keyed by the position of its last event and indexed by its stream and the seq of its last
event, so that a read from any position or seq finds its first row with one lookup. A batch
of 1,000 events is then one row in two b-trees instead of 1,000 rows in each.

Every row carries a CRC-32 of its contents (``crc``): a batch row of its stream id, last
seq, last position, number of events and bytes; a stream row of its id, version (the seq of
its last event) and name; a snapshot row of its stream, seq, schema, number of chunks and
bytes; a snapshot chunk of its stream, key and bytes. CRC-32 detects every single-bit flip,
and every burst of up to 32 bits, in what it covers, however long. It is computed by zlib-ng
(``zlib_ng.crc32``: the polynomial and values of ``zlib.crc32``, which wrote the files of
earlier releases, so they verify unchanged), which folds with the CPU's carry-less
multiply or CRC instructions: about 0.1 us for 660 bytes, against 0.5 us for the
table-driven ``zlib``, and one call per batch instead of two per event.
Reads verify the rows they return (``_verify``); ``contextledger check`` verifies them all.

Schema versions (``PRAGMA user_version``):

- 1: events, streams and snapshots without checksums.
- 2: checksums on every row, each stream's version in its row (so a read knows where the
  stream ends), positions never given twice (``AUTOINCREMENT``: deleting the newest
  sessions does not hand their positions to new events), and snapshots in a rowid table (a
  large snapshot no longer slows reading the others). A version-1 file is migrated when
  it is first opened for writing: its rows get their checksums and its snapshots, only a
  cache, are dropped.
- 3: a snapshot is a head row and chunk rows (``snapshot_chunks``, one per key), so that
  saving one writes only the chunks that changed; the head counts its chunks. A file of
  version 1 or 2 is migrated when first opened for writing; its snapshots are dropped.
- 4: events in batch rows (``batches``) instead of a row each (``events``). A file of an
  older version is migrated when first opened for writing: each event row becomes a batch
  of one, keeping its position and seq; a row that did not match its checksum gets a batch
  checksum that no row matches (-1), so its damage is still found.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any, Final

import apsw
import structlog
from zlib_ng.zlib_ng import crc32

from contextledger.events._codec import EncodedBatch
from contextledger.store._errors import StoreSchemaError

SCHEMA_VERSION: Final = 4
#: The page size of a new file. A batch row of 1,000 events (about 670 kB) spans many
#: overflow pages, and SQLite's work in writing one (the WAL frame and checksum of each page,
#: then copying each into the database) goes by pages: at 16 KiB instead of the default 4 KiB
#: it costs 1.4 us an event of CPU instead of 2.4 (64 KiB: 0.9, but every read of a small row
#: then reads 64 KiB). A file keeps the page size it was created with.
PAGE_SIZE: Final = 16_384

_STREAMS: Final = """
CREATE TABLE streams (
    id      INTEGER PRIMARY KEY,
    name    TEXT    NOT NULL UNIQUE,
    version INTEGER NOT NULL,
    crc     INTEGER NOT NULL
);
"""
#: A batch's ``position`` and ``seq`` are its last event's; ``AUTOINCREMENT`` keeps the last
#: position ever given (in ``sqlite_sequence``), so that deleting the newest sessions does
#: not hand their positions to new events.
_BATCHES: Final = """
CREATE TABLE batches (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    stream   INTEGER NOT NULL,
    seq      INTEGER NOT NULL,
    count    INTEGER NOT NULL,
    data     BLOB    NOT NULL,
    crc      INTEGER NOT NULL,
    UNIQUE (stream, seq)
);
"""
#: The tables of events and streams (``_SNAPSHOTS`` completes a store).
TABLES: Final = _STREAMS + _BATCHES
#: The events table of schemas 2 and 3, one row per event.
_EVENTS_3: Final = """
CREATE TABLE events (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    stream   INTEGER NOT NULL,
    seq      INTEGER NOT NULL,
    v        INTEGER NOT NULL,
    data     BLOB    NOT NULL,
    crc      INTEGER NOT NULL,
    UNIQUE (stream, seq)
);
"""
_SNAPSHOTS: Final = """
CREATE TABLE snapshots (
    stream TEXT    NOT NULL UNIQUE,
    seq    INTEGER NOT NULL,
    schema INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    data   BLOB    NOT NULL,
    crc    INTEGER NOT NULL
);
CREATE TABLE snapshot_chunks (
    stream TEXT NOT NULL,
    key    TEXT NOT NULL,
    data   BLOB NOT NULL,
    crc    INTEGER NOT NULL,
    UNIQUE (stream, key)
);
"""
INSERT_BATCH: Final = (
    "INSERT INTO batches (position, stream, seq, count, data, crc) VALUES (?, ?, ?, ?, ?, ?)"
)
#: Schema 1 to 3: checksums, stream versions (then schema 3's snapshot tables).
_MIGRATE_FROM_1: Final = (
    """
ALTER TABLE events RENAME TO events_1;
ALTER TABLE streams RENAME TO streams_1;
DROP TABLE snapshots;
"""
    + _STREAMS
    + _EVENTS_3
    + """
INSERT INTO events (position, stream, seq, v, data, crc)
    SELECT position, stream, seq, v, data, event_crc(stream, seq, position, v, data)
    FROM events_1 ORDER BY position;
INSERT INTO streams (id, name, version, crc)
    SELECT id, name, version, stream_crc(id, version, name) FROM (
        SELECT id, name, (SELECT coalesce(max(seq), 0) FROM events_1 WHERE stream = id) AS version
        FROM streams_1
    );
DROP TABLE events_1;
DROP TABLE streams_1;
"""
    + _SNAPSHOTS
)
#: Schema 2 to 3: chunked snapshots.
_MIGRATE_FROM_2: Final = "DROP TABLE snapshots;" + _SNAPSHOTS
#: Schema 3 to 4: each event row a batch of one, and the last position ever given kept.
_MIGRATE_FROM_3: Final = (
    _BATCHES
    + """
INSERT INTO batches (position, stream, seq, count, data, crc)
    SELECT position, stream, seq, 1, batch_of_one(stream, seq, position, v, data, crc),
        batch_of_one_crc(stream, seq, position, v, data, crc)
    FROM events ORDER BY position;
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'batches', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'batches');
UPDATE sqlite_sequence SET seq = max(seq, (
    SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'events'
)) WHERE name = 'batches';
DROP TABLE events;
"""
)
#: The last position ever given: it stays when the newest events are deleted, so positions
#: are never given twice (``AUTOINCREMENT`` keeps it in ``sqlite_sequence``).
LAST_POSITION: Final = "SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'batches'"

#: Bytes of a batch row's head for each of its events: its schema version and length.
BATCH_HEAD_BYTES: Final = 8

_ROW_HEAD: Final = struct.Struct("<qqqq")
_PAIR: Final = struct.Struct("<qq")
_TRIPLE: Final = struct.Struct("<qqq")

_log = structlog.get_logger("contextledger.store._schema")


def event_crc(stream_id: int, seq: int, position: int, v: int, data: bytes) -> int:
    """The checksum of an event row of schemas 2 and 3 (one event a row)."""
    return crc32(data, crc32(_ROW_HEAD.pack(stream_id, seq, position, v)))


def batch_data(versions: Sequence[int], datas: Sequence[bytes]) -> bytes:
    """The bytes of a batch row: each event's schema version and length (little-endian
    unsigned 32-bit), then the events' bytes one after the other."""
    head = struct.pack(_batch_head(len(datas)), *versions, *map(len, datas))
    # One join: ``head + b"".join(datas)`` copies the bytes twice, 15 times as slow at 670 kB.
    return b"".join([head, *datas])


def batch_row_data(batch: EncodedBatch) -> bytearray:
    """The bytes of a batch row (the same as ``batch_data``'s) of events encoded with
    ``BATCH_HEAD_BYTES`` reserved for each (``EventCodec.encode_batch``): the head is written
    into that room, and the events' bytes are not copied again."""
    head = _batch_head(len(batch.versions))
    struct.pack_into(head, batch.data, 0, *batch.versions, *batch.lengths)
    return batch.data


def _batch_head(count: int) -> str:
    """The ``struct`` format of the head of a batch row of ``count`` events."""
    return f"<{2 * count}I"


def split_batch(data: bytes, count: int) -> tuple[tuple[int, ...], list[bytes]] | None:
    """The schema versions and bytes of the ``count`` events in a batch row's ``data``, or
    None when ``data`` cannot hold them (its lengths do not add up)."""
    head = BATCH_HEAD_BYTES * count
    if count < 1 or len(data) < head:
        return None
    fields = struct.unpack_from(_batch_head(count), data)
    lengths = fields[count:]
    if head + sum(lengths) != len(data):
        return None
    ends = list(accumulate(lengths, initial=head))
    return fields[:count], list(map(data.__getitem__, map(slice, ends, ends[1:])))


def batch_crc(stream_id: int, seq: int, position: int, count: int, data: bytes | bytearray) -> int:
    """The checksum of a batch row (``seq`` and ``position`` its last event's)."""
    return crc32(data, crc32(_ROW_HEAD.pack(stream_id, seq, position, count)))


def stream_crc(stream_id: int, version: int, name: str) -> int:
    """The checksum of a stream row."""
    return crc32(name.encode(), crc32(_PAIR.pack(stream_id, version)))


def snapshot_crc(stream: str, seq: int, schema: int, chunks: int, data: bytes) -> int:
    """The checksum of a snapshot's head row."""
    head = crc32(stream.encode(), crc32(_TRIPLE.pack(seq, schema, chunks)))
    return crc32(data, head)


def chunk_crc(stream: str, key: str, data: bytes) -> int:
    """The checksum of a snapshot chunk row (the names' lengths go first, so that another
    split of the same characters cannot match)."""
    names = stream.encode(), key.encode()
    head = crc32(b"".join(names), crc32(_PAIR.pack(*map(len, names))))
    return crc32(data, head)


def one(cur: apsw.Cursor, sql: str, args: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    """The single row ``sql`` returns (read to the end, so the statement holds no lock)."""
    (row,) = cur.execute(sql, args).fetchall()
    return tuple(row)


def check_schema(conn: apsw.Connection, path: str, create: bool, writable: bool) -> None:
    """Create the tables in a new file (when ``create``) and migrate a file of an older schema
    (when ``writable``); refuse, changing nothing, a file that is another application's, was
    written under another store schema, or is of an older schema and cannot be written.

    Creating and migrating happen under the write lock, after a second look: another process
    opening the same new or old file at the same moment has then done it already."""
    cur = conn.cursor()
    (found,) = one(cur, "PRAGMA user_version")
    if found == SCHEMA_VERSION:
        return
    if writable and (found in _MIGRATIONS or (found == 0 and create)):
        # Takes effect only when this creates the file (before its first write, so before
        # the transaction); nothing for a file that exists.
        cur.execute(f"PRAGMA page_size={PAGE_SIZE}")
        cur.execute("BEGIN IMMEDIATE")
        try:
            found = _create_or_migrate(conn, path, create)
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")
        if found == SCHEMA_VERSION:
            return
    (tables,) = one(cur, "SELECT count(*) FROM sqlite_master")
    if found == 0:
        what = "has no contextledger events" if tables == 0 else "is not a contextledger store"
        raise StoreSchemaError(f"{path} {what}")
    if found in _MIGRATIONS:
        raise StoreSchemaError(
            f"{path} has store schema {found} and cannot be written: open it writable once "
            f"to bring it to schema {SCHEMA_VERSION}"
        )
    raise StoreSchemaError(f"{path} has store schema {found}; this release reads {SCHEMA_VERSION}")


def _create_or_migrate(conn: apsw.Connection, path: str, create: bool) -> int:
    """Inside the write transaction: create or migrate the file if it still needs it; the
    schema version it then has (unchanged when it is not ours to change)."""
    cur = conn.cursor()
    (found,) = one(cur, "PRAGMA user_version")
    (tables,) = one(cur, "SELECT count(*) FROM sqlite_master")
    if found == 0 and tables == 0 and create:
        cur.execute(TABLES + _SNAPSHOTS)
    elif found in _MIGRATIONS:
        _migrate(conn, path, found)
    else:
        return int(found)
    cur.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    return SCHEMA_VERSION


def _sql(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` as a SQL function (apsw types their arguments loosely)."""
    return lambda *args: function(*args)


def _event_row_ok(
    stream_id: object, seq: object, position: object, v: object, data: object, crc: object
) -> bool:
    """Whether a schema-3 event row matches its checksum (its values of the types written)."""
    return (
        all(type(x) is int for x in (stream_id, seq, position, v, crc))
        and type(data) is bytes
        and 0 <= v < 1 << 32  # type: ignore[operator]
        and crc == event_crc(stream_id, seq, position, v, data)  # type: ignore[arg-type]
    )


def _batch_of_one(stream_id: Any, seq: Any, position: Any, v: Any, data: Any, crc: Any) -> bytes:
    """An event row's bytes as a batch of one (an empty event when the row is damaged)."""
    if _event_row_ok(stream_id, seq, position, v, data, crc):
        return batch_data([v], [data])
    return batch_data([0], [b""])


def _batch_of_one_crc(stream_id: Any, seq: Any, position: Any, v: Any, data: Any, crc: Any) -> int:
    """The checksum of an event row turned into a batch of one; -1, which no row matches,
    when the event row did not match its own, so that the migration does not hide it."""
    if not _event_row_ok(stream_id, seq, position, v, data, crc):
        return -1
    return batch_crc(stream_id, seq, position, 1, batch_data([v], [data]))


#: The script bringing a file of each older schema to the next: 1 and 2 to 3, 3 to 4.
_MIGRATIONS: Final = {1: (_MIGRATE_FROM_1, 3), 2: (_MIGRATE_FROM_2, 3), 3: (_MIGRATE_FROM_3, 4)}


def _migrate(conn: apsw.Connection, path: str, found: int) -> None:
    """Bring a file of schema ``found`` to ``SCHEMA_VERSION`` (inside the caller's transaction)."""
    functions: dict[str, tuple[Callable[..., Any], int]] = {
        "event_crc": (event_crc, 5),
        "stream_crc": (stream_crc, 3),
        "batch_of_one": (_batch_of_one, 6),
        "batch_of_one_crc": (_batch_of_one_crc, 6),
    }
    for name, (function, args) in functions.items():
        conn.create_scalar_function(name, _sql(function), args, deterministic=True)
    cur = conn.cursor()
    (events,) = one(cur, "SELECT count(*) FROM events")
    schema = found
    while schema < SCHEMA_VERSION:
        script, schema = _MIGRATIONS[schema]
        cur.execute(script)
    _log.info(
        "store schema migrated", path=path, found=found, current=SCHEMA_VERSION, events=events
    )
