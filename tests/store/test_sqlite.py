"""What the SQLite store promises beyond the ``EventStore`` contract: durability modes, where
commits run, group commit, several stores on one file, checkpoints, reading rows that are
corrupt or were written under an older event schema, reads that fail without holding
anything open, typed errors only, and read-only files."""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import apsw
import msgspec
import pytest
import trio
import trio.testing

import contextledger.store._checkpointer as checkpointer_module
import contextledger.store._writer as writer_module
from contextledger.events import (
    EventBase,
    EventCodec,
    EventDecodeError,
    LedgerError,
    MemoryPinned,
    RecordedEvent,
    UpcasterRegistry,
)
from contextledger.store import (
    ConcurrencyError,
    Durability,
    Snapshot,
    SQLiteStore,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreIntegrityError,
    StoreIOError,
    StoreReadOnlyError,
    StoreSchemaError,
)
from contextledger.store._connections import file_is_read_only, store_error
from contextledger.store._schema import PAGE_SIZE, split_batch
from contextledger.store._writer import INLINE_COMMIT_BYTES
from contextledger.testing._store_contract import TIMEOUT, note, texts
from tests.store._rows import insert_row, raw_connection, schema_3_file


def big(stream: str = "big") -> MemoryPinned:
    """One event larger than ``INLINE_COMMIT_BYTES``: its commit runs on a worker thread."""
    return MemoryPinned(session_id=stream, text="x" * (INLINE_COMMIT_BYTES + 1))


class Commits:
    """Watches a store's writer connection through an apsw commit hook: records the thread
    of every commit, and can hold the next commit made on a worker thread until released
    (``held`` is set while it waits), so a test can act while that commit is in flight."""

    def __init__(self, store: SQLiteStore) -> None:
        self.trio_thread = threading.get_ident()
        self.threads: list[int] = []
        self.held = trio.Event()
        self._hold_next = False
        self._released = threading.Event()
        store._writer.set_commit_hook(self._hook)

    def hold_next_worker_commit(self) -> None:
        self._hold_next = True

    def release(self) -> None:
        self._released.set()

    @property
    def on_trio_thread(self) -> int:
        return sum(t == self.trio_thread for t in self.threads)

    @property
    def on_worker_threads(self) -> int:
        return sum(t != self.trio_thread for t in self.threads)

    def _hook(self) -> bool:
        thread = threading.get_ident()
        self.threads.append(thread)
        if self._hold_next and thread != self.trio_thread:
            self._hold_next = False
            trio.from_thread.run_sync(self.held.set)
            self._released.wait(TIMEOUT)
        return False  # let the commit go ahead


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "x.db"


def pragma(store: SQLiteStore, name: str) -> Any:
    return store._writer.execute(f"PRAGMA {name}").get


# --- durability and where commits run -----------------------------------------------------


async def test_normal_durability_is_the_default(db: Path) -> None:
    async with SQLiteStore.open(db) as store:
        assert store.durability == "normal"
        assert pragma(store, "synchronous") == 1  # NORMAL


async def test_small_commits_at_normal_durability_run_on_the_trio_thread(db: Path) -> None:
    async with SQLiteStore.open(db) as store:
        commits = Commits(store)
        for i in range(3):
            await store.append("s", i, [note(f"n{i}")])

    assert (commits.on_trio_thread, commits.on_worker_threads) == (3, 0)


async def test_full_durability_syncs_every_commit(db: Path) -> None:
    async with SQLiteStore.open(db, durability="full") as store:
        assert store.durability == "full"
        assert pragma(store, "synchronous") == 2  # FULL


async def test_full_durability_commits_on_a_worker_thread(db: Path) -> None:
    async with SQLiteStore.open(db, durability="full") as store:
        commits = Commits(store)
        for i in range(3):
            await store.append("s", i, [note(f"n{i}")])
        await store.save_snapshot(Snapshot("s", 3, 1, b"snap"))

        assert texts(await store.read("s")) == ["n0", "n1", "n2"]
        assert await store.load_snapshot("s") == Snapshot("s", 3, 1, b"snap")
    assert (commits.on_trio_thread, commits.on_worker_threads) == (0, 4)


