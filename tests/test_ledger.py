"""SessionLog: type-checked and validated appends, optimistic concurrency, snapshot + tail
loading, snapshots that fail after a commit."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from unittest import mock

import apsw
import msgspec
import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.events import (
    EnvironmentCaptured,
    Event,
    InvalidEvent,
    MemoryPinned,
    MessageAdded,
    PartAdded,
    ToolPart,
    ToolPending,
)
from contextledger.history import SNAPSHOT_SCHEMA, History, _pages, _projection, model_view
from contextledger.ledger import SessionLog, SessionReplacedError, delete_session
from contextledger.store import (
    ConcurrencyError,
    EventStore,
    MemoryStore,
    Snapshot,
    SQLiteStore,
    StoreFullError,
)
from contextledger.testing._builder import DEFAULT_START_MS, SessionBuilder
from contextledger.testing._strategies import session_events


def _turns(b: SessionBuilder, n: int) -> None:
    for i in range(n):
        reply = b.assistant(b.user(f"turn {i}"))
        call = b.tool_call(reply, "bash", {"command": f"echo {i}"})
        b.tool_result(call, str(i))
        b.finish(reply, "tool-calls")


async def test_a_new_session_opens_empty() -> None:
    log = await SessionLog.open(MemoryStore(), "ses_new")
    assert log.history.messages == [] and log.history.seq == 0


async def test_appends_are_applied_to_the_projection() -> None:
    b = SessionBuilder()
    _turns(b, 2)
    log = await SessionLog.open(MemoryStore(), b.session_id)
    recorded = await log.append(b.events)
    assert [r.seq for r in recorded] == list(range(1, len(b.events) + 1))
    assert log.history == History.rebuild(b.session_id, recorded)


async def test_an_invalid_batch_writes_nothing_and_changes_nothing() -> None:
    store = MemoryStore()
    b = SessionBuilder()
    _turns(b, 1)
    log = await SessionLog.open(store, b.session_id)
    await log.append(b.events)
    before = log.history.snapshot()
    bad = MessageAdded(session_id=b.session_id, message_id="msg_0", role="user")
    with pytest.raises(InvalidEvent):
        await log.append([bad])
    assert log.history.snapshot() == before
    assert await store.stream_version(b.session_id) == len(b.events)


async def test_a_second_writer_gets_a_concurrency_error_until_it_refreshes() -> None:
    store = MemoryStore()
    b = SessionBuilder()
    first = await SessionLog.open(store, b.session_id)
    await first.append(b.events)
    second = await SessionLog.open(store, b.session_id)
    user = b.user("from the first writer")
    await first.append(b.events[-2:])
    b2_event = MessageAdded(session_id=b.session_id, message_id=b.new_message_id(), role="user")
    with pytest.raises(ConcurrencyError):
        await second.append([b2_event])
    assert await second.refresh() == 2
    assert second.history.message(user).role == "user"
    await second.append([b2_event])


async def _one_by_one(store: MemoryStore, turns: int, snapshot_every: int) -> SessionLog:
    """A session of ``turns`` turns appended an event at a time."""
    b = SessionBuilder()
    _turns(b, turns)
    log = await SessionLog.open(store, b.session_id, snapshot_every=snapshot_every)
    for event in b.events:
        await log.append([event])
    return log


async def test_snapshots_are_written_every_n_events_and_used_on_open() -> None:
    store = MemoryStore()
    log = await _one_by_one(store, 10, 25)
    snapshot = await store.load_snapshot(log.session_id)
    assert snapshot is not None
    assert snapshot.seq == 25 * (log.history.seq // 25)
    reopened = await SessionLog.open(store, log.session_id)
    assert reopened.history == log.history


class Recording(MemoryStore):
    """A memory store that keeps every snapshot it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[Snapshot] = []

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        self.saved.append(snapshot)
        await super().save_snapshot(snapshot)


