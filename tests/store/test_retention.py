"""Retention on SQLite beyond the store contract (``StoreContract`` runs deleting, expiring,
exporting and importing on every backend): the file shrinks, appends wait for a reclaim,
and another store on the same file never gives a deleted position again."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import apsw
import pytest
import trio

from contextledger.events import MemoryPinned
from contextledger.ledger import delete_session
from contextledger.store import SQLiteStore
from contextledger.testing._store_contract import write_session
from tests.store._rows import raw_connection


@pytest.fixture
async def store(tmp_path: Path) -> SQLiteStore:
    async with SQLiteStore.open(tmp_path / "x.db") as opened:
        yield opened


async def test_deleting_sessions_leaves_a_sound_file(store: SQLiteStore) -> None:
    await write_session(store, "root")
    await write_session(store, "child", parent="root")
    await write_session(store, "other")
    await delete_session(store, "root")
    assert await store.check() == []


async def test_another_store_never_gives_a_deleted_position_again(store: SQLiteStore) -> None:
    await write_session(store, "a")
    await write_session(store, "b")
    last = (await store.read_all())[-1].position
    await delete_session(store, "b")

    async with SQLiteStore.open(store.path) as reopened:
        again = await reopened.append("d", 0, [MemoryPinned(session_id="d", text="y")])

    assert again[0].position == last + 1


async def test_reclaiming_space_shrinks_the_file(store: SQLiteStore) -> None:
    for i in range(40):
        await write_session(store, f"s{i}")
    await write_session(store, "kept")
    kept = await store.read("kept")
    for i in range(40):
        await delete_session(store, f"s{i}")

    before, after = await store.reclaim_space()

    assert after < before / 4, (before, after)
    assert Path(store.path).stat().st_size == after
    assert await store.read("kept") == kept
    assert await store.check() == []
    await write_session(store, "after")
    assert await store.streams() == ["kept", "after"]


async def test_a_reclaim_waits_for_a_checkpoint_another_connection_runs(
    store: SQLiteStore,
) -> None:
    # SQLite refuses a checkpoint at once, without waiting, while another connection runs
    # one (the checkpointer thread, often, after the deletions). The reclaim's own
    # checkpoint runs after its VACUUM, so it is called here directly.
    await write_session(store, "s")
    path = Path(store.path)
    reader = raw_connection(path)  # holds another connection's checkpoint in the middle
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM batches").fetchall()
    checkpointing, let_go = threading.Event(), threading.Event()

    def wait_for_the_reader(tries: int) -> bool:
        checkpointing.set()
        let_go.wait()
        return True

    other = raw_connection(path)
    other.execute("PRAGMA journal_mode").fetchall()  # it learns the file is in WAL mode
    other.set_busy_handler(wait_for_the_reader)

    def truncate_meanwhile() -> None:
        assert checkpointing.wait(10)
        threading.Timer(0.3, lambda: (reader.execute("COMMIT"), let_go.set())).start()
        store._truncate_wal(time.monotonic() + 10)

    async with trio.open_nursery() as nursery:
        checkpoint = (other.wal_checkpoint, None, apsw.SQLITE_CHECKPOINT_RESTART)
        nursery.start_soon(trio.to_thread.run_sync, *checkpoint)
        await trio.to_thread.run_sync(truncate_meanwhile)

    other.close()
    reader.close()
    assert Path(f"{path}-wal").stat().st_size == 0


async def test_appends_during_a_reclaim_wait_and_land(store: SQLiteStore) -> None:
    for i in range(10):
        await write_session(store, f"s{i}")
    await delete_session(store, "s0")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.reclaim_space)
        for i in range(5):
            nursery.start_soon(write_session, store, f"new{i}")

    assert len(await store.streams()) == 14
    assert await store.check() == []
