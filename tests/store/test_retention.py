"""Retention: deleting a session with its children, deleting by age, giving the room back,
and moving a session through a portable file with identical events."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from contextledger.events import MemoryPinned
from contextledger.ledger import (
    InvalidExport,
    SessionLog,
    check_sessions,
    delete_session,
    expire_sessions,
    export_session,
    import_session,
    session_tree,
)
from contextledger.store import ConcurrencyError, SQLiteStore
from contextledger.testing._builder import SessionBuilder

DAY_MS = 86_400_000
START_MS = 1_767_225_600_000


async def write(
    store: SQLiteStore, session: str, *, parent: str | None = None, at_ms: int = START_MS
) -> int:
    """A small session (started, a user message, an answer); returns its event count."""
    builder = SessionBuilder(session, parent_session_id=parent, start_ms=at_ms)
    answer = builder.assistant(builder.user("hello " * 50))
    builder.text(answer, "an answer " * 50)
    builder.finish(answer)
    log = await SessionLog.open(store, session, snapshot_every=2)
    await log.append(builder.events)
    return len(builder.events)


@pytest.fixture
async def store(tmp_path: Path) -> SQLiteStore:
    async with SQLiteStore.open(tmp_path / "x.db") as opened:
        yield opened


async def test_deleting_a_session_deletes_its_children_and_nothing_else(
    store: SQLiteStore,
) -> None:
    sizes = {}
    sizes["root"] = await write(store, "root")
    sizes["child"] = await write(store, "child", parent="root")
    sizes["other"] = await write(store, "other")
    sizes["grandchild"] = await write(store, "grandchild", parent="child")
    kept = await store.read("other")

    assert await session_tree(store, "root") == ["root", "child", "grandchild"]
    sessions, events = await delete_session(store, "root")

    assert sessions == ["root", "child", "grandchild"]
    assert events == sizes["root"] + sizes["child"] + sizes["grandchild"]
    assert await store.streams() == ["other"]
    assert await store.read("other") == kept
    for session in sessions:
        assert await store.read(session) == []
        assert await store.stream_version(session) == 0
        assert await store.load_snapshot(session) is None
    assert await store.check() == []
    assert await check_sessions(store) == []


async def test_deleting_a_session_that_does_not_exist_deletes_nothing(
    store: SQLiteStore,
) -> None:
    await write(store, "a")
    assert await delete_session(store, "nope") == ([], 0)
    assert await store.streams() == ["a"]


async def test_positions_are_never_given_twice_after_deleting_the_newest_session(
    store: SQLiteStore,
) -> None:
    await write(store, "a")
    await write(store, "b")
    last = (await store.read_all())[-1].position
    await delete_session(store, "b")

    recorded = await store.append("c", 0, [MemoryPinned(session_id="c", text="x")])

    assert recorded[0].position == last + 1
    async with SQLiteStore.open(store.path) as reopened:  # another store sees it too
        again = await reopened.append("d", 0, [MemoryPinned(session_id="d", text="y")])
    assert again[0].position == last + 2


async def test_reclaiming_space_shrinks_the_file(store: SQLiteStore) -> None:
    for i in range(40):
        await write(store, f"s{i}")
    await write(store, "kept")
    kept = await store.read("kept")
    for i in range(40):
        await delete_session(store, f"s{i}")

    before, after = await store.reclaim_space()

    assert after < before / 4, (before, after)
    assert Path(store.path).stat().st_size == after
    assert await store.read("kept") == kept
    assert await store.check() == []
    await write(store, "after")
    assert await store.streams() == ["kept", "after"]


async def test_appends_during_a_reclaim_wait_and_land(store: SQLiteStore) -> None:
    for i in range(10):
        await write(store, f"s{i}")
    await delete_session(store, "s0")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.reclaim_space)
        for i in range(5):
            nursery.start_soon(write, store, f"new{i}")

    assert len(await store.streams()) == 14
    assert await store.check() == []


async def test_expiring_deletes_session_trees_whose_newest_event_is_older(
    store: SQLiteStore,
) -> None:
    await write(store, "old", at_ms=START_MS)
    await write(store, "old_child", parent="old", at_ms=START_MS + DAY_MS)
    await write(store, "kept", at_ms=START_MS)
    await write(store, "recent_child", parent="kept", at_ms=START_MS + 20 * DAY_MS)
    await write(store, "recent", at_ms=START_MS + 20 * DAY_MS)

    sessions, events = await expire_sessions(store, START_MS + 10 * DAY_MS)

    assert sessions == ["old", "old_child"]
    assert events > 0
    assert await store.streams() == ["kept", "recent_child", "recent"]


# --- export and import -----------------------------------------------------------------------


async def exported(store: SQLiteStore, session: str) -> list[bytes]:
    return [line async for line in export_session(store, session)]


async def test_an_exported_session_imports_back_with_identical_events(
    store: SQLiteStore, tmp_path: Path
) -> None:
    await write(store, "other")
    await write(store, "ses")
    lines = await exported(store, "ses")
    original = await store.read("ses")

    async with SQLiteStore.open(tmp_path / "copy.db") as copy:
        log = await import_session(copy, lines)
        restored = await copy.read("ses")
        assert await copy.check() == []

    assert [(r.seq, r.event) for r in restored] == [(r.seq, r.event) for r in original]
    assert log.history == (await SessionLog.open(store, "ses")).history
    assert lines[0].startswith(b'{"format":"contextledger-session","version":1')


async def test_importing_a_session_that_exists_raises_and_writes_nothing(
    store: SQLiteStore,
) -> None:
    await write(store, "ses")
    lines = await exported(store, "ses")
    before = await store.read_all()

    with pytest.raises(ConcurrencyError):
        await import_session(store, lines)

    assert await store.read_all() == before


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda lines: [], "no header line"),
        (lambda lines: [b'{"format": "other"}\n', *lines[1:]], "no such format"),
        (lambda lines: [lines[0].replace(b'"version":1', b'"version":9'), *lines[1:]], "9"),
        (lambda lines: [lines[0], *lines[2:]], "seq 2 where 1 belongs"),
        (lambda lines: lines[:-1], "events where the header says"),
        (lambda lines: [*lines[:2], b"not json\n", *lines[3:]], "line 3"),
        (lambda lines: [*lines[:2], b'{"seq":2,"v":1,"data":"AAAA"}\n', *lines[3:]], "line 3"),
    ],
    ids=["empty", "format", "version", "gap", "short", "not-json", "not-an-event"],
)
async def test_a_file_that_is_not_an_export_raises_and_writes_nothing(
    store: SQLiteStore, tmp_path: Path, damage: object, message: str
) -> None:
    await write(store, "ses")
    lines = damage(await exported(store, "ses"))  # type: ignore[operator]

    async with SQLiteStore.open(tmp_path / "copy.db") as copy:
        with pytest.raises(InvalidExport, match=message):
            await import_session(copy, lines)
        assert await copy.streams() == []