async def test_a_snapshot_holds_only_the_messages_changed_since_the_one_before() -> None:
    store = Recording()
    log = await _one_by_one(store, 60, 5)
    recorded = await store.read(log.session_id)

    def chunks_at(seq: int) -> dict[str, bytes]:
        return History.rebuild(log.session_id, recorded[:seq]).snapshot_chunks()

    saved = store.saved
    assert [s.seq for s in saved] == list(range(5, log.history.seq + 1, 5))
    assert (saved[0].base, saved[0].chunks) == (0, chunks_at(5))
    for before, snapshot in itertools.pairwise(saved):
        old, new = chunks_at(before.seq), chunks_at(snapshot.seq)
        assert snapshot.base == before.seq
        assert snapshot.chunks == {k: v for k, v in new.items() if old.get(k) != v}
    assert len(log.history.messages) > 10 * max(len(s.chunks) for s in saved[1:])
    reopened = await SessionLog.open(store, log.session_id)
    assert reopened.history == log.history


async def _snapshot_at_six(store: MemoryStore) -> tuple[SessionLog, SessionBuilder]:
    """A log of a four-turn session written up to seq 6, with a snapshot there."""
    b = SessionBuilder()
    _turns(b, 4)
    log = await SessionLog.open(store, b.session_id, snapshot_every=5)
    await log.append(b.events[:6])
    return log, b


async def test_a_snapshot_builds_on_a_later_one_of_another_writer() -> None:
    store = Recording()
    log, b = await _snapshot_at_six(store)
    other = await SessionLog.open(store, b.session_id)
    await other.append(b.events[6:12])
    await other.save_snapshot()
    await log.refresh()
    await log.append(b.events[12:])

    # The messages changed since seq 6 include those changed since the other's seq 12.
    assert [(s.seq, s.base) for s in store.saved] == [(6, 0), (12, 6), (len(b.events), 6)]
    reopened = await SessionLog.open(store, b.session_id)
    assert reopened.history == log.history


async def test_a_snapshot_that_cannot_build_on_the_stored_one_is_written_whole() -> None:
    store = Recording()
    log, b = await _snapshot_at_six(store)
    await store.save_snapshot(Snapshot(b.session_id, 3, SNAPSHOT_SCHEMA + 1, b"another's"))
    await log.append(b.events[6:])

    assert [(s.seq, s.base) for s in store.saved[2:]] == [(len(b.events), 6), (len(b.events), 0)]
    reopened = await SessionLog.open(store, b.session_id)
    assert reopened.history == log.history


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=session_events(max_moves=20), data=st.data())
async def test_snapshots_of_what_changed_restore_the_projection(
    events: list[Event], data: st.DataObject
) -> None:
    # Batches of any size, snapshots at any interval, and writers that take over from the
    # stored snapshot: every open equals a rebuild from the events.
    store = MemoryStore()
    session_id = events[0].session_id
    intervals = st.integers(1, 8)
    log = await SessionLog.open(store, session_id, snapshot_every=data.draw(intervals))
    written = 0
    while written < len(events):
        size = data.draw(st.integers(1, 6))
        await log.append(events[written : written + size])
        written += size
        if data.draw(st.booleans()):
            log = await SessionLog.open(store, session_id, snapshot_every=data.draw(intervals))
            assert log.history == History.rebuild(session_id, await store.read(session_id))
    reopened = await SessionLog.open(store, session_id)
    assert reopened.history == log.history


async def test_a_snapshot_of_another_schema_is_ignored() -> None:
    store = MemoryStore()
    b = SessionBuilder()
    _turns(b, 2)
    log = await SessionLog.open(store, b.session_id)
    await log.append(b.events)
    await store.save_snapshot(Snapshot(b.session_id, 3, SNAPSHOT_SCHEMA + 1, b"garbage"))
    reopened = await SessionLog.open(store, b.session_id)
    assert reopened.history == log.history


def test_snapshot_every_must_be_positive() -> None:
    with pytest.raises(ValueError, match="snapshot_every"):
        SessionLog(MemoryStore(), History("s"), snapshot_every=0)


# --- every event is type-checked before it is written -------------------------------------

_WRONG_VALUES: tuple[object, ...] = (b"bytes", 1.5, "text", 7, True, ["x"], {"key": "value"}, None)


