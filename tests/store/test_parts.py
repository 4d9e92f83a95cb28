"""The SQLite store's parts, each on its own: the reader pool, the checkpointer and the
writer's group commit."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest
import trio
import trio.testing

import contextledger.store._checkpointer as checkpointer_module
from contextledger.store import StoreCorruptError, StoreError, StoreIOError
from contextledger.store._checkpointer import Checkpointer
from contextledger.store._connections import access_of, open_writer
from contextledger.store._readers import ReaderPool
from contextledger.store._schema import SCHEMA_VERSION
from contextledger.store._writer import GroupCommit
from tests.store._rows import schema_3_file


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A new store file, its writer closed again."""
    path = tmp_path / "x.db"
    writer = open_writer(str(path), access_of(str(path), True), "normal", True)
    writer.close()
    return path


def test_the_pool_reuses_a_connection_whose_read_ended(db: Path) -> None:
    pool = ReaderPool(str(db), access_of(str(db), False))
    first = pool.take()
    pool.give_back(first)
    assert pool.pooled(first)
    assert pool.query(lambda cur: cur.execute("SELECT count(*) FROM batches").fetchall()) == [(0,)]
    assert pool.take() is first
    pool.close()


def test_the_pool_closes_a_connection_left_inside_a_read(db: Path) -> None:
    pool = ReaderPool(str(db), access_of(str(db), False))

    def half_read(cur: apsw.Cursor) -> None:
        cur.execute("SELECT * FROM sqlite_master").fetchone()
        raise apsw.CorruptError("a damaged page half-way")

    with pytest.raises(StoreCorruptError):
        pool.query(half_read)
    conn = pool.take()
    assert conn.txn_state() == apsw.SQLITE_TXN_NONE  # a new or a clean one
    pool.give_back(conn)
    pool.close()
    with pytest.raises(apsw.ConnectionClosedError):
        conn.txn_state()


def watched_writer(
    db: Path, monkeypatch: pytest.MonkeyPatch, limit: str
) -> tuple[apsw.Connection, Checkpointer, list[int]]:
    """A writer on ``db`` that has created the table ``t``, the WAL's sizes after each of its
    commits, and a checkpointer whose ``limit`` (a constant of its module) is 10 pages."""
    access = access_of(str(db), False)
    writer = open_writer(str(db), access, "normal", False)
    page_size = writer.execute("PRAGMA page_size").get
    monkeypatch.setattr(checkpointer_module, limit, 10 * page_size)
    pages: list[int] = []
    writer.set_wal_hook(lambda conn, name, n: pages.append(n) or apsw.SQLITE_OK)
    writer.execute("CREATE TABLE t (x BLOB)")
    return writer, Checkpointer(str(db), access, page_size), pages


