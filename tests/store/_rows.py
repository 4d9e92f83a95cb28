"""Rows written behind the store's back, as another program (or a damaged disk) would."""

from __future__ import annotations

from pathlib import Path

import apsw

from contextledger.events import DEFAULT_CODEC, MemoryPinned
from contextledger.store._schema import batch_crc, batch_data, event_crc, snapshot_crc, stream_crc


def raw_connection(path: Path) -> apsw.Connection:
    """A plain connection to the store's file, as another program would open it."""
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(5000)
    return conn


def insert_row(path: Path, stream: str, v: int, data: bytes) -> int:
    """Write an event as a batch row of one (with its checksum) behind the store's back;
    return its position."""
    conn = raw_connection(path)
    try:
        with conn:
            position = conn.execute("SELECT coalesce(max(position), 0) + 1 FROM batches").get
            row = conn.execute("SELECT id, version FROM streams WHERE name = ?", (stream,))
            stream_id, version = row.fetchone() or (None, 0)
            if stream_id is None:
                stream_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM streams").get
                conn.execute(
                    "INSERT INTO streams (id, name, version, crc) VALUES (?, ?, 0, 0)",
                    (stream_id, stream),
                )
            seq = version + 1
            conn.execute(
                "UPDATE streams SET version = ?, crc = ? WHERE id = ?",
                (seq, stream_crc(stream_id, seq, stream), stream_id),
            )
            batch = batch_data([v], [data])
            conn.execute(
                "INSERT INTO batches (position, stream, seq, count, data, crc) "
                "VALUES (?, ?, ?, 1, ?, ?)",
                (position, stream_id, seq, batch, batch_crc(stream_id, seq, position, 1, batch)),
            )
    finally:
        conn.close()
    return int(position)


def note(text: str, stream: str) -> MemoryPinned:
    """An event of ``stream``."""
    return MemoryPinned(session_id=stream, text=text)


#: Schema 3 as its release wrote it: one row per event (snapshots as today).
SCHEMA_3 = """
CREATE TABLE streams (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, version INTEGER NOT NULL,
    crc INTEGER NOT NULL
);
CREATE TABLE events (
    position INTEGER PRIMARY KEY AUTOINCREMENT, stream INTEGER NOT NULL, seq INTEGER NOT NULL,
    v INTEGER NOT NULL, data BLOB NOT NULL, crc INTEGER NOT NULL, UNIQUE (stream, seq)
);
CREATE TABLE snapshots (
    stream TEXT NOT NULL UNIQUE, seq INTEGER NOT NULL, schema INTEGER NOT NULL,
    chunks INTEGER NOT NULL, data BLOB NOT NULL, crc INTEGER NOT NULL
);
CREATE TABLE snapshot_chunks (
    stream TEXT NOT NULL, key TEXT NOT NULL, data BLOB NOT NULL, crc INTEGER NOT NULL,
    UNIQUE (stream, key)
);
PRAGMA user_version = 3;
"""


def schema_3_file(path: Path, damaged: bool) -> list[MemoryPinned]:
    """A store file as release schema 3 wrote it: stream ``s`` of two events (positions 1
    and 3), ``t`` of one (2), the last position ever given 9 (the newest events deleted),
    and a snapshot of ``s``; with ``damaged``, the row at position 3 has a flipped bit."""
    events = [note("a", "s"), note("c", "t"), note("b", "s")]
    conn = apsw.Connection(str(path))
    conn.execute(SCHEMA_3)
    streams = {"s": (1, 2), "t": (2, 1)}
    for name, (stream_id, version) in streams.items():
        crc = stream_crc(stream_id, version, name)
        conn.execute("INSERT INTO streams VALUES (?, ?, ?, ?)", (stream_id, name, version, crc))
    rows = [(1, 1, 1), (2, 2, 1), (3, 1, 2)]
    for (position, stream_id, seq), event in zip(rows, events, strict=True):
        data = DEFAULT_CODEC.encode(event)
        crc = event_crc(stream_id, seq, position, 1, data)
        if damaged and position == 3:
            data = bytes([data[0] ^ 0x10]) + data[1:]
        conn.execute(
            "INSERT INTO events VALUES (?, ?, ?, 1, ?, ?)", (position, stream_id, seq, data, crc)
        )
    conn.execute("UPDATE sqlite_sequence SET seq = 9 WHERE name = 'events'")
    head = ("s", 2, 7, 0, b"head")
    conn.execute("INSERT INTO snapshots VALUES (?, ?, ?, ?, ?, ?)", (*head, snapshot_crc(*head)))
    conn.close()
    return events