def _fits(value: object, kind: msgspec.inspect.Type) -> bool:
    """Whether ``value`` has the Python type ``kind`` declares (written out by hand, so the
    test does not ask msgspec what msgspec will be asked)."""
    match kind:
        case msgspec.inspect.AnyType():
            return True
        case msgspec.inspect.NoneType():
            return value is None
        case msgspec.inspect.StrType():
            return type(value) is str
        case msgspec.inspect.BoolType():
            return type(value) is bool
        case msgspec.inspect.IntType():
            return type(value) is int
        case msgspec.inspect.FloatType():
            return type(value) in (int, float)
        case msgspec.inspect.LiteralType(values=values):
            return any(type(value) is type(v) and value == v for v in values)
        case msgspec.inspect.UnionType(types=types):
            return any(_fits(value, t) for t in types)
        case msgspec.inspect.DictType(key_type=key, value_type=item):
            return type(value) is dict and all(
                _fits(k, key) and _fits(v, item) for k, v in value.items()
            )
        case (
            msgspec.inspect.VarTupleType(item_type=item) | msgspec.inspect.ListType(item_type=item)
        ):
            return type(value) in (list, tuple) and all(_fits(v, item) for v in value)  # type: ignore[attr-defined]
        case msgspec.inspect.TupleType(item_types=items):
            return (
                type(value) in (list, tuple)
                and len(value) == len(items)  # type: ignore[arg-type]
                and all(_fits(v, t) for v, t in zip(value, items, strict=True))  # type: ignore[call-overload]
            )
    return False  # a struct: none of the wrong values is one


def _fields(value: msgspec.Struct, prefix: str = "") -> list[tuple[str, msgspec.inspect.Type]]:
    """Every field of ``value`` and of the structs inside it, by dotted path, with its type."""
    info = msgspec.inspect.type_info(type(value))
    assert isinstance(info, msgspec.inspect.StructType)
    found: list[tuple[str, msgspec.inspect.Type]] = []
    for field in info.fields:
        path = f"{prefix}{field.name}"
        found.append((path, field.type))
        inner = getattr(value, field.name)
        if isinstance(inner, msgspec.Struct):
            found.extend(_fields(inner, f"{path}."))
    return found


def _replaced(value: msgspec.Struct, path: str, new: object) -> Any:
    """``value`` with the field at dotted ``path`` set to ``new`` (unchecked, as a caller
    building a struct by hand would)."""
    name, _, rest = path.partition(".")
    inner = new if not rest else _replaced(getattr(value, name), rest, new)
    return msgspec.structs.replace(value, **{name: inner})


@st.composite
def _wrongly_typed(draw: st.DrawFn) -> tuple[list[Event], list[Event], int, str]:
    """A valid session cut in two, the second part with one field of one event set to a
    value of the wrong type: (the first part, the bad batch, the bad event's index, the
    field's path)."""
    events = draw(session_events(max_moves=6))
    cut = draw(st.integers(1, len(events)))
    head, rest = events[:cut], events[cut:]
    if not rest:
        rest = [MemoryPinned(session_id=events[0].session_id, text="pinned")]
    index = draw(st.integers(0, len(rest) - 1))
    choices = [
        (path, value)
        for path, kind in _fields(rest[index])
        for value in _WRONG_VALUES
        if not _fits(value, kind)
    ]
    path, value = draw(st.sampled_from(choices))
    batch = [*rest[:index], _replaced(rest[index], path, value), *rest[index + 1 :]]
    return head, batch, index, path


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_wrongly_typed())
async def test_a_wrongly_typed_field_is_refused_with_nothing_written(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[list[Event], list[Event], int, str]
) -> None:
    head, batch, index, path = case
    session_id = head[0].session_id
    async with SQLiteStore.open(tmp_path_factory.mktemp("db") / "x.db") as store:
        log = await SessionLog.open(store, session_id)
        await log.append(head)
        before = log.history.snapshot()

        with pytest.raises(InvalidEvent) as caught:
            await log.append(batch)

        # A wrong container is named down to its first wrong item: ``state.attachments[0]``.
        field = caught.value.field
        assert caught.value.index == index
        assert field is not None and (field == path or field.startswith(f"{path}["))
        assert log.history.snapshot() == before
        assert await store.stream_version(session_id) == len(head)
        reopened = await SessionLog.open(store, session_id)
        assert reopened.history == log.history


