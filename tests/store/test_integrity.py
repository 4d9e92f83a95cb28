"""Checksums and the checker: a row that does not read back as written raises a typed error
naming its stream and position, a damaged snapshot is ignored in favour of the events, an
older file gets checksums, and ``check`` reports every problem with where it is."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import apsw
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from contextledger.events import DEFAULT_CODEC, MemoryPinned
from contextledger.history import History
from contextledger.ledger import SessionLog, check_sessions
from contextledger.store import (
    Problem,
    Snapshot,
    SQLiteStore,
    StoreIntegrityError,
    StoreSchemaError,
)
from contextledger.store._schema import (
    BATCH_HEAD_BYTES,
    SCHEMA_VERSION,
    batch_crc,
    batch_data,
    batch_row_data,
    event_crc,
    split_batch,
)
from contextledger.testing._builder import SessionBuilder
from tests.store._rows import raw_connection, schema_3_file

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def note(text: str, stream: str = "s") -> MemoryPinned:
    return MemoryPinned(session_id=stream, text=text)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A closed store: stream ``s`` of five notes in three batch rows (positions 1-2, 3-4 and
    5), ``t`` of two in one (6-7)."""
    path = tmp_path / "x.db"

    async def fill() -> None:
        async with SQLiteStore.open(path) as store:
            await store.append("s", 0, [note("s1"), note("s2")])
            await store.append("s", 2, [note("s3"), note("s4")])
            await store.append("s", 4, [note("s5")])
            await store.append("t", 0, [note("t1", "t"), note("t2", "t")])

    trio.run(fill)
    return path


def damage(path: Path, sql: str, *args: object) -> None:
    conn = raw_connection(path)
    conn.execute(sql, args)
    conn.close()


async def problems_of(path: Path) -> list[Problem]:
    async with SQLiteStore.open(path, create=False) as store:
        return await store.check()


# --- every read verifies -------------------------------------------------------------------


_ROW_INT = st.integers(0, 2**63 - 1)


@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.binary()), min_size=1, max_size=20))
def test_a_batch_row_holds_its_events_versions_and_bytes(events: list[tuple[int, bytes]]) -> None:
    versions, datas = [v for v, _ in events], [data for _, data in events]
    assert split_batch(batch_data(versions, datas), len(events)) == (tuple(versions), datas)


@given(st.lists(st.text(max_size=300), min_size=1, max_size=20))
def test_a_batch_row_built_in_the_encoding_buffer_is_the_same_bytes(texts: list[str]) -> None:
    events = [note(text) for text in texts]
    batch = DEFAULT_CODEC.encode_batch(events, BATCH_HEAD_BYTES * len(events))
    datas = [DEFAULT_CODEC.encode(event) for event in events]

    assert batch_row_data(batch) == batch_data([event.v for event in events], datas)


@given(st.binary(max_size=64), st.integers(0, 40))
def test_bytes_that_cannot_hold_a_batch_split_to_none(data: bytes, count: int) -> None:
    split = split_batch(data, count)
    if split is not None:
        assert batch_data(*split) == data and len(split[1]) == count


@given(_ROW_INT, _ROW_INT, _ROW_INT, _ROW_INT, st.binary(max_size=4096))
def test_a_checksum_is_zlibs_crc_over_the_row_head_and_bytes(
    stream_id: int, seq: int, position: int, count: int, data: bytes
) -> None:
    head = struct.pack("<qqqq", stream_id, seq, position, count)
    assert batch_crc(stream_id, seq, position, count, data) == zlib.crc32(head + data)
    assert event_crc(stream_id, seq, position, count, data) == zlib.crc32(head + data)