async def test_an_unknown_durability_raises_value_error(db: Path) -> None:
    with pytest.raises(ValueError, match="durability"):
        async with SQLiteStore.open(db, durability="fast"):  # type: ignore[arg-type]
            pass


async def test_a_batch_over_the_inline_limit_commits_on_a_worker_thread(db: Path) -> None:
    async with SQLiteStore.open(db) as store:
        commits = Commits(store)
        recorded = await store.append("big", 0, [big()])

        assert await store.read("big") == recorded
    assert (commits.on_trio_thread, commits.on_worker_threads) == (0, 1)


async def test_the_event_loop_keeps_running_while_a_large_commit_is_in_flight(
    db: Path,
) -> None:
    ticks = 0
    committed = trio.Event()

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.sleep(0)

    async def append_big() -> None:
        await store.append("big", 0, [big()])
        committed.set()

    async with SQLiteStore.open(db) as store:
        commits = Commits(store)
        commits.hold_next_worker_commit()
        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(tick)
                nursery.start_soon(append_big)
                await commits.held.wait()
                ticks_when_held = ticks
                while ticks < ticks_when_held + 100:
                    await trio.sleep(0)
                assert not committed.is_set()  # the other task ran 100 steps meanwhile
                commits.release()
                await committed.wait()
                nursery.cancel_scope.cancel()

        assert await store.stream_version("big") == 1


async def test_an_append_waiting_for_another_writers_lock_waits_off_the_event_loop(
    db: Path,
) -> None:
    ticks = 0
    committed = trio.Event()

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.sleep(0)

    async def append() -> None:
        await store.append("s", 1, [note("b")])
        committed.set()

    async with SQLiteStore.open(db) as store:
        await store.append("s", 0, [note("a")])
        commits = Commits(store)
        other = raw_connection(db)  # another process, holding the write lock
        other.execute("BEGIN IMMEDIATE")
        try:
            with trio.fail_after(TIMEOUT):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(tick)
                    nursery.start_soon(append)
                    while ticks < 100:
                        await trio.sleep(0)
                    assert not committed.is_set()  # the loop runs while the append waits
                    other.execute("ROLLBACK")
                    await committed.wait()
                    nursery.cancel_scope.cancel()
        finally:
            other.close()

        assert texts(await store.read("s")) == ["a", "b"]
    assert (commits.on_trio_thread, commits.on_worker_threads) == (0, 1)


async def test_a_cancelled_append_at_full_durability_still_commits_and_returns(
    db: Path,
) -> None:
    async with SQLiteStore.open(db, durability="full") as store:
        returned: list[RecordedEvent] = []
        with trio.CancelScope() as scope:
            scope.cancel()
            returned = await store.append("s", 0, [note("a")])
            await trio.lowlevel.checkpoint()

        assert scope.cancelled_caught
        assert returned == await store.read("s")


async def test_an_append_cancelled_while_queued_behind_a_commit_still_commits(db: Path) -> None:
    returned: list[RecordedEvent] = []
    scope = trio.CancelScope()

    async def append() -> None:
        with scope:
            returned.extend(await store.append("s", 0, [note("a")]))
            await trio.lowlevel.checkpoint()

    async with SQLiteStore.open(db) as store:
        commits = Commits(store)
        commits.hold_next_worker_commit()
        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(store.append, "big", 0, [big()])
                await commits.held.wait()
                nursery.start_soon(append)
                await trio.testing.wait_all_tasks_blocked()  # queued
                scope.cancel()
                await trio.testing.wait_all_tasks_blocked()  # still queued, not cancelled
                commits.release()

        assert scope.cancelled_caught
        assert returned == await store.read("s")
        assert texts(returned) == ["a"]