async def test_the_projection_holds_what_a_read_of_the_store_gives(tmp_path: Path) -> None:
    # Tuples inside untyped fields read back as lists, an int cost as a float: the live
    # projection holds the checked copies, so it equals one rebuilt from the store.
    b = SessionBuilder()
    reply = b.assistant(b.user("hi"))
    call = b.tool_call(reply, "bash", {"argv": ("ls", "-l")})
    b.tool_result(call, "ok")
    b.finish(reply, "tool-calls")
    async with SQLiteStore.open(tmp_path / "x.db") as store:
        log = await SessionLog.open(store, b.session_id)
        await log.append(b.events)
        rebuilt = History.rebuild(b.session_id, await store.read(b.session_id))
    assert log.history == rebuilt


# --- a snapshot that fails after the batch committed ----------------------------------------


class SnapshotsFail(MemoryStore):
    """A store whose snapshot writes fail (as on a full disk)."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error
        self.attempts = 0

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        self.attempts += 1
        raise self.error


@pytest.mark.parametrize(
    "error", [StoreFullError("disk full"), OSError(28, "No space left on device")]
)
async def test_a_failed_snapshot_is_logged_and_the_append_returns(error: Exception) -> None:
    store = SnapshotsFail(error)
    b = SessionBuilder()
    _turns(b, 2)
    log = await SessionLog.open(store, b.session_id, snapshot_every=5)
    with structlog.testing.capture_logs() as logs:
        recorded = await log.append(b.events)
    assert [r.seq for r in recorded] == list(range(1, len(b.events) + 1))
    assert log.history.seq == len(b.events)
    assert await store.stream_version(b.session_id) == len(b.events)
    assert store.attempts == 1
    (warning,) = [line for line in logs if line["event"] == "snapshot failed"]
    assert warning["log_level"] == "warning"
    assert type(error).__name__ in warning["error"]
    reopened = await SessionLog.open(store, b.session_id)
    assert reopened.history == log.history


async def test_a_failed_snapshot_is_tried_again_only_after_another_interval() -> None:
    store = SnapshotsFail(StoreFullError("disk full"))
    b = SessionBuilder()
    _turns(b, 4)
    log = await SessionLog.open(store, b.session_id, snapshot_every=10)
    for event in b.events:
        await log.append([event])
    assert store.attempts == len(b.events) // 10


async def test_a_snapshot_sqlite_refuses_to_write_does_not_fail_the_append(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.db"
    b = SessionBuilder()
    _turns(b, 2)
    async with SQLiteStore.open(path) as store:
        # Every snapshot write is refused inside SQLite, after the events have committed.
        store._writer.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON snapshots "
            "BEGIN SELECT RAISE(ABORT, 'no room for snapshots'); END"
        )
        log = await SessionLog.open(store, b.session_id, snapshot_every=5)
        with structlog.testing.capture_logs() as logs:
            await log.append(b.events)
        assert [line["event"] for line in logs].count("snapshot failed") == 1
        assert "no room for snapshots" in next(
            line["error"] for line in logs if line["event"] == "snapshot failed"
        )
        assert await store.stream_version(b.session_id) == len(b.events)
        assert await store.load_snapshot(b.session_id) is None
        reopened = await SessionLog.open(store, b.session_id)
        assert reopened.history == log.history


# --- a session opened from its snapshot reads it as it goes --------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=session_events(max_moves=20), data=st.data(), page_rows=st.integers(1, 4))
async def test_a_session_opened_lazily_views_validates_and_appends_as_a_rebuilt_one(
    events: list[Event], data: st.DataObject, page_rows: int
) -> None:
    # Pages of a few ids, so that the tables span many; nothing is compared whole (which
    # reads every message) before the end.
    with (
        mock.patch.object(_pages, "PAGE_ROWS", page_rows),
        mock.patch.object(_projection, "PAGE_ROWS", page_rows),
    ):
        store = MemoryStore()
        session_id = events[0].session_id
        split = data.draw(st.integers(1, len(events)))
        log = await SessionLog.open(store, session_id, snapshot_every=data.draw(st.integers(1, 8)))
        await log.append(events[:split])
        await log.save_snapshot()
        log = await SessionLog.open(store, session_id)
        rebuilt = History.rebuild(session_id, await store.read(session_id))
        assert model_view(log.history) == model_view(rebuilt)
        written = split
        last: list[Event] = events[:split]
        while written < len(events):
            # The batch just written may not follow itself: both say why alike.
            assert _refusal(log.history, last) == _refusal(rebuilt, last)
            last = events[written : written + data.draw(st.integers(1, 6))]
            recorded = await log.append(last)
            rebuilt.apply_all(recorded)
            written += len(last)
            assert model_view(log.history) == model_view(rebuilt)
            assert len(log.history.messages) == len(rebuilt.messages)
        assert log.history == rebuilt
        assert log.history.index.facts() == rebuilt.index.facts()


def _refusal(history: History, events: list[Event]) -> str | None:
    try:
        history.validate(events)
    except InvalidEvent as exc:
        return str(exc)
    return None


async def _saved_with_snapshot(store: EventStore, b: SessionBuilder) -> None:
    """Three turns written to ``store`` and a snapshot of them."""
    _turns(b, 3)
    log = await SessionLog.open(store, b.session_id)
    await log.append(b.events)
    await log.save_snapshot()


async def test_a_chunk_another_writer_changed_after_opening_is_not_taken() -> None:
    store = MemoryStore()
    b = SessionBuilder()
    await _saved_with_snapshot(store, b)
    first = b.events[1]
    assert isinstance(first, MessageAdded)
    stale = await SessionLog.open(store, b.session_id)  # reads nothing of the first turn
    other = await SessionLog.open(store, b.session_id)
    b.add(MemoryPinned, text="remember")
    b.add(EnvironmentCaptured, user_message_id=first.message_id, text="env")
    await other.append(b.events[-2:])
    await other.save_snapshot()  # the first message's chunk now holds the environment
    with structlog.testing.capture_logs() as logs:
        await stale.refresh()
        assert stale.history.message(first.message_id) == other.history.message(first.message_id)
    assert [e["event"] for e in logs] == ["snapshot unusable, rebuilding"]
    assert stale.history == History.rebuild(b.session_id, await store.read(b.session_id))


async def test_a_chunk_damaged_after_opening_is_read_from_the_events(tmp_path: Path) -> None:
    path = tmp_path / "lazy.db"
    b = SessionBuilder()
    async with SQLiteStore.open(path) as store:
        await _saved_with_snapshot(store, b)
    async with SQLiteStore.open(path) as store:
        reopened = await SessionLog.open(store, b.session_id)
        conn = apsw.Connection(str(path))
        conn.execute("UPDATE snapshot_chunks SET data = zeroblob(length(data))")
        conn.close()
        with structlog.testing.capture_logs() as logs:
            assert model_view(reopened.history)
        assert [e["event"] for e in logs] == ["snapshot unusable, rebuilding"]
        assert "checksum" in logs[0]["error"]
        assert reopened.history == History.rebuild(b.session_id, await store.read(b.session_id))


# --- a restored session's tool call ids ----------------------------------------------------


class _ReadsNoted(MemoryStore):
    """A ``MemoryStore`` noting the key of every chunk its snapshot readers read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def snapshot_reader(self, stream: str) -> Any:
        reader = super().snapshot_reader(stream)
        reads = self.reads

        class Noted:
            def chunk(self, key: str) -> bytes | None:
                reads.append(key)
                return reader.chunk(key)

            def events(self) -> Any:
                return reader.events()

        return Noted()