@pytest.mark.parametrize(
    ("what", "sql"),
    [
        ("bytes", "UPDATE batches SET data = CAST(data || x'00' AS BLOB) WHERE position = 4"),
        ("one bit", "UPDATE batches SET data = zeroblob(length(data)) WHERE position = 4"),
        ("seq", "UPDATE batches SET seq = 33 WHERE position = 4"),
        ("count", "UPDATE batches SET count = 1 WHERE position = 4"),
        ("owner", "UPDATE batches SET stream = 2 WHERE position = 4"),
        ("type", "UPDATE batches SET data = 'text' WHERE position = 4"),
        ("checksum", "UPDATE batches SET crc = crc + 1 WHERE position = 4"),
    ],
)
@pytest.mark.parametrize("read", ["read", "read_all"])
async def test_a_changed_batch_row_raises_integrity_error_naming_stream_and_positions(
    db: Path, what: str, sql: str, read: str
) -> None:
    damage(db, sql)
    async with SQLiteStore.open(db, create=False) as store:
        with pytest.raises(StoreIntegrityError) as caught:
            await (store.read("s") if read == "read" else store.read_all())
    # A read of "s" that no longer finds seq 3 where it belongs stops at the row after it;
    # read_all names the stream the row now claims; a changed count changes the range.
    moved = read == "read" and what in ("seq", "owner")
    stream = "t" if what == "owner" and not moved else "s"
    first, last = (5, 5) if moved else (4, 4) if what == "count" else (3, 4)
    error = caught.value
    assert (error.stream, error.position, error.last_position) == (stream, first, last)
    where = f"position {first}" if first == last else f"positions {first}-{last}"
    assert f"stream {stream!r} {where}" in str(error)


@pytest.mark.parametrize(("row", "seq"), [(4, 3), (5, 5)], ids=["middle", "last"])
async def test_a_deleted_batch_raises_integrity_error(db: Path, row: int, seq: int) -> None:
    damage(db, "DELETE FROM batches WHERE position = ?", row)
    async with SQLiteStore.open(db, create=False) as store:
        with pytest.raises(StoreIntegrityError, match=f"seq {seq} "):
            await store.read("s")
        assert [r.seq for r in await store.read("s", 1, seq - 1)] == list(range(1, seq))


async def test_a_changed_stream_row_raises_integrity_error(db: Path) -> None:
    damage(db, "UPDATE streams SET version = 4 WHERE name = 's'")
    async with SQLiteStore.open(db, create=False) as store:
        for read in (store.read("s"), store.read_all(), store.stream_version("s")):
            with pytest.raises(StoreIntegrityError, match="stream 's'"):
                await read
        with pytest.raises(StoreIntegrityError):
            await store.append("s", 5, [note("s6")])
        assert [r.seq for r in await store.read("t")] == [1, 2]


async def test_a_row_of_a_stream_that_does_not_exist_raises_integrity_error(db: Path) -> None:
    damage(db, "UPDATE batches SET stream = 9 WHERE position = 7")
    async with SQLiteStore.open(db, create=False) as store:
        with pytest.raises(StoreIntegrityError, match="position 7"):
            await store.read_all()


async def test_rows_read_verified_still_upcast_and_page(db: Path) -> None:
    async with SQLiteStore.open(db, create=False) as store:
        assert [r.seq for r in await store.read("s", 2, 2)] == [2, 3]
        assert [r.seq for r in await store.read("s", 4)] == [4, 5]
        assert [r.seq for r in await store.read("s", 3, 1)] == [3]
        assert [r.position for r in await store.read_all(4, 3)] == [4, 5, 6]
        assert [r.position for r in await store.read_all(7)] == [7]
        assert [r.event.text for r in await store.read_all(2, 2)] == ["s2", "s3"]
        assert await store.read("s", 6) == []
        assert await store.stream_version("t") == 2
        assert await store.streams() == ["s", "t"]


# --- snapshots -----------------------------------------------------------------------------


async def session_with_snapshot(path: Path) -> SessionLog:
    store = SQLiteStore(path)
    log = await SessionLog.open(store, "ses")
    builder = SessionBuilder("ses")
    builder.user("hello")
    await log.append(builder.events)
    await log.save_snapshot()
    first = len(builder.events)
    builder.user("again")
    await log.append(builder.events[first:])
    return log


