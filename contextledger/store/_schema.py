"""The SQLite store's tables, their checksums, and opening a file of an older schema.

Every row carries a CRC-32 of its contents (``crc``): an event row of its stream id, seq,
position, schema version and bytes; a stream row of its id, version (the seq of its last
event) and name; a snapshot row of its stream, seq, schema, number of chunks and bytes; a
snapshot chunk of its stream, key and bytes. CRC-32 detects every single-bit flip, and
every burst of up to 32 bits, in what it covers. It is computed by zlib-ng
(``zlib_ng.crc32``: the polynomial and values of ``zlib.crc32``, which wrote the files of
earlier releases, so they verify unchanged), which folds with the CPU's carry-less
multiply or CRC instructions: about 0.1 us for a typical event of 660 bytes, against 0.5 us
for the table-driven ``zlib``.
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
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from typing import Any, Final

import apsw
import structlog
from zlib_ng.zlib_ng import crc32

from contextledger.store._errors import StoreSchemaError

SCHEMA_VERSION: Final = 3

#: The tables of events and streams (``_SNAPSHOTS`` completes a store).
TABLES: Final = """
CREATE TABLE streams (
    id      INTEGER PRIMARY KEY,
    name    TEXT    NOT NULL UNIQUE,
    version INTEGER NOT NULL,
    crc     INTEGER NOT NULL
);
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
INSERT_EVENT: Final = (
    "INSERT INTO events (position, stream, seq, v, data, crc) VALUES (?, ?, ?, ?, ?, ?)"
)
_MIGRATE_FROM_1: Final = (
    """
ALTER TABLE events RENAME TO events_1;
ALTER TABLE streams RENAME TO streams_1;
DROP TABLE snapshots;
"""
    + TABLES
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
_MIGRATE_FROM_2: Final = "DROP TABLE snapshots;" + _SNAPSHOTS
#: The last position ever given: it stays when the newest events are deleted, so positions
#: are never given twice (``AUTOINCREMENT`` keeps it in ``sqlite_sequence``).
LAST_POSITION: Final = "SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'events'"

_EVENT_HEAD: Final = struct.Struct("<qqqq")
_PAIR: Final = struct.Struct("<qq")
_TRIPLE: Final = struct.Struct("<qqq")

_log = structlog.get_logger("contextledger.store._schema")


def event_crc(stream_id: int, seq: int, position: int, v: int, data: bytes) -> int:
    """The checksum of an event row."""
    return crc32(data, crc32(_EVENT_HEAD.pack(stream_id, seq, position, v)))


def event_crcs(
    stream_id: int,
    seqs: Iterable[int],
    positions: Iterable[int],
    versions: Iterable[int],
    datas: Iterable[bytes],
) -> Iterator[int]:
    """The checksums of event rows of one stream, each equal to ``event_crc`` of its row,
    computed lazily and in C (``map`` over ``struct`` and ``crc32``): no Python runs per row,
    so a batch of appends pays almost nothing for them."""
    heads = map(_EVENT_HEAD.pack, repeat(stream_id), seqs, positions, versions)
    return map(crc32, datas, map(crc32, heads))


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


def _sql(function: Callable[..., int]) -> Callable[..., Any]:
    """``function`` as a SQL function (apsw types their arguments loosely)."""
    return lambda *args: function(*args)


#: The script bringing a file of each older schema to ``SCHEMA_VERSION``.
_MIGRATIONS: Final = {1: _MIGRATE_FROM_1, 2: _MIGRATE_FROM_2}


def _migrate(conn: apsw.Connection, path: str, found: int) -> None:
    """Bring a file of schema ``found`` to ``SCHEMA_VERSION`` (inside the caller's transaction)."""
    conn.create_scalar_function("event_crc", _sql(event_crc), 5, deterministic=True)
    conn.create_scalar_function("stream_crc", _sql(stream_crc), 3, deterministic=True)
    cur = conn.cursor()
    (events,) = one(cur, "SELECT count(*) FROM events")
    cur.execute(_MIGRATIONS[found])
    _log.info(
        "store schema migrated", path=path, found=found, current=SCHEMA_VERSION, events=events
    )