def _call(b: SessionBuilder, call_id: str) -> list[Event]:
    """A new turn whose reply calls a tool under ``call_id`` (not added to ``b``)."""
    start = len(b.events)
    reply = b.assistant(b.user("again"))
    turn = b.events[start:]
    del b.events[start:]
    part = ToolPart(
        id=b.new_part_id(), message_id=reply, call_id=call_id, tool="bash", state=ToolPending()
    )
    return [*turn, PartAdded(session_id=b.session_id, part=part)]


@pytest.mark.parametrize("turns", [4, 400])
async def test_a_restored_session_checks_a_call_id_reading_what_it_needs_only(turns: int) -> None:
    # Pages of 64 ids: the ids of 400 calls fill 7 pages, their fingerprints one per bucket.
    with (
        mock.patch.object(_pages, "PAGE_ROWS", 64),
        mock.patch.object(_projection, "PAGE_ROWS", 64),
    ):
        store = _ReadsNoted()
        b = SessionBuilder()
        _turns(b, turns)
        log = await SessionLog.open(store, b.session_id, snapshot_every=10**9)
        await log.append(b.events)
        await log.save_snapshot()
        written = len(b.events)
        _turns(b, 2)  # a tail after the snapshot
        await log.append(b.events[written:])
        rebuilt = History.rebuild(b.session_id, await store.read(b.session_id))
        for call_id, used in [
            ("call_0001", True),  # before the snapshot
            (f"call_{turns:04d}", True),  # its last
            (f"call_{turns + 1:04d}", True),  # after it
            ("call_new", False),
        ]:
            store.reads.clear()
            restored = (await SessionLog.open(store, b.session_id)).history
            batch = _call(b, call_id)
            refusal = _refusal(restored, batch)
            assert refusal == _refusal(rebuilt, batch)
            assert (refusal is not None and "used already" in refusal) == used
            if not used:
                # Of the call ids, the last page (the tail's calls were added to it); of
                # fingerprints, the page of the new call's bucket and those the tail's two
                # calls were added to: whatever the session's length.
                pages = [key[:2] for key in store.reads]
                assert pages.count("~c") <= 1
                assert pages.count("~f") <= 3