def test_the_checkpointer_copies_the_wal_once_it_has_grown(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, checkpointer, pages = watched_writer(db, monkeypatch, "CHECKPOINT_BYTES")
    checkpointer.wal_grew(pages[-1])
    assert checkpointer._thread is None  # not grown enough yet: not even started

    for _ in range(10):
        writer.execute("INSERT INTO t VALUES (zeroblob(8000))")
    checkpointer.wal_grew(pages[-1])

    # The database file alone (its WAL left out) comes to hold every row: they were copied.
    deadline = time.monotonic() + 10
    while rows_in_file_alone(db) != 10:
        assert time.monotonic() < deadline, "the WAL was not checkpointed"
        time.sleep(0.01)
    checkpointer.close()
    assert checkpointer._thread is not None and not checkpointer._thread.is_alive()
    writer.close()


def test_the_writer_restarts_the_wal_once_it_passes_the_limit(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, checkpointer, pages = watched_writer(db, monkeypatch, "WAL_LIMIT_BYTES")
    for _ in range(10):
        writer.execute("INSERT INTO t VALUES (zeroblob(8000))")
        checkpointer.wal_grew(pages[-1])
    assert checkpointer.limit_reached()

    checkpointer.restart_wal(writer)
    assert rows_in_file_alone(db) == 10  # every row copied into the database file
    assert not checkpointer.limit_reached()
    writer.execute("INSERT INTO t VALUES (1)")
    assert pages[-1] < 10  # this commit started the WAL over
    checkpointer.wal_grew(pages[-1])
    assert not checkpointer.limit_reached()
    assert checkpointer._thread is None  # the checkpointer thread had no part in it
    checkpointer.close()
    writer.close()


def rows_in_file_alone(db: Path) -> int | None:
    alone = db.with_name("alone.db")
    shutil.copyfile(db, alone)
    reader = apsw.Connection(str(alone))
    try:
        return int(reader.execute("SELECT count(*) FROM t").fetchone()[0])
    except apsw.SQLError:  # not even the table yet
        return None
    finally:
        reader.close()


# --- the writer's group commit -------------------------------------------------------------


class Recorder:
    """A plain table behind a ``GroupCommit``, counting its transactions and callbacks."""

    def __init__(self, path: Path, *, inline: bool) -> None:
        self.conn = apsw.Connection(str(path))
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("CREATE TABLE t (x INTEGER)")
        self.conn.set_busy_timeout(0)
        self.calls: list[str] = []
        self.commits = GroupCommit(
            self.conn,
            str(path),
            inline=inline,
            begun=lambda cur: self.calls.append("begun"),
            rolled_back=lambda: self.calls.append("rolled back"),
            committed=lambda: self.calls.append("committed"),
            upkeep_due=lambda: self.upkeep_due,
            upkeep=self.upkeep,
        )
        self.upkeep_due = False
        self.upkeep_threads: list[int] = []

    def upkeep(self) -> None:
        self.calls.append("upkeep")
        self.upkeep_threads.append(threading.get_ident())
        self.upkeep_due = False

    def insert(self, x: int) -> Callable[[apsw.Cursor], int]:
        def run(cur: apsw.Cursor) -> int:
            cur.execute("INSERT INTO t VALUES (?)", (x,))
            return x

        return run

    def rows(self) -> list[int]:
        return [x for (x,) in self.conn.execute("SELECT x FROM t ORDER BY x")]


async def test_writes_queued_behind_a_commit_share_the_next_one(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "g.db", inline=False)
    results: list[int] = []

    async def write(x: int) -> None:
        results.append(await recorder.commits.submit(recorder.insert(x), 8))

    async with trio.open_nursery() as nursery:
        for x in range(6):
            nursery.start_soon(write, x)

    assert sorted(results) == list(range(6)) == recorder.rows()
    # The first write leads alone; the five queued behind it share one more transaction.
    assert recorder.calls == ["begun", "committed"] * 2


async def test_a_write_that_fails_in_a_group_fails_alone(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "g.db", inline=False)
    failed: list[BaseException] = []
    release = threading.Event()

    def leader(cur: apsw.Cursor) -> int:
        release.wait(10)  # until the others are queued behind this commit
        return recorder.insert(0)(cur)

    def broken(cur: apsw.Cursor) -> int:
        cur.execute("INSERT INTO t VALUES (99)")
        cur.execute("INSERT INTO nowhere VALUES (1)")
        return 99

    async def write(run: Callable[[apsw.Cursor], int]) -> None:
        try:
            await recorder.commits.submit(run, 8)
        except StoreError as exc:
            failed.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write, leader)
        await trio.testing.wait_all_tasks_blocked()
        for run in (recorder.insert(1), recorder.insert(2), broken, recorder.insert(3)):
            nursery.start_soon(write, run)
        await trio.testing.wait_all_tasks_blocked()
        release.set()

    assert recorder.rows() == [0, 1, 2, 3]  # nothing of the broken write stayed
    assert [type(e) for e in failed] == [StoreIOError]
    # The four queued writes shared one transaction, which committed.
    assert recorder.calls == ["begun", "committed"] * 2


async def test_work_alone_runs_between_commits_and_writes_wait_for_it(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "g.db", inline=True)
    seen: list[list[int]] = []
    started = trio.Event()

    def work() -> None:
        trio.from_thread.run_sync(started.set)
        time.sleep(0.05)
        seen.append([x for (x,) in recorder.conn.execute("SELECT x FROM t")])

    async with trio.open_nursery() as nursery:
        await recorder.commits.submit(recorder.insert(1), 8)
        nursery.start_soon(recorder.commits.alone, work)
        await started.wait()
        await recorder.commits.submit(recorder.insert(2), 8)  # waits for the work

    assert seen == [[1]]
    assert recorder.rows() == [1, 2]


async def test_upkeep_due_runs_before_the_next_commit_on_its_worker_thread(
    tmp_path: Path,
) -> None:
    recorder = Recorder(tmp_path / "g.db", inline=True)
    await recorder.commits.submit(recorder.insert(1), 8)
    recorder.upkeep_due = True
    await recorder.commits.submit(recorder.insert(2), 8)
    await recorder.commits.submit(recorder.insert(3), 8)

    assert recorder.calls == ["begun", "committed", "upkeep"] + ["begun", "committed"] * 2
    [thread] = recorder.upkeep_threads
    assert thread != threading.get_ident()  # off the event loop's thread
    assert recorder.rows() == [1, 2, 3]


def open_at_once(path: Path, writers: int) -> list[BaseException]:
    """Open ``writers`` writers on ``path`` from as many threads at the same moment (each a
    connection of its own, as in another process); what they raised."""
    start = threading.Barrier(writers)
    failures: list[BaseException] = []

    def open_one() -> None:
        start.wait()
        try:
            open_writer(str(path), access_of(str(path), True), "normal", True).close()
        except BaseException as exc:  # reported by the caller
            failures.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


@pytest.mark.parametrize("schema", ["new", "old"])
def test_writers_opening_a_new_or_old_file_at_once_create_or_migrate_it_once(
    tmp_path: Path, schema: str
) -> None:
    """Several writers open the same new file, or a file of the previous store schema, at the
    same moment: each opens it, and the file ends of the current schema, whole."""
    for attempt in range(10):
        path = tmp_path / f"{schema}-{attempt}.db"
        if schema == "old":
            schema_3_file(path, damaged=False)
        assert open_at_once(path, 6) == [], f"attempt {attempt}"
        conn = apsw.Connection(str(path))
        assert conn.execute("PRAGMA user_version").get == SCHEMA_VERSION
        assert conn.execute("PRAGMA integrity_check").get == "ok"
        conn.close()