async def test_appends_queued_behind_a_commit_in_flight_share_one_commit(db: Path) -> None:
    returned: dict[str, list[RecordedEvent]] = {}

    async def append(stream: str) -> None:
        returned[stream] = await store.append(stream, 0, [note("a", stream), note("b", stream)])

    async with SQLiteStore.open(db) as store:
        commits = Commits(store)
        commits.hold_next_worker_commit()
        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(store.append, "big", 0, [big()])
                await commits.held.wait()
                for i in range(5):
                    nursery.start_soon(append, f"s{i}")
                await trio.testing.wait_all_tasks_blocked()  # all five are queued
                commits.release()

        assert len(commits.threads) == 2  # the large commit, then one for all five appends
        positions = sorted(r.position for batch in returned.values() for r in batch)
        assert positions == list(range(2, 12))
        for stream, batch in returned.items():
            assert await store.read(stream) == batch


async def behind_a_held_commit(
    store: SQLiteStore, *writes: Callable[[], Awaitable[object]]
) -> Commits:
    """Start a large append whose commit is held on its worker thread, queue ``writes``
    behind it, then let it go: the queued writes share the next commit."""
    commits = Commits(store)
    commits.hold_next_worker_commit()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.append, "big", 0, [big()])
            await commits.held.wait()
            for write in writes:
                nursery.start_soon(write)
            await trio.testing.wait_all_tasks_blocked()
            commits.release()
    return commits


async def test_a_version_conflict_in_a_group_fails_only_that_append(db: Path) -> None:
    won: list[str] = []
    lost: list[ConcurrencyError] = []

    async def append(stream: str, expected: int, text: str) -> None:
        try:
            await store.append(stream, expected, [note(text, stream), note(f"{text}+", stream)])
        except ConcurrencyError as exc:
            lost.append(exc)
        else:
            won.append(text)

    async with SQLiteStore.open(db) as store:
        await store.append("a", 0, [note("a0", "a")])
        commits = await behind_a_held_commit(
            store,
            partial(append, "a", 1, "x"),
            partial(append, "a", 1, "y"),
            partial(append, "b", 0, "b0"),
        )

        assert len(commits.threads) == 2  # the three queued appends shared one commit
        assert [(e.stream, e.expected, e.actual) for e in lost] == [("a", 1, 3)]
        assert sorted(won) in (["b0", "x"], ["b0", "y"])
        winner = next(w for w in won if w != "b0")
        assert texts(await store.read("a")) == ["a0", winner, f"{winner}+"]
        assert texts(await store.read("b")) == ["b0", "b0+"]
        assert [r.position for r in await store.read_all()] == list(range(1, 7))


async def test_a_snapshot_sqlite_refuses_in_a_group_fails_alone(db: Path) -> None:
    refused: list[StoreError] = []

    async def snapshot() -> None:
        try:
            await store.save_snapshot(Snapshot("a", 1, 1, b"projection"))
        except StoreError as exc:
            refused.append(exc)

    async with SQLiteStore.open(db) as store:
        store._writer.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON snapshots "
            "BEGIN SELECT RAISE(ABORT, 'no room for snapshots'); END"
        )
        commits = await behind_a_held_commit(
            store,
            partial(store.append, "a", 0, [note("a0", "a")]),
            snapshot,
            partial(store.append, "b", 0, [note("b0", "b")]),
        )

        assert len(commits.threads) == 2  # the three queued writes shared one commit
        assert [type(e) for e in refused] == [StoreIOError]
        assert "no room for snapshots" in str(refused[0])
        assert texts(await store.read("a")) == ["a0"]
        assert texts(await store.read("b")) == ["b0"]
        assert await store.load_snapshot("a") is None
        assert await store.append("a", 1, [note("a1", "a")])  # the caches are right
        assert await store.check() == []


# --- reopening and sharing the file -------------------------------------------------------


async def test_a_reopened_store_sees_everything_committed_before(db: Path) -> None:
    async with SQLiteStore.open(db) as store:
        await store.append("a", 0, [note("a1", "a"), note("a2", "a")])
        await store.append("b", 0, [note("b1", "b")])
        await store.save_snapshot(Snapshot("a", 2, 1, b"snap"))
        before = await store.read_all()

    async with SQLiteStore.open(db) as store:
        assert await store.read_all() == before
        assert await store.streams() == ["a", "b"]
        assert await store.stream_version("a") == 2
        assert await store.load_snapshot("a") == Snapshot("a", 2, 1, b"snap")