async def test_a_restored_session_reads_a_bucket_of_fingerprints_once_for_every_new_call() -> None:
    """Each new call's id is looked up among its bucket's fingerprints; the bucket is read once
    and then only what was added to it, not again for every call."""
    store = MemoryStore()
    b = SessionBuilder()
    await _saved_with_snapshot(store, b)
    log = await SessionLog.open(store, b.session_id)
    same = [c for c in (f"call_new{n}" for n in range(200)) if _pages.call_fingerprint(c)[0] == 0]
    read: list[int] = []
    column = _pages.PageTable.column

    def noted(table: _pages.PageTable, c: int, start: int = 0) -> list[str]:
        read.append(len(table) - start)
        return column(table, c, start)

    with mock.patch.object(_pages.PageTable, "column", noted):
        for call_id in same[:4]:
            batch = _call(b, call_id)
            assert _refusal(log.history, batch) is None
            await log.append(batch)
            b.events.extend(batch)
    # The first lookup reads the bucket's rows; each later one only the row its call added.
    assert read[0] >= 0 and read[1:] == [1, 1, 1]


async def test_a_call_another_writer_made_after_opening_is_not_used_yet() -> None:
    store = MemoryStore()
    b = SessionBuilder()
    await _saved_with_snapshot(store, b)
    stale = await SessionLog.open(store, b.session_id)
    other = await SessionLog.open(store, b.session_id)
    batch = _call(b, "call_later")
    at_open = _refusal(History.rebuild(b.session_id, await store.read(b.session_id)), batch)
    assert at_open is None
    await other.append(batch)
    await other.save_snapshot()  # its chunks now list call_later

    assert _refusal(stale.history, batch) == at_open
    assert _refusal(other.history, _call(b, "call_later")) is not None


