"""Rows written behind the store's back, as another program (or a damaged disk) would."""

from __future__ import annotations

from pathlib import Path

import apsw

from contextledger.store._schema import event_crc, stream_crc


def raw_connection(path: Path) -> apsw.Connection:
    """A plain connection to the store's file, as another program would open it."""
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(5000)
    return conn


def insert_row(path: Path, stream: str, v: int, data: bytes) -> int:
    """Write an event row (with its checksum) behind the store's back; return its
    position."""
    conn = raw_connection(path)
    try:
        with conn:
            position = conn.execute("SELECT coalesce(max(position), 0) + 1 FROM events").get
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
            conn.execute(
                "INSERT INTO events (position, stream, seq, v, data, crc) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (position, stream_id, seq, v, data, event_crc(stream_id, seq, position, v, data)),
            )
    finally:
        conn.close()
    return int(position)