async def test_a_reopened_store_continues_seqs_and_positions(db: Path) -> None:
    async with SQLiteStore.open(db) as store:
        await store.append("a", 0, [note("a1", "a"), note("a2", "a")])

    async with SQLiteStore.open(db) as store:
        with pytest.raises(ConcurrencyError):
            await store.append("a", 0, [note("stale", "a")])
        recorded = await store.append("a", 2, [note("a3", "a")])

    assert [(r.seq, r.position) for r in recorded] == [(3, 3)]


async def test_a_file_of_another_store_schema_is_refused(db: Path) -> None:
    async with SQLiteStore.open(db):
        pass
    conn = raw_connection(db)
    conn.execute("PRAGMA user_version=99")
    conn.close()

    with pytest.raises(StoreSchemaError, match="schema 99"):
        async with SQLiteStore.open(db):
            pass


async def test_a_second_store_on_the_same_file_sees_the_firsts_writes(db: Path) -> None:
    async with SQLiteStore.open(db) as one, SQLiteStore.open(db) as two:
        written = await one.append("s", 0, [note("a"), note("b")])

        assert await two.read("s") == written
        assert await two.stream_version("s") == 2


async def test_a_store_refreshes_its_cached_versions_after_another_writes(db: Path) -> None:
    async with SQLiteStore.open(db) as one, SQLiteStore.open(db) as two:
        await one.append("s", 0, [note("one")])  # one now caches version 1
        await two.append("s", 1, [note("two")])

        recorded = await one.append("s", 2, [note("one again")])

        assert [(r.seq, r.position) for r in recorded] == [(3, 3)]
        assert texts(await two.read("s")) == ["one", "two", "one again"]


async def test_a_store_detects_a_conflict_with_another_stores_write(db: Path) -> None:
    async with SQLiteStore.open(db) as one, SQLiteStore.open(db) as two:
        await one.append("s", 0, [note("one")])
        await two.append("s", 1, [note("two")])

        with pytest.raises(ConcurrencyError) as caught:
            await one.append("s", 1, [note("stale")])

        assert (caught.value.expected, caught.value.actual) == (1, 2)


async def test_a_store_checks_the_last_position_after_another_store_rewrote_the_stream(
    db: Path,
) -> None:
    async with SQLiteStore.open(db) as one, SQLiteStore.open(db) as two:
        await one.append("s", 0, [note("a"), note("b")])  # one now caches position 2
        await two.delete_streams(["s"])
        await two.append("s", 0, [note("c"), note("d")])

        with pytest.raises(ConcurrencyError) as caught:
            await one.append("s", 2, [note("stale")], expected_position=2)
        recorded = await one.append("s", 2, [note("e")], expected_position=4)

        assert (caught.value.actual, caught.value.actual_position) == (2, 4)
        assert [(r.seq, r.position) for r in recorded] == [(3, 5)]
        assert texts(await two.read("s")) == ["c", "d", "e"]


async def test_a_stream_without_its_last_batch_row_refuses_an_append_expecting_a_position(
    db: Path,
) -> None:
    async with SQLiteStore.open(db) as store:
        await store.append("s", 0, [note("a")])
        await store.append("s", 1, [note("b")])
    conn = raw_connection(db)
    conn.execute("DELETE FROM batches WHERE seq = 2")
    conn.close()

    async with SQLiteStore.open(db) as store:
        with pytest.raises(StoreIntegrityError, match="last seq 2 is missing"):
            await store.append("s", 2, [note("c")], expected_position=2)

        assert await store.stream_version("s") == 2
        assert (await store.read_all())[-1].position == 1