async def test_a_damaged_snapshot_is_ignored_and_the_session_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "snap.db"
    log = await session_with_snapshot(path)
    await log.store.aclose()
    damage(path, "UPDATE snapshots SET data = zeroblob(length(data))")

    async with SQLiteStore.open(path, create=False) as store:
        with pytest.raises(StoreIntegrityError, match="snapshot"):
            await store.load_snapshot("ses")
        with capture_logs() as logs:
            reopened = await SessionLog.open(store, "ses")

    assert reopened.history == log.history
    assert [e["event"] for e in logs] == ["snapshot unusable, rebuilding"]
    assert logs[0]["log_level"] == "warning"


@pytest.mark.parametrize(
    ("data", "seq", "logged"),
    [
        (b"not msgpack", None, "does not decode"),
        (None, 10_000, "holds 'ses' at seq 10000"),
    ],
    ids=["undecodable", "past-the-last-event"],
)
async def test_a_snapshot_that_cannot_be_used_is_ignored_and_the_session_rebuilt(
    tmp_path: Path, data: bytes | None, seq: int | None, logged: str
) -> None:
    log = await session_with_snapshot(tmp_path / "snap.db")
    store = log.store
    saved = await store.load_snapshot("ses")
    assert saved is not None
    if seq is not None:  # the projection of a longer session than the store holds
        history = History.restore(saved.data, store.snapshot_reader("ses"))
        history.state.seq = seq
        data = history.snapshot_head()
    assert data is not None
    await store.save_snapshot(Snapshot("ses", seq or saved.seq, saved.schema, data))

    with capture_logs() as logs:
        reopened = await SessionLog.open(store, "ses")
    (problem,) = await check_sessions(store)
    await store.aclose()

    assert reopened.history == log.history
    assert [e["event"] for e in logs] == ["snapshot unusable, rebuilding"]
    assert logged in logs[0]["error"]
    assert (problem.kind, problem.stream) == ("snapshot", "ses")
    assert logged in problem.detail


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE snapshots SET seq = 2",
        "UPDATE snapshots SET schema = 5",
        "UPDATE snapshots SET stream = 'b'",
    ],
)
async def test_a_snapshot_checksum_covers_its_stream_seq_and_schema(
    tmp_path: Path, sql: str
) -> None:
    path = tmp_path / "snap.db"
    async with SQLiteStore.open(path) as store:
        await store.save_snapshot(Snapshot("a", 3, 4, b"data"))
    damage(path, sql)
    async with SQLiteStore.open(path) as store:
        with pytest.raises(StoreIntegrityError, match="snapshot"):
            await store.load_snapshot("b" if "stream" in sql else "a")


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE snapshot_chunks SET data = x'00' || data WHERE key = 'b'",
        "UPDATE snapshot_chunks SET key = 'c' WHERE key = 'b'",
        "UPDATE snapshot_chunks SET stream = 'b' WHERE key = 'b'",
    ],
    ids=["data", "key", "stream"],
)
async def test_a_snapshot_chunk_checksum_covers_its_stream_key_and_data(
    tmp_path: Path, sql: str
) -> None:
    path = tmp_path / "snap.db"
    async with SQLiteStore.open(path) as store:
        await store.save_snapshot(Snapshot("a", 3, 4, b"head", {"a": b"one", "b": b"two"}))
    damage(path, sql)
    async with SQLiteStore.open(path) as store:
        with pytest.raises(StoreIntegrityError, match="snapshot"):
            await store.load_snapshot("a")
        problems = await store.check()
    # A chunk moved to stream b is missing from a and, under b, of no snapshot.
    assert ("snapshot", "a") in [(p.kind, p.stream) for p in problems]
    assert {p.kind for p in problems} == {"snapshot"}


async def test_a_snapshot_missing_a_chunk_raises_integrity_error(tmp_path: Path) -> None:
    path = tmp_path / "snap.db"
    async with SQLiteStore.open(path) as store:
        await store.save_snapshot(Snapshot("a", 3, 4, b"head", {"a": b"one", "b": b"two"}))
    damage(path, "DELETE FROM snapshot_chunks WHERE key = 'a'")
    async with SQLiteStore.open(path) as store:
        with pytest.raises(StoreIntegrityError, match="1 of its 2 chunks"):
            await store.load_snapshot("a")
        assert await store.check() == [
            Problem("snapshot", "the snapshot has 1 of its 2 chunks", "a")
        ]


