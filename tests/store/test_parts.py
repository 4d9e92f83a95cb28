"""The SQLite store's parts, each on its own: the reader pool and the checkpointer."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import apsw
import pytest

import contextledger.store._checkpointer as checkpointer_module
from contextledger.store import StoreCorruptError
from contextledger.store._checkpointer import Checkpointer
from contextledger.store._connections import access_of, open_writer
from contextledger.store._readers import ReaderPool


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
    assert pool.query(lambda cur: cur.execute("SELECT count(*) FROM events").fetchall()) == [(0,)]
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


def test_the_checkpointer_copies_the_wal_once_it_has_grown(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpointer_module, "CHECKPOINT_PAGES", 10)
    access = access_of(str(db), False)
    writer = open_writer(str(db), access, "normal", False)
    checkpointer = Checkpointer(str(db), access)
    pages = []
    writer.set_wal_hook(lambda conn, name, n: pages.append(n) or apsw.SQLITE_OK)
    writer.execute("CREATE TABLE t (x BLOB)")
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