async def test_damaged_call_fingerprints_are_read_from_the_events(tmp_path: Path) -> None:
    path = tmp_path / "calls.db"
    b = SessionBuilder()
    async with SQLiteStore.open(path) as store:
        await _saved_with_snapshot(store, b)
    conn = apsw.Connection(str(path))
    conn.execute("UPDATE snapshot_chunks SET data = x'c1' WHERE key LIKE '~f%'")
    conn.close()
    async with SQLiteStore.open(path) as store:
        reopened = await SessionLog.open(store, b.session_id)
        rebuilt = History.rebuild(b.session_id, await store.read(b.session_id))
        with structlog.testing.capture_logs() as logs:
            for call_id in ("call_0001", "call_new"):
                batch = _call(b, call_id)
                assert _refusal(reopened.history, batch) == _refusal(rebuilt, batch)
        assert [e["event"] for e in logs] == ["snapshot unusable, rebuilding"]


# --- a session deleted and created again under an open log -------------------------------


async def _replace(store: EventStore, session_id: str, events: int) -> None:
    """Delete the session, then write another under its id, of ``events`` events (its ids
    and turns all different)."""
    await delete_session(store, session_id)
    b = SessionBuilder(session_id, start_ms=DEFAULT_START_MS + 10**9)
    _turns(b, events)
    while len(b.events) < events:
        b.add(MemoryPinned, text="another session")
    log = await SessionLog.open(store, session_id)
    await log.append(b.events[:events])


@pytest.fixture(params=["one store", "two connections"])
async def two_stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[EventStore, EventStore]]:
    """The store an open log reads, and the one through which another writer works: the
    same, or two connections to one file."""
    if request.param == "one store":
        store = MemoryStore()
        yield store, store
        return
    async with (
        SQLiteStore.open(tmp_path / "x.db") as store,
        SQLiteStore.open(tmp_path / "x.db") as other,
    ):
        yield store, other


#: How many events the session written again has, against the stale log's.
LENGTHS = {"shorter": -3, "as long": 0, "longer": 3}


@pytest.mark.parametrize("opened", ["from its events", "from a snapshot"])
@pytest.mark.parametrize("length", list(LENGTHS))
async def test_a_log_refuses_a_session_deleted_and_created_again_under_it(
    two_stores: tuple[EventStore, EventStore], opened: str, length: str
) -> None:
    store, other = two_stores
    b = SessionBuilder()
    _turns(b, 3)
    writer = await SessionLog.open(store, b.session_id)
    await writer.append(b.events)
    if opened == "from a snapshot":
        await writer.save_snapshot()
    stale = await SessionLog.open(store, b.session_id)
    before = stale.history.snapshot()
    seq = stale.history.seq

    await _replace(other, b.session_id, seq + LENGTHS[length])
    written = await other.read(b.session_id)
    b.user("after the other session was written")
    # A session that went back, or ends in another event at the log's seq, is known
    # replaced at once; one that went on may have another writer's events, which a
    # refresh tells apart.
    with pytest.raises(SessionReplacedError if length != "longer" else ConcurrencyError):
        await stale.append(b.events[-2:])
    assert await store.read(b.session_id) == written
    with pytest.raises(SessionReplacedError, match="open it again"):
        await stale.refresh()
    assert stale.history.snapshot() == before  # nothing of the other session applied
    reopened = await SessionLog.open(store, b.session_id)
    assert reopened.history == History.rebuild(b.session_id, await store.read(b.session_id))


@pytest.mark.parametrize("then", ["deleted", "created again"])
async def test_a_lazily_opened_log_refuses_to_rebuild_from_another_session(
    two_stores: tuple[EventStore, EventStore], then: str
) -> None:
    store, other = two_stores
    b = SessionBuilder()
    await _saved_with_snapshot(store, b)
    stale = await SessionLog.open(store, b.session_id)  # reads no message yet
    await delete_session(other, b.session_id)
    if then == "created again":
        await _replace(other, b.session_id, stale.history.seq)
    # The first message's chunk is gone: the projection would rebuild from the events the
    # store now holds, which are not this session's.
    with pytest.raises(SessionReplacedError):
        stale.history.messages[0]