# --- an older file --------------------------------------------------------------------------

SCHEMA_1 = """
CREATE TABLE streams (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE events (
    position INTEGER PRIMARY KEY, stream INTEGER NOT NULL, seq INTEGER NOT NULL,
    v INTEGER NOT NULL, data BLOB NOT NULL, UNIQUE (stream, seq)
);
CREATE TABLE snapshots (
    stream TEXT PRIMARY KEY, seq INTEGER NOT NULL, schema INTEGER NOT NULL, data BLOB NOT NULL
) WITHOUT ROWID;
PRAGMA user_version = 1;
"""


def schema_1_file(path: Path) -> list[MemoryPinned]:
    """A store file as release schema 1 wrote it, with three events and a snapshot."""
    events = [note("a"), note("b"), note("c", "t")]
    conn = apsw.Connection(str(path))
    conn.execute(SCHEMA_1)
    conn.execute("INSERT INTO streams (id, name) VALUES (1, 's'), (2, 't')")
    rows = [(1, 1, 1), (2, 1, 2), (3, 2, 1)]
    for (position, stream, seq), event in zip(rows, events, strict=True):
        conn.execute(
            "INSERT INTO events VALUES (?, ?, ?, 1, ?)",
            (position, stream, seq, DEFAULT_CODEC.encode(event)),
        )
    conn.execute("INSERT INTO snapshots VALUES ('s', 2, 4, x'00')")
    conn.close()
    return events