async def test_positions_stay_gap_free_when_two_stores_interleave_writes(db: Path) -> None:
    async with SQLiteStore.open(db) as one, SQLiteStore.open(db) as two:
        for i in range(3):
            await one.append("a", i, [note(f"a{i}", "a")])
            await two.append("b", 2 * i, [note(f"b{i}", "b"), note(f"b{i}+", "b")])

        recorded = await one.read_all()

    assert [r.position for r in recorded] == list(range(1, 10))
    assert texts(recorded) == ["a0", "b0", "b0+", "a1", "b1", "b1+", "a2", "b2", "b2+"]


# --- checkpoints --------------------------------------------------------------------------


def events_in_database_file(path: Path) -> int | None:
    """How many events the database file itself holds, ignoring the WAL (``immutable=1``);
    None while a checkpoint is half-way through copying pages into it."""
    uri = f"file:{path}?immutable=1"
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    try:
        conn = apsw.Connection(uri, flags=flags)
        try:
            return int(conn.execute("SELECT coalesce(sum(count), 0) FROM batches").get)
        finally:
            conn.close()
    except apsw.Error:
        return None


async def test_the_wal_is_checkpointed_once_it_passes_checkpoint_bytes(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At one byte every commit passes the limit, so no commit may stay in the WAL for good:
    # whenever the appends stop, the database file itself must come to hold every event.
    # Bursts of commits racing the checkpoints, three times over.
    monkeypatch.setattr(checkpointer_module, "CHECKPOINT_BYTES", 1)
    events = [note(f"{i:03d}" * 10_000) for i in range(300)]  # 30 kB each

    async with SQLiteStore.open(db) as store:
        for burst in range(3):
            for i in range(burst * 100, (burst + 1) * 100):
                await store.append("s", i, [events[i]])
            with trio.fail_after(TIMEOUT):
                # Committed pages live only in the WAL until a checkpoint copies them.
                while events_in_database_file(db) != (burst + 1) * 100:
                    await trio.sleep(0.01)

        assert [r.event for r in await store.read_all()] == events

    conn = raw_connection(db)
    assert conn.execute("PRAGMA integrity_check").get == "ok"
    conn.close()


# --- rows that cannot be read -------------------------------------------------------------


@pytest.mark.parametrize(
    "row",
    [
        (1, b"\xc1\xc1\xc1"),
        (1, b""),
        (1, msgspec.msgpack.encode({"type": "no.such.event", "session_id": "s"})),
    ],
)
@pytest.mark.parametrize("read", ["read", "read_all"])
async def test_an_unreadable_row_raises_decode_error_naming_stream_and_position(
    db: Path, row: tuple[int, bytes], read: str
) -> None:
    async with SQLiteStore.open(db) as store:
        await store.append("s", 0, [note("fine")])
        position = insert_row(db, "s", *row)

        with pytest.raises(EventDecodeError) as caught:
            await (store.read("s") if read == "read" else store.read_all())

    assert (caught.value.stream, caught.value.position) == ("s", position)
    assert "'s'" in str(caught.value)
    assert f"position {position}" in str(caught.value)


# --- upcasting ----------------------------------------------------------------------------


class NoteTaken(EventBase, tag="test.note_taken", frozen=True):
    """A test-only event at version 3. v1 held ``body``; v2 renamed it ``text``; v3 added
    ``author``."""

    VERSION: ClassVar[int] = 3

    text: str
    author: str


TestEvent = NoteTaken | MemoryPinned


def upcasters(*, from_v1: bool = True, from_v2: bool = True) -> UpcasterRegistry:
    registry = UpcasterRegistry()
    if from_v1:

        @registry.register("test.note_taken", 1)
        def rename_body(raw: dict[str, Any]) -> dict[str, Any]:
            raw = dict(raw)
            raw["text"] = raw.pop("body")
            return raw

    if from_v2:

        @registry.register("test.note_taken", 2)
        def add_author(raw: dict[str, Any]) -> dict[str, Any]:
            return {**raw, "author": "unknown"}

    return registry


def codec(registry: UpcasterRegistry) -> EventCodec:
    return EventCodec(TestEvent, (NoteTaken, MemoryPinned), registry)


V1_ROW = {"type": "test.note_taken", "session_id": "s", "body": "hello"}
V2_ROW = {"type": "test.note_taken", "session_id": "s", "text": "hello"}


@pytest.mark.parametrize(("version", "fields"), [(1, V1_ROW), (2, V2_ROW)], ids=["v1", "v2"])
async def test_an_event_stored_under_an_older_version_is_upcast_on_read(
    db: Path, version: int, fields: dict[str, Any]
) -> None:
    async with SQLiteStore.open(db, codec=codec(upcasters())) as store:
        insert_row(db, "s", version, msgspec.msgpack.encode(fields))

        [recorded] = await store.read("s")

    assert recorded.event == NoteTaken(session_id="s", text="hello", author="unknown")


async def test_a_new_file_has_large_pages_and_an_older_one_keeps_its_own(
    tmp_path: Path,
) -> None:
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    schema_3_file(old, damaged=False)  # written with SQLite's default pages
    for path in (new, old):
        async with SQLiteStore.open(path) as store:
            await store.append("u", 0, [note("x" * 100_000, "u")])
            assert [r.event.text for r in await store.read("u")] == ["x" * 100_000]
    sizes = []
    for path in (new, old):
        conn = raw_connection(path)
        sizes.append(conn.execute("PRAGMA page_size").get)
        conn.close()
    assert sizes == [PAGE_SIZE, 4096]


async def test_an_event_is_stored_under_its_current_version(db: Path) -> None:
    event = NoteTaken(session_id="s", text="hi", author="me")

    async with SQLiteStore.open(db, codec=codec(upcasters())) as store:
        await store.append("s", 0, [event])

        assert [r.event for r in await store.read("s")] == [event]
    conn = raw_connection(db)
    data, count = conn.execute("SELECT data, count FROM batches").fetchone()
    assert split_batch(data, count) == ((3,), [msgspec.msgpack.encode(event)])
    conn.close()


async def test_an_event_stored_under_a_newer_version_raises_decode_error(db: Path) -> None:
    async with SQLiteStore.open(db, codec=codec(upcasters())) as store:
        position = insert_row(db, "s", 4, msgspec.msgpack.encode({**V2_ROW, "author": "me"}))

        with pytest.raises(EventDecodeError, match="newer") as caught:
            await store.read("s")

    assert (caught.value.stream, caught.value.position) == ("s", position)


async def test_an_old_event_without_an_upcaster_raises_decode_error(db: Path) -> None:
    async with SQLiteStore.open(db, codec=codec(upcasters(from_v2=False))) as store:
        position = insert_row(db, "s", 1, msgspec.msgpack.encode(V1_ROW))

        with pytest.raises(EventDecodeError, match="no upcaster") as caught:
            await store.read("s")

    assert (caught.value.stream, caught.value.position) == ("s", position)


async def test_appends_queued_behind_a_lock_that_outlasts_the_wait_all_fail_typed(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process holds the write lock longer than the store waits: the leader's commit
    # fails, and so must every append queued behind it (none may wait forever).
    monkeypatch.setattr(writer_module, "BUSY_TIMEOUT_MS", 100)
    release = threading.Event()
    locked = threading.Event()

    def hold_lock() -> None:
        conn = apsw.Connection(str(db))
        conn.execute("BEGIN IMMEDIATE")
        locked.set()
        release.wait(10)
        conn.execute("COMMIT")
        conn.close()

    async with SQLiteStore.open(db) as store:
        await store.append("warm", 0, [note("warm", stream="warm")])
        holder = threading.Thread(target=hold_lock)
        holder.start()
        await trio.to_thread.run_sync(locked.wait)
        outcomes: dict[str, str] = {}

        async def append(name: str) -> None:
            try:
                await store.append(name, 0, [note(name, stream=name)])
                outcomes[name] = "ok"
            except StoreBusyError:
                outcomes[name] = "busy"

        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                for name in ("a", "b", "c"):
                    nursery.start_soon(append, name)
        release.set()
        await trio.to_thread.run_sync(holder.join)
        assert outcomes == {"a": "busy", "b": "busy", "c": "busy"}
        assert await store.stream_version("a") == 0
        await store.append("a", 0, [note("later", stream="a")])


# --- a read that fails leaves nothing open ------------------------------------------------


def wal_size(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


@pytest.mark.parametrize("read", ["read", "read_all"])
async def test_a_read_that_fails_to_decode_does_not_hold_back_later_reads_or_checkpoints(
    db: Path, read: str
) -> None:
    async with SQLiteStore.open(db) as store:
        await store.append("s", 0, [note("fine")])
        insert_row(db, "s", 1, b"\xc1\xc1\xc1")
        with pytest.raises(EventDecodeError):
            await (store.read("s") if read == "read" else store.read_all())

        # The reader connection that failed is the one the next read gets from the pool: it
        # must see what was committed after the failure, not the data as it was then.
        await store.append("t", 0, [note("later", stream="t")])
        assert texts(await store.read("t")) == ["later"]
        assert await store.stream_version("t") == 1

        # And no read transaction holds the WAL: a checkpoint copies all of it and empties it.
        assert wal_size(db) > 0
        conn = raw_connection(db)
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()
        assert busy == 0
        assert wal_size(db) == 0
        assert events_in_database_file(db) == 3


async def test_a_connection_left_inside_a_read_transaction_is_closed_not_pooled(db: Path) -> None:
    async with SQLiteStore.open(db) as store:
        await store.append("s", 0, [note("a"), note("b")])
        conn = store._readers.take()
        rows = conn.cursor().execute("SELECT data FROM batches")
        next(rows)  # a statement half-way through: a read transaction is open
        store._readers.give_back(conn)
        assert not store._readers.pooled(conn)
        with pytest.raises(apsw.ConnectionClosedError):
            conn.txn_state()
        # A connection whose read ended goes back to the pool.
        pooled = store._readers.take()
        pooled.cursor().execute("SELECT count(*) FROM batches").fetchall()
        store._readers.give_back(pooled)
        assert store._readers.pooled(pooled)


# --- typed errors: no apsw exception reaches a caller -------------------------------------


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (apsw.CorruptError, StoreCorruptError),
        (apsw.NotADBError, StoreCorruptError),
        (apsw.BusyError, StoreBusyError),
        (apsw.LockedError, StoreBusyError),
        (apsw.FullError, StoreFullError),
        (apsw.ReadOnlyError, StoreReadOnlyError),
        (apsw.IOError, StoreIOError),
        (apsw.CantOpenError, StoreIOError),
        (apsw.ConstraintError, StoreIOError),
    ],
)
def test_every_sqlite_error_becomes_a_store_error(
    error: type[apsw.Error], expected: type[StoreError]
) -> None:
    typed = store_error(error("what SQLite said"), "/data/x.db")
    assert type(typed) is expected
    assert isinstance(typed, StoreError) and isinstance(typed, LedgerError)
    assert "\n" not in str(typed) and "/data/x.db" in str(typed)


@pytest.mark.parametrize("durability", ["normal", "full"])
async def test_a_full_disk_fails_the_append_typed_and_writes_nothing(
    db: Path, durability: Durability
) -> None:
    async with SQLiteStore.open(db, durability=durability) as store:
        await store.append("s", 0, [note("first")])
        # SQLite's page limit stands in for a full disk: the same SQLITE_FULL.
        pages = pragma(store, "page_count")
        store._writer.execute(f"PRAGMA max_page_count={pages}")
        with pytest.raises(StoreFullError):
            await store.append("s", 1, [note("x" * 100_000)])
        assert await store.stream_version("s") == 1

        store._writer.execute("PRAGMA max_page_count=4294967294")
        await store.append("s", 1, [note("after")])
        assert texts(await store.read("s")) == ["first", "after"]


async def damaged_store(path: Path, damage: str) -> None:
    async with SQLiteStore.open(path) as store:
        for i in range(50):
            await store.append("s", i, [note(f"{i:04d}" * 500)])
    size = path.stat().st_size
    with path.open("r+b") as file:
        if damage == "truncated":
            file.truncate(size // 2)
        else:  # a page of rows overwritten with zeros (the first pages hold the tables)
            file.seek(size * 3 // 4 // PAGE_SIZE * PAGE_SIZE)
            file.write(bytes(PAGE_SIZE))


async def test_reading_a_damaged_page_raises_store_corrupt_error(db: Path) -> None:
    await damaged_store(db, "zeroed")
    async with SQLiteStore.open(db, create=False) as store:
        # SQLite's own page checks, or the checksum of an event on the page, catch it.
        with pytest.raises(StoreCorruptError, match=r"is damaged|does not match its checksum"):
            await store.read_all()
        with pytest.raises(StoreCorruptError):
            await store.read("s")


async def test_a_truncated_file_raises_store_corrupt_error(db: Path) -> None:
    await damaged_store(db, "truncated")
    with pytest.raises(StoreCorruptError, match="is damaged"):
        async with SQLiteStore.open(db, create=False) as store:
            await store.read_all()


# --- read-only files ----------------------------------------------------------------------


def side_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


@pytest.fixture
def read_only_db(db: Path) -> Iterator[Path]:
    """A closed store of two events, then made read-only (no write permission bit: SQLite
    would still write it as root, so the store must notice the mode itself)."""

    async def fill() -> None:
        async with SQLiteStore.open(db) as store:
            await store.append("s", 0, [note("a"), note("b")])

    trio.run(fill)
    assert side_files(db) == []
    db.chmod(0o444)
    yield db
    db.chmod(0o644)


def test_a_read_only_file_opens_for_reading_and_leaves_nothing_behind(read_only_db: Path) -> None:
    before = read_only_db.read_bytes()

    async def use() -> None:
        async with SQLiteStore.open(read_only_db) as store:
            assert store.read_only
            assert texts(await store.read("s")) == ["a", "b"]
            assert await store.streams() == ["s"]
            assert side_files(read_only_db) == []
            with pytest.raises(StoreReadOnlyError):
                await store.append("s", 2, [note("c")])
            with pytest.raises(StoreReadOnlyError):
                await store.save_snapshot(Snapshot("s", 2, 1, b"x"))
            assert await store.stream_version("s") == 2

    trio.run(use)
    assert side_files(read_only_db) == []
    assert read_only_db.read_bytes() == before


def test_a_file_on_a_read_only_mount_opens_read_only(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def fill() -> None:
        async with SQLiteStore.open(db) as store:
            await store.append("s", 0, [note("a")])

    trio.run(fill)
    real = os.statvfs

    def statvfs(path: Any) -> Any:
        result = real(path)
        flags = result.f_flag | os.ST_RDONLY if Path(path) == db else result.f_flag
        return SimpleNamespace(f_flag=flags)

    monkeypatch.setattr(os, "statvfs", statvfs)
    assert file_is_read_only(str(db))

    async def use() -> None:
        async with SQLiteStore.open(db) as store:
            assert store.read_only
            assert texts(await store.read("s")) == ["a"]

    trio.run(use)
    assert side_files(db) == []


async def test_a_read_only_file_another_store_has_open_is_read_through_its_wal(db: Path) -> None:
    async with SQLiteStore.open(db) as writer:
        await writer.append("s", 0, [note("a")])
        assert events_in_database_file(db) == 0  # committed, but only in the WAL yet
        db.chmod(0o444)
        try:
            async with SQLiteStore.open(db) as reader:
                assert reader.read_only
                assert texts(await reader.read("s")) == ["a"]
                await writer.append("s", 1, [note("b")])
                assert texts(await reader.read("s")) == ["a", "b"]
            assert side_files(db) == ["x.db-shm", "x.db-wal"]  # the writer's, still open
        finally:
            db.chmod(0o644)
    assert side_files(db) == []


async def test_a_read_only_file_that_is_no_store_is_refused(db: Path) -> None:
    db.write_bytes(b"")
    db.chmod(0o444)
    try:
        with pytest.raises(StoreSchemaError, match="has no contextledger events"):
            async with SQLiteStore.open(db):
                pass
    finally:
        db.chmod(0o644)
    assert side_files(db) == []
