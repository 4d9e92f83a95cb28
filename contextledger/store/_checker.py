"""Checking a whole SQLite store file: every page, checksum, seq and owner.

Reads verify the rows they return; ``find_problems`` verifies every row of the file, whether
anyone reads it or not, and reports each problem with where it is instead of stopping at
the first. ``contextledger check`` runs it together with the session checks of
``contextledger.ledger.check_sessions``.
"""

from __future__ import annotations

from collections import defaultdict

import apsw
import msgspec

from contextledger.store._errors import StoreIntegrityError
from contextledger.store._verify import (
    CHUNK_MISMATCH,
    StreamHead,
    batch_start,
    chunk_ok,
    verified_batch,
    verified_snapshot,
    verified_stream,
)

#: SQLite's own check reports at most this many problems (its default is 100).
SQLITE_PROBLEMS_MAX = 100


class Problem(msgspec.Struct, frozen=True, omit_defaults=True):
    """One thing wrong in a store: its ``kind`` (``sqlite``, ``checksum``, ``owner``,
    ``seq``, ``snapshot``, ``event``), where it is (the stream, the event's position and seq,
    when known) and what is wrong."""

    kind: str
    detail: str
    stream: str | None = None
    position: int | None = None
    seq: int | None = None


def find_problems(cur: apsw.Cursor) -> list[Problem]:
    """Every problem in the store ``cur`` reads: SQLite's ``integrity_check`` (pages and
    indexes), the checksum of every stream, batch and snapshot row, each batch's owner, and
    each stream's seqs (exactly 1 to its recorded version, each in one batch)."""
    problems = _sqlite_problems(cur)
    heads = _stream_heads(cur, problems)
    seqs: dict[int, list[int]] = defaultdict(list)
    for row in cur.execute("SELECT position, stream, seq, count, data, crc FROM batches"):
        position, seq = batch_start(row)
        head = heads.get(row[1])
        if head is None:
            problems.append(
                Problem("owner", f"stream id {row[1]} does not exist", position=position, seq=seq)
            )
            continue
        try:
            events = verified_batch(row, head)
        except StoreIntegrityError as exc:
            problems.append(Problem("checksum", exc.reason, head.name, position, seq))
            continue
        seqs[head.id].extend(seq for _, seq, _, _ in events)
    for head in heads.values():
        problems.extend(_seq_problems(head, sorted(seqs[head.id])))
    problems.extend(_snapshot_problems(cur, {head.name: head for head in heads.values()}))
    return problems


def _snapshot_problems(cur: apsw.Cursor, names: dict[str, StreamHead]) -> list[Problem]:
    """Each snapshot whose head or a chunk does not match its checksum, that misses a chunk,
    or that is of no stream's events."""
    problems = []
    counts: dict[object, int] = defaultdict(int)
    damaged: set[object] = set()
    for stream, key, data, crc in cur.execute("SELECT stream, key, data, crc FROM snapshot_chunks"):
        counts[stream] += 1
        if not chunk_ok(stream, key, data, crc):
            damaged.add(stream)
    for stream, seq, schema, count, data, crc in cur.execute(
        "SELECT stream, seq, schema, chunks, data, crc FROM snapshots"
    ):
        name = stream if isinstance(stream, str) else repr(stream)
        found = counts.pop(stream, 0)
        try:
            seq, _, count, _ = verified_snapshot((seq, schema, count, data, crc), name)
        except StoreIntegrityError as exc:
            problems.append(Problem("snapshot", exc.reason, name))
            continue
        if stream in damaged:
            problems.append(Problem("snapshot", CHUNK_MISMATCH, name))
        elif found != count:
            problems.append(
                Problem("snapshot", f"the snapshot has {found} of its {count} chunks", name)
            )
        elif name not in names or seq > names[name].version:
            problems.append(Problem("snapshot", f"a snapshot at seq {seq} of no such events", name))
    for stream in counts:
        name = stream if isinstance(stream, str) else repr(stream)
        problems.append(Problem("snapshot", "chunks of no snapshot", name))
    return problems


def _sqlite_problems(cur: apsw.Cursor) -> list[Problem]:
    rows = cur.execute(f"PRAGMA integrity_check({SQLITE_PROBLEMS_MAX})").fetchall()
    return [Problem("sqlite", str(detail)) for (detail,) in rows if detail != "ok"]


def _stream_heads(cur: apsw.Cursor, problems: list[Problem]) -> dict[int, StreamHead]:
    heads = {}
    for row in cur.execute("SELECT id, name, version, crc FROM streams"):
        try:
            head = verified_stream(row)
        except StoreIntegrityError as exc:
            problems.append(Problem("checksum", exc.reason, exc.stream))
            continue
        heads[head.id] = head
    return heads


def _seq_problems(head: StreamHead, seqs: list[int]) -> list[Problem]:
    """Seqs missing from 1 to the stream's version, repeated, or past it."""
    problems = []
    expected = 1
    for seq in seqs:
        if seq > head.version:
            problems.append(
                Problem("seq", f"past the stream's version {head.version}", head.name, seq=seq)
            )
        elif seq < expected:
            problems.append(Problem("seq", "seq held twice", head.name, seq=seq))
        else:
            if seq > expected:
                missing = f"{expected}" if seq == expected + 1 else f"{expected} to {seq - 1}"
                problems.append(Problem("seq", f"seq {missing} missing", head.name, seq=expected))
            expected = seq + 1
    if expected <= head.version:
        problems.append(
            Problem("seq", f"seq {expected} to {head.version} missing", head.name, seq=expected)
        )
    return problems