async def test_a_schema_1_file_opens_and_gets_checksums(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    events = schema_1_file(path)

    async with SQLiteStore.open(path, create=False) as store:
        assert [r.event for r in await store.read_all()] == events
        assert await store.stream_version("s") == 2
        assert await store.load_snapshot("s") is None  # a cache, dropped
        assert await store.check() == []
        await store.append("s", 2, [note("d")])
    conn = raw_connection(path)
    assert conn.execute("PRAGMA user_version").get == SCHEMA_VERSION
    assert conn.execute("SELECT count(*) FROM batches").get == 4
    conn.close()


#: What schema 2 changed: its snapshots were one row each, the whole projection.
SCHEMA_2_SNAPSHOTS = """
DROP TABLE snapshots;
DROP TABLE snapshot_chunks;
CREATE TABLE snapshots (
    stream TEXT NOT NULL UNIQUE, seq INTEGER NOT NULL, schema INTEGER NOT NULL,
    data BLOB NOT NULL, crc INTEGER NOT NULL
);
INSERT INTO snapshots VALUES ('s', 2, 6, x'00', 0);
PRAGMA user_version = 2;
"""


async def test_a_schema_2_file_opens_with_its_events_and_no_snapshots(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    schema_3_file(db, damaged=False)
    damage(db, SCHEMA_2_SNAPSHOTS)

    async with SQLiteStore.open(db, create=False) as store:
        assert [r.seq for r in await store.read("s")] == [1, 2]
        assert await store.load_snapshot("s") is None  # a cache, dropped
        await store.save_snapshot(Snapshot("s", 2, 7, b"head", {"m": b"chunk"}))
        assert await store.check() == []
    conn = raw_connection(db)
    assert conn.execute("PRAGMA user_version").get == SCHEMA_VERSION
    conn.close()


async def test_a_schema_3_file_gets_a_batch_row_per_event_and_keeps_its_positions(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    events = schema_3_file(path, damaged=False)

    async with SQLiteStore.open(path, create=False) as store:
        recorded = await store.read_all()
        assert [r.event for r in recorded] == events
        assert [(r.stream, r.seq, r.position) for r in recorded] == [
            ("s", 1, 1),
            ("t", 1, 2),
            ("s", 2, 3),
        ]
        assert [r.event for r in await store.read("s")] == [events[0], events[2]]
        assert await store.load_snapshot("s") == Snapshot("s", 2, 7, b"head")
        assert await store.check() == []
        # Positions are never given twice: the next is after the last ever given, not 4.
        (appended,) = await store.append("s", 2, [note("d")])
        assert appended.position == 10
    conn = raw_connection(path)
    assert conn.execute("PRAGMA user_version").get == SCHEMA_VERSION
    assert conn.execute("SELECT count(*) FROM batches").get == 4
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'events'").get == 0
    conn.close()


async def test_a_damaged_row_of_a_schema_3_file_stays_found_after_the_migration(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    schema_3_file(path, damaged=True)

    async with SQLiteStore.open(path, create=False) as store:
        with pytest.raises(StoreIntegrityError, match="stream 's' position 3"):
            await store.read("s")
        assert [r.seq for r in await store.read("s", 1, 1)] == [1]
        assert await store.check() == [
            Problem("checksum", "the batch's row does not match its checksum", "s", 3, 2),
            Problem("seq", "seq 2 to 2 missing", "s", seq=2),
        ]


async def test_a_read_only_schema_2_file_is_refused_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    schema_3_file(db, damaged=False)
    damage(db, SCHEMA_2_SNAPSHOTS)
    before = db.read_bytes()
    db.chmod(0o444)
    with pytest.raises(StoreSchemaError, match="schema 2 and cannot be written"):
        SQLiteStore(db, create=False)
    assert db.read_bytes() == before


async def test_a_read_only_schema_1_file_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    schema_1_file(path)
    before = path.read_bytes()
    path.chmod(0o444)
    with pytest.raises(StoreSchemaError, match="schema 1 and cannot be written"):
        SQLiteStore(path, create=False)
    assert path.read_bytes() == before


# --- the checker ---------------------------------------------------------------------------


async def test_a_sound_store_has_no_problems(db: Path) -> None:
    assert await problems_of(db) == []


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "UPDATE batches SET data = zeroblob(length(data)) WHERE position = 4",
            [
                Problem("checksum", "the batch's row does not match its checksum", "s", 3, 3),
                Problem("seq", "seq 3 to 4 missing", "s", seq=3),
            ],
        ),
        (
            "DELETE FROM batches WHERE position = 4",
            [Problem("seq", "seq 3 to 4 missing", "s", seq=3)],
        ),
        (
            "DELETE FROM batches WHERE position IN (4, 5)",
            [Problem("seq", "seq 3 to 5 missing", "s", seq=3)],
        ),
        (
            "UPDATE batches SET stream = 9 WHERE position = 7",
            [
                Problem("owner", "stream id 9 does not exist", position=6, seq=1),
                Problem("seq", "seq 1 to 2 missing", "t", seq=1),
            ],
        ),
        (
            "UPDATE streams SET name = 'u' WHERE name = 't'",
            [
                Problem("checksum", "the stream's row does not match its checksum", "u"),
                Problem("owner", "stream id 2 does not exist", position=6, seq=1),
            ],
        ),
    ],
    ids=["checksum", "gap", "tail", "owner", "stream"],
)
async def test_check_reports_each_problem_with_its_place(
    db: Path, sql: str, expected: list[Problem]
) -> None:
    damage(db, sql)
    assert await problems_of(db) == expected


async def test_check_reports_a_damaged_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "snap.db"
    log = await session_with_snapshot(path)
    await log.store.aclose()
    damage(path, "UPDATE snapshots SET seq = 1")
    assert await problems_of(path) == [
        Problem("snapshot", "the snapshot's row does not match its checksum", "ses")
    ]


async def test_check_sessions_reports_a_snapshot_that_differs_from_the_replay(
    tmp_path: Path,
) -> None:
    path = tmp_path / "snap.db"
    log = await session_with_snapshot(path)
    snapshot = await log.store.load_snapshot("ses")
    assert snapshot is not None
    # The projection at that seq with something no event put there.
    history = History.restore(snapshot.data, log.store.snapshot_reader("ses"))
    history.state.memory = "remembered from nowhere"
    head = history.snapshot_head()
    wrong = Snapshot("ses", snapshot.seq, snapshot.schema, head, snapshot.chunks)
    await log.store.save_snapshot(wrong)
    problems = await check_sessions(log.store)
    await log.store.aclose()
    detail = f"the snapshot at seq {snapshot.seq} differs from the replay"
    assert problems == [Problem("snapshot", detail, "ses", seq=snapshot.seq)]
