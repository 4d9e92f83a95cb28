"""The WAL stays bounded under appends that come back to back: past ``WAL_LIMIT_BYTES`` the
writer restarts it between two commits, whether or not the checkpointer finds a gap, and a
reader of old data (in this process or another) neither fails the writer nor stalls it.

The limits are made small so that a test writes a few MB; every check counts bytes or log
lines, none times anything."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import pytest
import structlog.testing

import contextledger.store._checkpointer as checkpointer_module
from contextledger.store import ConcurrencyError, SQLiteStore, StoreFullError
from contextledger.store._checkpointer import Checkpointer
from contextledger.testing._store_contract import note
from tests.store._rows import raw_connection

CHECKPOINT_BYTES = 64 * 1024
RESTART_BYTES = 8 * CHECKPOINT_BYTES
LIMIT_BYTES = 2 * RESTART_BYTES
#: One append: about 60 kB of text, a few pages of the WAL, committed inline.
TEXT = "w" * 60_000
#: The WAL may pass the limit by the commit that crossed it (an append's pages, its stream
#: row and the frames' headers), far less than this.
SLACK_BYTES = 256 * 1024
#: SQLite's WAL file: a header, then a header before each page (a frame).
WAL_HEADER_BYTES = 32
FRAME_HEADER_BYTES = 24


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpointer_module, "CHECKPOINT_BYTES", CHECKPOINT_BYTES)
    monkeypatch.setattr(checkpointer_module, "WAL_RESTART_BYTES", RESTART_BYTES)
    monkeypatch.setattr(checkpointer_module, "WAL_LIMIT_BYTES", LIMIT_BYTES)


def wal_size(db: Path) -> int:
    wal = Path(f"{db}-wal")
    return wal.stat().st_size if wal.exists() else 0


async def append_bytes(store: SQLiteStore, total: int) -> int:
    """Append ``total`` bytes of text back to back, one append after another without a
    pause; the largest the WAL file was after any of them."""
    largest = 0
    version = await store.stream_version("s")
    for _ in range(total // len(TEXT)):
        await store.append("s", version, [note(TEXT)])
        version += 1
        largest = max(largest, wal_size(Path(store.path)))
    return largest


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("checkpointer", ["running", "never finding a gap"])
async def test_the_wal_stays_under_its_limit_under_back_to_back_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkpointer: str
) -> None:
    if checkpointer == "never finding a gap":
        # Its rounds copy nothing and never restart the WAL: what appends that come back to
        # back leave it at 500,000 events.
        monkeypatch.setattr(Checkpointer, "_checkpoint", lambda self, conn: False)
    db = tmp_path / "x.db"
    async with SQLiteStore.open(db) as store:
        largest = await append_bytes(store, 20 * LIMIT_BYTES)
        assert largest > LIMIT_BYTES // 2  # the appends did fill it
        assert largest <= LIMIT_BYTES + SLACK_BYTES
        assert len(await store.read("s")) == 20 * LIMIT_BYTES // len(TEXT)


@contextmanager
def reader_of_old_data(db: Path, where: str) -> Iterator[None]:
    """A connection inside a read transaction for the duration of the block, in this
    process or another: SQLite keeps every frame it may read, so the WAL cannot restart."""
    if where == "this process":
        conn = raw_connection(db)
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM batches").fetchall()
        try:
            yield
        finally:
            conn.execute("COMMIT")
            conn.close()
        return
    script = (
        "import sys, apsw\n"
        f"conn = apsw.Connection({str(db)!r})\n"
        "conn.execute('BEGIN')\n"
        "conn.execute('SELECT count(*) FROM batches').fetchall()\n"
        "print('reading', flush=True)\n"
        "sys.stdin.readline()\n"
        "conn.execute('COMMIT')\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        assert child.stdout.readline() == "reading\n"
        yield
    finally:
        child.stdin.write("\n")
        child.stdin.close()
        assert child.wait(30) == 0


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("where", ["this process", "another process"])
async def test_a_reader_of_old_data_neither_fails_nor_stalls_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.setattr(checkpointer_module, "WAL_LIMIT_WAIT_SECONDS", 0.01)
    db = tmp_path / "x.db"
    written = 6 * LIMIT_BYTES
    async with SQLiteStore.open(db) as store:
        await store.append("s", 0, [note("first")])
        with reader_of_old_data(db, where), structlog.testing.capture_logs() as logs:
            await append_bytes(store, written)  # every append succeeds
            pinned = wal_size(db)
        assert pinned > written  # the reader held every frame
        postponed = [log for log in logs if log["event"] == "wal restart postponed"]
        # The writer tried at the limit, then once per ``WAL_RESTART_BYTES`` more of the WAL,
        # each try bounded: not at every commit.
        assert 1 <= len(postponed) <= (pinned - LIMIT_BYTES) // RESTART_BYTES + 1

        # Once the reader is gone, the next try (within ``WAL_RESTART_BYTES``) restarts it,
        # and the file, which keeps its largest size, grows no further.
        largest = await append_bytes(store, written)
        assert largest <= pinned + RESTART_BYTES + SLACK_BYTES
        assert len(await store.read("s")) == 1 + 2 * (written // len(TEXT))


async def test_a_restart_the_writer_cannot_make_is_logged_and_the_append_lands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "x.db"

    def fail(conn: apsw.Connection, mode: int, deadline: float) -> None:
        raise apsw.IOError("disk I/O error")

    async with SQLiteStore.open(db) as store:
        await store.append("s", 0, [note("first")])
        monkeypatch.setattr(checkpointer_module, "checkpoint_until", fail)
        store._checkpointer.wal_pages = store._checkpointer._next_limit  # past the limit
        with structlog.testing.capture_logs() as logs:
            await store.append("s", 1, [note("second")])
        assert [log["event"] for log in logs] == ["wal restart failed"]
        assert [r.event.text for r in await store.read("s")] == ["first", "second"]
        assert not store._checkpointer.limit_reached()  # not tried again at once


@pytest.fixture
def restarts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The WAL's size in pages, as the writer counted it, at each restart the writer makes;
    the checkpointer thread never restarts it (its rounds find no gap)."""
    monkeypatch.setattr(Checkpointer, "_checkpoint", lambda self, conn: False)
    made: list[int] = []
    restart = Checkpointer.restart_wal

    def counted(self: Checkpointer, writer: apsw.Connection) -> None:
        made.append(self.wal_pages)
        restart(self, writer)

    monkeypatch.setattr(Checkpointer, "restart_wal", counted)
    return made


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("failure", ["a version conflict", "a full disk"])
async def test_a_failed_commit_leaves_the_wal_count_where_the_wal_is(
    tmp_path: Path, restarts: list[int], failure: str
) -> None:
    async with SQLiteStore.open(tmp_path / "x.db") as store:
        version = 0
        while not store._checkpointer.limit_reached():
            await store.append("s", version, [note(TEXT)])
            version += 1
        if failure == "a version conflict":
            with pytest.raises(ConcurrencyError):
                await store.append("s", version + 1, [note("late")])
        else:
            (pages,) = store._writer.execute("PRAGMA page_count").fetchone()
            store._writer.execute(f"PRAGMA max_page_count={pages}")
            with pytest.raises(StoreFullError):
                await store.append("s", version, [note(TEXT)])
            store._writer.execute("PRAGMA max_page_count=4294967294")
        # The restart ran before the failed commit; the WAL starts over with the next one.
        assert len(restarts) == 1
        await append_bytes(store, LIMIT_BYTES // 2)
        assert len(restarts) == 1  # half the limit written since: no restart due yet


@pytest.mark.usefixtures("small_limits")
async def test_after_reclaiming_space_the_wal_count_starts_from_the_empty_wal(
    tmp_path: Path, restarts: list[int]
) -> None:
    db = tmp_path / "x.db"
    async with SQLiteStore.open(db) as store:
        await store.append("gone", 0, [note(TEXT)])
        await append_bytes(store, 2 * LIMIT_BYTES)  # the vacuum copies more than the limit
        made = len(restarts)
        await store.delete_streams(["gone"])
        await store.reclaim_space()
        assert wal_size(db) == 0
        await store.append("s", await store.stream_version("s"), [note("after")])
        assert len(restarts) == made  # no restart of the WAL the truncate emptied
        (page_size,) = store._writer.execute("PRAGMA page_size").fetchone()
        frames = (wal_size(db) - WAL_HEADER_BYTES) // (page_size + FRAME_HEADER_BYTES)
        assert store._checkpointer.wal_pages == frames
