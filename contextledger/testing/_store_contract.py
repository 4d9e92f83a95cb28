"""The ``EventStore`` contract as a test suite every backend runs: ``StoreContract``.

Subclass it in a pytest module, with async tests run by pytest-trio (``trio_mode = true``),
and say how to open a fresh, empty store of your backend::

    class TestMyStore(StoreContract):
        def open_store(self, directory: Path) -> AbstractAsyncContextManager[EventStore]:
            return MyStore.open(directory / "events")

Every test opens its own store in its own temporary directory and closes it after (the
hypothesis test of expected positions, one for each example). This is
how contextledger runs it for ``MemoryStore`` and ``SQLiteStore``
(``tests/store/test_contract.py``), so the backends cannot drift apart.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from contextledger.events import (
    DEFAULT_CODEC,
    AssistantFinished,
    CompactionCompleted,
    CompactionProjection,
    Event,
    FilePart,
    FileRange,
    LedgerError,
    MemoryPinned,
    MessageAdded,
    MessageError,
    ModelRef,
    PartAdded,
    RecordedEvent,
    SessionStarted,
    ToolCompleted,
    ToolPart,
    Usage,
)
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
from contextledger.store import (
    ANY_VERSION,
    ConcurrencyError,
    EventStore,
    Snapshot,
    SnapshotBaseError,
    StoreArgumentError,
    StoreClosedError,
)
from contextledger.testing._builder import SessionBuilder

#: Generous: a test that needs it has hung, it is not slow.
TIMEOUT = 10


def note(text: str, stream: str = "s") -> MemoryPinned:
    """A small event whose text identifies it."""
    return MemoryPinned(session_id=stream, text=text)


def notes(*texts: str, stream: str = "s") -> list[MemoryPinned]:
    return [note(t, stream) for t in texts]


def texts(recorded: list[RecordedEvent]) -> list[str]:
    return [r.event.text for r in recorded]  # type: ignore[union-attr]


def coordinates(recorded: list[RecordedEvent]) -> list[tuple[str, int, int]]:
    return [(r.stream, r.seq, r.position) for r in recorded]


DAY_MS = 86_400_000
START_MS = 1_767_225_600_000


async def write_session(
    store: EventStore, session: str, *, parent: str | None = None, at_ms: int = START_MS
) -> int:
    """A small session (started, a user message, an answer) written through ``SessionLog``
    with snapshots; returns its event count."""
    builder = SessionBuilder(session, parent_session_id=parent, start_ms=at_ms)
    answer = builder.assistant(builder.user("hello " * 50))
    builder.text(answer, "an answer " * 50)
    builder.finish(answer)
    log = await SessionLog.open(store, session, snapshot_every=2)
    await log.append(builder.events)
    return len(builder.events)


async def exported(store: EventStore, session: str) -> list[bytes]:
    return [line async for line in export_session(store, session)]


def _not_an_export(lines: list[bytes], damage: str) -> list[bytes]:
    """``lines`` of an export spoilt as ``damage`` says (``NOT_AN_EXPORT``)."""
    match damage:
        case "empty":
            return []
        case "format":
            return [b'{"format": "other"}\n', *lines[1:]]
        case "version":
            return [lines[0].replace(b'"version":1', b'"version":9'), *lines[1:]]
        case "gap":
            return [lines[0], *lines[2:]]
        case "short":
            return lines[:-1]
        case "not-json":
            return [*lines[:2], b"not json\n", *lines[3:]]
        case _:
            return [*lines[:2], b'{"seq":2,"v":1,"data":"AAAA"}\n', *lines[3:]]


#: Each way ``_not_an_export`` spoils an export, and what ``InvalidExport`` then says.
NOT_AN_EXPORT = {
    "empty": "no header line",
    "format": "no such format",
    "version": "9",
    "gap": "seq 2 where 1 belongs",
    "short": "events where the header says",
    "not-json": "line 3",
    "not-an-event": "line 3",
}


async def snapshot_of_contents(store: EventStore) -> tuple[object, ...]:
    """Everything a reader can observe, for before/after comparisons."""
    streams = await store.streams()
    return (
        streams,
        [await store.stream_version(s) for s in streams],
        await store.read_all(),
    )


# --- subscribe ----------------------------------------------------------------------------


async def _forward(
    store: EventStore, from_position: int, send: trio.MemorySendChannel[RecordedEvent]
) -> None:
    async for recorded in store.subscribe(from_position):
        await send.send(recorded)


async def _race(
    append: Callable[[str], Awaitable[object]],
) -> tuple[list[str], list[ConcurrencyError]]:
    """Run ``append`` for ten writers (``w0`` to ``w9``) at once; return the names of those
    whose append landed and the errors of those it refused."""
    won: list[str] = []
    lost: list[ConcurrencyError] = []

    async def write(name: str) -> None:
        try:
            await append(name)
        except ConcurrencyError as exc:
            lost.append(exc)
        else:
            won.append(name)

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            for i in range(10):
                nursery.start_soon(write, f"w{i}")
    return won, lost


# --- closing ------------------------------------------------------------------------------

CLOSED_CALLS: dict[str, Callable[[EventStore], Awaitable[Any]]] = {
    "append": lambda s: s.append("s", ANY_VERSION, notes("x")),
    "read": lambda s: s.read("s"),
    "read_all": lambda s: s.read_all(),
    "subscribe": lambda s: s.subscribe().__anext__(),
    "stream_version": lambda s: s.stream_version("s"),
    "streams": lambda s: s.streams(),
    "save_snapshot": lambda s: s.save_snapshot(Snapshot("s", 1, 1, b"")),
    "load_snapshot": lambda s: s.load_snapshot("s"),
    "load_snapshot_head": lambda s: s.load_snapshot_head("s"),
    "delete_streams": lambda s: s.delete_streams(["s"]),
    "reclaim_space": lambda s: s.reclaim_space(),
}


def _typed(*fields: Any) -> tuple[Any, ...]:
    """``fields`` as ``Any``: a Snapshot built of them type-checks, whatever they are."""
    return fields


#: Calls with a wrongly typed argument (the store is ``Any`` so that they type-check):
#: ``StoreArgumentError``, or ``EventEncodeError`` for what is not an event.
WRONGLY_TYPED_CALLS: dict[str, Callable[[Any], Awaitable[Any]]] = {
    "stream bytes": lambda s: s.append(b"s", ANY_VERSION, [note("x")]),
    "stream None": lambda s: s.append(None, ANY_VERSION, [note("x")]),
    "version text": lambda s: s.append("s", "1", [note("x")]),
    "version float": lambda s: s.append("s", 1.0, [note("x")]),
    "version bool": lambda s: s.append("s", True, [note("x")]),
    "position text": lambda s: s.append("s", ANY_VERSION, [note("x")], expected_position="1"),
    "position bool": lambda s: s.append("s", ANY_VERSION, [note("x")], expected_position=True),
    "position negative": lambda s: s.append("s", 0, [note("x")], expected_position=ANY_VERSION),
    "events None": lambda s: s.append("s", ANY_VERSION, None),
    "events text": lambda s: s.append("s", ANY_VERSION, "events"),
    "events a generator": lambda s: s.append("s", ANY_VERSION, (e for e in [note("x")])),
    "event not an event": lambda s: s.append("s", ANY_VERSION, [note("x"), object()]),
    "event a dict": lambda s: s.append("s", ANY_VERSION, [{"type": "memory.pinned"}]),
    "snapshot a tuple": lambda s: s.save_snapshot(("s", 1, 1, b"")),
    "snapshot stream bytes": lambda s: s.save_snapshot(Snapshot(*_typed(b"s", 1, 1, b""))),
    "snapshot seq text": lambda s: s.save_snapshot(Snapshot(*_typed("s", "1", 1, b""))),
    "snapshot data text": lambda s: s.save_snapshot(Snapshot(*_typed("s", 1, 1, "data"))),
    "snapshot chunks a list": lambda s: s.save_snapshot(Snapshot(*_typed("s", 1, 1, b"", []))),
    "snapshot chunk text": lambda s: s.save_snapshot(Snapshot(*_typed("s", 1, 1, b"", {"a": "x"}))),
    "snapshot chunk key bytes": lambda s: s.save_snapshot(
        Snapshot(*_typed("s", 1, 1, b"", {b"a": b"x"}))
    ),
    "snapshot base text": lambda s: s.save_snapshot(Snapshot(*_typed("s", 1, 1, b"", {}, "0"))),
    "snapshot base past seq": lambda s: s.save_snapshot(Snapshot("s", 1, 1, b"", base=2)),
    "delete streams text": lambda s: s.delete_streams("s"),
    "delete streams bytes": lambda s: s.delete_streams([b"s"]),
}


#: Reads from before the first seq or position, or of fewer than no events:
#: ``StoreArgumentError`` (slicing would read a negative limit as "all but the last").
BAD_READS: dict[str, Callable[[Any], Awaitable[Any]]] = {
    "read from seq 0": lambda s: s.read("s", 0),
    "read from seq -3": lambda s: s.read("s", -3),
    "read limit -1": lambda s: s.read("s", 1, -1),
    "read from seq text": lambda s: s.read("s", "1"),
    "read limit a float": lambda s: s.read("s", 1, 2.0),
    "read_all from position 0": lambda s: s.read_all(0),
    "read_all limit -1": lambda s: s.read_all(1, -1),
}

#: A step of ``test_an_append_lands_exactly_when_the_stream_ends_where_it_was_read``:
#: ``("append", stream, n)``: n events; ``("delete", stream, 0)``; ``("rewrite", stream,
#: 0)``: delete the stream and write as many events as it had.
Step = tuple[str, str, int]
_STEPS = st.one_of(
    st.tuples(st.just("append"), st.sampled_from("st"), st.integers(1, 3)),
    st.tuples(st.sampled_from(["delete", "rewrite"]), st.sampled_from("st"), st.just(0)),
)


class _Model:
    """Each stream's version and last position as the contract says they go: positions
    counted on over every stream, never given again after a deletion."""

    def __init__(self) -> None:
        self.last = 0
        self.streams: dict[str, tuple[int, int]] = {}

    def end(self, stream: str) -> tuple[int, int]:
        return self.streams.get(stream, (0, 0))

    def apply(self, kind: str, stream: str, count: int) -> int:
        """Take the step; return how many events it appends (after deleting, if it does)."""
        if kind != "append":
            count = self.end(stream)[0] if kind == "rewrite" else 0
            self.streams.pop(stream, None)
        if count:
            self.last += count
            self.streams[stream] = (self.end(stream)[0] + count, self.last)
        return count


class StoreContract:
    """The contract's tests; a subclass provides ``open_store``."""

    def open_store(self, directory: Path) -> AbstractAsyncContextManager[EventStore]:
        """An async context manager opening a new, empty store that may keep its files in
        ``directory``, and closing it on exit."""
        raise NotImplementedError

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[EventStore]:
        """The store under test, opened by ``open_store``."""
        async with self.open_store(tmp_path) as store:
            yield store

    # --- append -------------------------------------------------------------------------------

    async def test_first_append_to_a_stream_records_seqs_from_one(self, store: EventStore) -> None:
        recorded = await store.append("s", 0, notes("a", "b", "c"))

        assert coordinates(recorded) == [("s", 1, 1), ("s", 2, 2), ("s", 3, 3)]

    async def test_append_returns_the_events_it_was_given(self, store: EventStore) -> None:
        events = notes("a", "b")

        recorded = await store.append("s", 0, events)

        assert [r.event for r in recorded] == events

    async def test_append_returns_events_that_encode_as_a_read_returns_them(
        self,
        store: EventStore,
    ) -> None:
        # msgpack has no tuples: inside an untyped field a tuple is read back as a list. The
        # bytes (and so every view and request built from them) are the same either way.
        event = SessionStarted(session_id="s", config={"pair": (1, 2)})

        recorded = await store.append("s", 0, [event])
        read = await store.read("s")

        assert DEFAULT_CODEC.encode(recorded[0].event) == DEFAULT_CODEC.encode(read[0].event)
        assert read[0].event.config == {"pair": [1, 2]}  # type: ignore[union-attr]

    async def test_later_appends_continue_the_streams_seq(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a", "b"))

        recorded = await store.append("s", 2, notes("c"))

        assert [r.seq for r in recorded] == [3]

    async def test_positions_are_global_gap_free_and_in_commit_order(
        self, store: EventStore
    ) -> None:
        first = await store.append("a", 0, notes("a1", "a2", stream="a"))
        second = await store.append("b", 0, notes("b1", stream="b"))
        third = await store.append("a", 2, notes("a3", stream="a"))

        assert coordinates(first + second + third) == [
            ("a", 1, 1),
            ("a", 2, 2),
            ("b", 1, 3),
            ("a", 3, 4),
        ]

    async def test_empty_append_returns_nothing_and_writes_nothing(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a"))
        before = await snapshot_of_contents(store)

        assert await store.append("s", 1, []) == []
        assert await snapshot_of_contents(store) == before

    async def test_empty_append_checks_no_version(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a"))

        assert await store.append("s", 5, []) == []

    async def test_stale_expected_version_raises_naming_expected_and_actual(
        self,
        store: EventStore,
    ) -> None:
        await store.append("s", 0, notes("a", "b"))

        with pytest.raises(ConcurrencyError) as caught:
            await store.append("s", 1, notes("c"))

        assert (caught.value.stream, caught.value.expected, caught.value.actual) == ("s", 1, 2)

    async def test_expected_version_ahead_of_the_stream_raises(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a"))

        with pytest.raises(ConcurrencyError) as caught:
            await store.append("s", 5, notes("b"))

        assert (caught.value.expected, caught.value.actual) == (5, 1)

    async def test_expecting_a_version_of_a_missing_stream_raises_with_actual_zero(
        self,
        store: EventStore,
    ) -> None:
        with pytest.raises(ConcurrencyError) as caught:
            await store.append("new", 1, notes("a", stream="new"))

        assert caught.value.actual == 0

    async def test_a_rejected_append_writes_nothing(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a", "b"))
        await store.append("t", 0, notes("x", stream="t"))
        before = await snapshot_of_contents(store)

        with pytest.raises(ConcurrencyError):
            await store.append("s", 1, notes("c", "d"))

        assert await snapshot_of_contents(store) == before

    async def test_a_rejected_append_to_a_new_stream_does_not_create_it(
        self, store: EventStore
    ) -> None:
        with pytest.raises(ConcurrencyError):
            await store.append("new", 3, notes("a", stream="new"))

        assert await store.streams() == []
        assert await store.stream_version("new") == 0

    async def test_appends_after_a_rejected_one_stay_gap_free(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a"))
        with pytest.raises(ConcurrencyError):
            await store.append("s", 0, notes("rejected"))

        recorded = await store.append("s", 1, notes("b"))

        assert coordinates(recorded) == [("s", 2, 2)]
        assert texts(await store.read_all()) == ["a", "b"]

    async def test_any_version_appends_without_a_check(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a", "b"))

        recorded = await store.append("s", ANY_VERSION, notes("c"))
        first = await store.append("new", ANY_VERSION, notes("x", stream="new"))

        assert coordinates(recorded + first) == [("s", 3, 3), ("new", 1, 4)]

    # --- the expected position ------------------------------------------------------------

    async def test_an_append_expecting_the_last_events_position_lands(
        self, store: EventStore
    ) -> None:
        await store.append("s", 0, notes("a", "b"))
        await store.append("t", 0, notes("x", stream="t"))

        recorded = await store.append("s", 2, notes("c"), expected_position=2)
        first = await store.append("new", 0, notes("n", stream="new"), expected_position=0)

        assert coordinates(recorded + first) == [("s", 3, 4), ("new", 1, 5)]

    async def test_a_stream_written_again_to_its_version_refuses_the_old_last_position(
        self, store: EventStore
    ) -> None:
        await store.append("s", 0, notes("a", "b"))
        await store.delete_streams(["s"])
        await store.append("s", 0, notes("c", "d"))
        before = await snapshot_of_contents(store)

        with pytest.raises(ConcurrencyError, match=r"position 4, .* at position 2") as caught:
            await store.append("s", 2, notes("e"), expected_position=2)

        error = caught.value
        assert (error.expected, error.actual) == (2, 2)
        assert (error.expected_position, error.actual_position) == (2, 4)
        assert await snapshot_of_contents(store) == before

    async def test_a_version_that_differs_is_reported_before_the_position(
        self, store: EventStore
    ) -> None:
        await store.append("s", 0, notes("a", "b"))

        with pytest.raises(ConcurrencyError, match="version 2, the append expected 1") as caught:
            await store.append("s", 1, notes("c"), expected_position=1)

        assert (caught.value.expected_position, caught.value.actual_position) == (1, None)

    async def test_a_position_is_checked_without_a_version(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a"))
        await store.append("s", 1, notes("b"))

        with pytest.raises(ConcurrencyError) as caught:
            await store.append("s", ANY_VERSION, notes("c"), expected_position=1)
        recorded = await store.append("s", ANY_VERSION, notes("c"), expected_position=2)

        assert (caught.value.actual, caught.value.actual_position) == (2, 2)
        assert coordinates(recorded) == [("s", 3, 3)]

    async def test_a_position_expected_of_a_stream_without_events_is_zero(
        self, store: EventStore
    ) -> None:
        with pytest.raises(ConcurrencyError) as caught:
            await store.append("new", 0, notes("a", stream="new"), expected_position=1)

        assert caught.value.actual_position == 0
        assert await store.streams() == []

    async def test_concurrent_appends_expecting_the_same_position_let_exactly_one_win(
        self, store: EventStore
    ) -> None:
        await store.append("s", 0, notes("seed"))

        won, lost = await _race(
            lambda name: store.append("s", ANY_VERSION, notes(name), expected_position=1)
        )

        assert len(won) == 1
        assert [(e.actual, e.actual_position) for e in lost] == [(2, 2)] * 9
        assert texts(await store.read("s")) == ["seed", won[0]]

    @settings(max_examples=50, deadline=None)
    @given(before=st.lists(_STEPS, max_size=6), after=st.lists(_STEPS, max_size=4))
    @example(before=[("append", "s", 2)], after=[("rewrite", "s", 0)])
    async def test_an_append_lands_exactly_when_the_stream_ends_where_it_was_read(
        self, tmp_path_factory: pytest.TempPathFactory, before: list[Step], after: list[Step]
    ) -> None:
        """Appends to two streams, deletions and rewrites, with ``s`` read between
        ``before`` and ``after``: an append expecting the version and last position read
        lands exactly when the model (positions counted on, never given twice) has ``s``
        where it was read, and writes nothing otherwise."""
        model = _Model()
        async with self.open_store(tmp_path_factory.mktemp("steps")) as store:

            async def take(steps: list[Step]) -> None:
                for kind, stream, count in steps:
                    appended = model.apply(kind, stream, count)
                    if kind != "append":
                        await store.delete_streams([stream])
                    if appended:
                        batch = notes(*"x" * appended, stream=stream)
                        await store.append(stream, ANY_VERSION, batch)

            await take(before)
            read = model.end("s")
            await take(after)
            contents = await snapshot_of_contents(store)

            try:
                recorded = await store.append("s", read[0], notes("y"), expected_position=read[1])
            except ConcurrencyError as exc:
                version, position = model.end("s")
                assert (version, position) != read
                assert exc.actual == version
                # The version is compared first, the position only when the version is right.
                assert exc.actual_position == (position if version == read[0] else None)
                assert await snapshot_of_contents(store) == contents
            else:
                assert model.end("s") == read
                assert coordinates(recorded) == [("s", read[0] + 1, model.last + 1)]

    async def test_events_round_trip_equal(self, store: EventStore) -> None:
        events: list[Event] = [
            SessionStarted(
                session_id="s",
                time_ms=1_700_000_000_000,
                title="Fix the bug — ünïcode ✓",
                model=ModelRef(provider_id="anthropic", model_id="claude", variant="thinking"),
                parent_session_id="ses_parent",
                config={"prune": {"minimum": 20_000, "protect": 40_000}, "tools": ["read", "bash"]},
            ),
            MessageAdded(session_id="s", agent_id="sub", message_id="msg_1", role="user"),
            PartAdded(
                session_id="s",
                part=ToolPart(
                    id="prt_1",
                    message_id="msg_1",
                    call_id="call_1",
                    tool="read",
                    state=ToolCompleted(
                        input={"path": "a.py", "lines": [1, 2]},
                        output="x" * 5000,
                        attachments=(
                            FilePart(
                                id="prt_2",
                                message_id="msg_1",
                                mime="image/png",
                                url="data:image/png;base64,AAAA",
                            ),
                        ),
                        compacted_ms=5,
                        compacted_reason="normal",
                        trimmed=(10, 20),
                    ),
                ),
            ),
            AssistantFinished(
                session_id="s",
                message_id="msg_2",
                finish="error",
                usage=Usage(input=10, output=20, reasoning=3, cache_read=400, cache_write=50),
                cost=0.125,
                error=MessageError(name="APIError", message="overloaded", retryable=True),
            ),
            CompactionCompleted(
                session_id="s",
                request_message_id="msg_3",
                summary_message_id="msg_4",
                tail_start_id=None,
                projection=CompactionProjection(
                    summary="so far",
                    head_first_id="msg_1",
                    head_last_id="msg_2",
                    file_manifest=(
                        FileRange(path="a.py", action="write", ranges=((1, 5), (9, 9))),
                    ),
                ),
            ),
        ]

        appended = await store.append("s", 0, events)

        assert [r.event for r in await store.read("s")] == events
        assert await store.read("s") == appended

    # --- read ---------------------------------------------------------------------------------

    async def test_read_returns_only_the_streams_events_in_seq_order(
        self, store: EventStore
    ) -> None:
        await store.append("s", 0, notes("a"))
        await store.append("t", 0, notes("x", stream="t"))
        await store.append("s", 1, notes("b", "c"))

        recorded = await store.read("s")

        assert texts(recorded) == ["a", "b", "c"]
        assert [r.seq for r in recorded] == [1, 2, 3]

    async def test_read_from_seq_starts_at_that_seq(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a", "b", "c", "d"))

        assert texts(await store.read("s", from_seq=3)) == ["c", "d"]

    async def test_read_limit_caps_the_number_of_events(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a", "b", "c", "d"))

        assert texts(await store.read("s", from_seq=2, limit=2)) == ["b", "c"]

    @pytest.mark.parametrize("call", BAD_READS.values(), ids=BAD_READS.keys())
    async def test_a_read_from_below_1_or_of_a_negative_limit_is_refused(
        self, store: EventStore, call: Callable[[Any], Awaitable[Any]]
    ) -> None:
        await store.append("s", 0, notes("a", "b", "c"))

        with pytest.raises(StoreArgumentError):
            await call(store)

    async def test_a_read_of_no_events_is_empty(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a", "b"))

        assert await store.read("s", 1, 0) == []
        assert await store.read_all(1, 0) == []

    async def test_read_past_the_end_is_empty(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a"))

        assert await store.read("s", from_seq=2) == []

    async def test_read_of_a_missing_stream_is_empty(self, store: EventStore) -> None:
        assert await store.read("missing") == []

    async def test_read_all_returns_every_stream_in_commit_order(self, store: EventStore) -> None:
        await store.append("a", 0, notes("a1", stream="a"))
        await store.append("b", 0, notes("b1", "b2", stream="b"))
        await store.append("a", 1, notes("a2", stream="a"))

        recorded = await store.read_all()

        assert texts(recorded) == ["a1", "b1", "b2", "a2"]
        assert [r.position for r in recorded] == [1, 2, 3, 4]

    async def test_read_all_from_position_with_limit(self, store: EventStore) -> None:
        await store.append("a", 0, notes("a1", "a2", stream="a"))
        await store.append("b", 0, notes("b1", "b2", stream="b"))

        recorded = await store.read_all(from_position=2, limit=2)

        assert coordinates(recorded) == [("a", 2, 2), ("b", 1, 3)]

    async def test_read_all_of_an_empty_store_is_empty(self, store: EventStore) -> None:
        assert await store.read_all() == []

    async def test_stream_version_is_the_number_of_events(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a", "b"))
        await store.append("s", 2, notes("c"))

        assert await store.stream_version("s") == 3

    async def test_stream_version_of_a_missing_stream_is_zero(self, store: EventStore) -> None:
        assert await store.stream_version("missing") == 0

    async def test_streams_are_listed_in_order_of_their_first_event(
        self, store: EventStore
    ) -> None:
        for stream in ("b", "a", "b", "c", "a"):
            await store.append(stream, ANY_VERSION, notes("x", stream=stream))

        assert await store.streams() == ["b", "a", "c"]

    async def test_streams_of_an_empty_store_is_empty(self, store: EventStore) -> None:
        assert await store.streams() == []

    # --- snapshots ----------------------------------------------------------------------------

    async def test_load_snapshot_without_one_is_none(self, store: EventStore) -> None:
        assert await store.load_snapshot("s") is None

    async def test_saved_snapshot_loads_back(self, store: EventStore) -> None:
        snapshot = Snapshot("s", 3, 1, b"\x00projection\xff")

        await store.save_snapshot(snapshot)

        assert await store.load_snapshot("s") == snapshot

    async def test_saving_a_snapshot_replaces_the_older_one(self, store: EventStore) -> None:
        await store.save_snapshot(Snapshot("s", 3, 1, b"old"))
        await store.save_snapshot(Snapshot("s", 7, 2, b"new"))

        assert await store.load_snapshot("s") == Snapshot("s", 7, 2, b"new")

    async def test_snapshots_are_kept_per_stream(self, store: EventStore) -> None:
        await store.save_snapshot(Snapshot("s", 1, 1, b"of s"))
        await store.save_snapshot(Snapshot("t", 2, 1, b"of t"))

        assert await store.load_snapshot("s") == Snapshot("s", 1, 1, b"of s")
        assert await store.load_snapshot("t") == Snapshot("t", 2, 1, b"of t")

    async def test_a_snapshot_loads_back_with_its_chunks_in_key_order(
        self, store: EventStore
    ) -> None:
        await store.save_snapshot(Snapshot("s", 3, 1, b"head", {"b": b"\x00two", "a": b"one"}))

        loaded = await store.load_snapshot("s")

        assert loaded == Snapshot("s", 3, 1, b"head", {"a": b"one", "b": b"\x00two"})
        assert loaded is not None and list(loaded.chunks) == ["a", "b"]

    async def test_a_snapshot_on_a_base_replaces_only_the_chunks_it_holds(
        self, store: EventStore
    ) -> None:
        await store.save_snapshot(Snapshot("s", 3, 1, b"h3", {"a": b"a3", "b": b"b3"}))
        await store.save_snapshot(Snapshot("s", 7, 1, b"h7", {"b": b"b7", "c": b"c7"}, base=3))
        await store.save_snapshot(Snapshot("s", 9, 1, b"h9", {"a": b"a9"}, base=7))

        chunks = {"a": b"a9", "b": b"b7", "c": b"c7"}
        assert await store.load_snapshot("s") == Snapshot("s", 9, 1, b"h9", chunks)

    async def test_a_snapshot_head_loads_without_its_chunks(self, store: EventStore) -> None:
        assert await store.load_snapshot_head("s") is None
        await store.save_snapshot(Snapshot("s", 3, 1, b"head", {"a": b"one"}))

        assert await store.load_snapshot_head("s") == Snapshot("s", 3, 1, b"head")

    async def test_a_snapshot_reader_reads_each_chunk_as_stored_now_and_the_events(
        self, store: EventStore
    ) -> None:
        recorded = await store.append("s", 0, notes("a", "b"))
        reader = store.snapshot_reader("s")
        assert reader.chunk("a") is None
        await store.save_snapshot(Snapshot("s", 2, 1, b"h2", {"a": b"a2", "b": b"b2"}))
        assert (reader.chunk("a"), reader.chunk("c")) == (b"a2", None)
        await store.save_snapshot(Snapshot("s", 2, 1, b"h2", {"a": b"a3"}, base=2))

        assert (reader.chunk("a"), reader.chunk("b")) == (b"a3", b"b2")
        assert reader.events() == recorded

    async def test_a_snapshot_builds_on_a_later_stored_one_up_to_its_own_seq(
        self, store: EventStore
    ) -> None:
        await store.save_snapshot(Snapshot("s", 5, 1, b"h5", {"a": b"a5", "b": b"b5"}))
        await store.save_snapshot(Snapshot("s", 8, 1, b"h8", {"b": b"b8"}, base=2))

        chunks = {"a": b"a5", "b": b"b8"}
        assert await store.load_snapshot("s") == Snapshot("s", 8, 1, b"h8", chunks)

    async def test_a_whole_snapshot_drops_every_chunk_before_it(self, store: EventStore) -> None:
        await store.save_snapshot(Snapshot("s", 3, 1, b"h3", {"a": b"a3", "b": b"b3"}))
        await store.save_snapshot(Snapshot("s", 2, 2, b"h2", {"c": b"c2"}))

        assert await store.load_snapshot("s") == Snapshot("s", 2, 2, b"h2", {"c": b"c2"})

    @pytest.mark.parametrize(
        ("stored", "seq"),
        [
            (None, 9),
            (Snapshot("s", 5, 2, b"of another schema"), 9),
            (Snapshot("s", 3, 1, b"before the base"), 9),
            (Snapshot("s", 7, 1, b"past the snapshot's seq"), 6),
        ],
        ids=["none", "schema", "before", "past"],
    )
    async def test_a_snapshot_that_cannot_build_on_the_stored_one_raises_writing_nothing(
        self, store: EventStore, stored: Snapshot | None, seq: int
    ) -> None:
        if stored is not None:
            await store.save_snapshot(stored)

        with pytest.raises(SnapshotBaseError):
            await store.save_snapshot(Snapshot("s", seq, 1, b"head", {"a": b"a"}, base=4))

        assert await store.load_snapshot("s") == stored

    # --- retention ----------------------------------------------------------------------------

    async def test_deleting_a_session_deletes_its_children_and_nothing_else(
        self, store: EventStore
    ) -> None:
        sizes = {}
        sizes["root"] = await write_session(store, "root")
        sizes["child"] = await write_session(store, "child", parent="root")
        sizes["other"] = await write_session(store, "other")
        sizes["grandchild"] = await write_session(store, "grandchild", parent="child")
        kept = await store.read("other")

        assert await session_tree(store, "root") == ["root", "child", "grandchild"]
        sessions, events = await delete_session(store, "root")

        assert sessions == ["root", "child", "grandchild"]
        assert events == sizes["root"] + sizes["child"] + sizes["grandchild"]
        assert await store.streams() == ["other"]
        assert await store.read("other") == kept
        assert await store.read_all() == kept
        for session in sessions:
            assert await store.read(session) == []
            assert await store.stream_version(session) == 0
            assert await store.load_snapshot(session) is None
        assert await store.load_snapshot("other") is not None
        assert await check_sessions(store) == []

    async def test_deleting_a_session_that_does_not_exist_deletes_nothing(
        self, store: EventStore
    ) -> None:
        await write_session(store, "a")
        before = await snapshot_of_contents(store)

        assert await delete_session(store, "nope") == ([], 0)
        assert await store.delete_streams(["nope"]) == 0
        assert await snapshot_of_contents(store) == before

    async def test_positions_are_never_given_twice_after_deleting_the_newest_session(
        self, store: EventStore
    ) -> None:
        await write_session(store, "a")
        await write_session(store, "b")
        last = (await store.read_all())[-1].position
        await delete_session(store, "b")

        recorded = await store.append("c", 0, notes("x", stream="c"))

        assert recorded[0].position == last + 1
        assert [r.position for r in await store.read_all(last)] == [last + 1]

    async def test_a_deleted_stream_starts_again_at_seq_one(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a", "b"))
        await store.delete_streams(["s"])

        recorded = await store.append("s", 0, notes("c"))

        assert [(r.seq, r.position) for r in recorded] == [(1, 3)]
        assert texts(await store.read("s")) == ["c"]

    async def test_reclaiming_space_keeps_every_other_stream(self, store: EventStore) -> None:
        for i in range(5):
            await write_session(store, f"s{i}")
        kept = await store.read("s4")
        await store.delete_streams(["s0", "s1", "s2", "s3"])

        before, after = await store.reclaim_space()

        assert 0 < after <= before
        assert await store.read_all() == kept
        await write_session(store, "after")
        assert await store.streams() == ["s4", "after"]

    async def test_expiring_deletes_session_trees_whose_newest_event_is_older(
        self, store: EventStore
    ) -> None:
        await write_session(store, "old", at_ms=START_MS)
        await write_session(store, "old_child", parent="old", at_ms=START_MS + DAY_MS)
        await write_session(store, "kept", at_ms=START_MS)
        await write_session(store, "recent_child", parent="kept", at_ms=START_MS + 20 * DAY_MS)
        await write_session(store, "recent", at_ms=START_MS + 20 * DAY_MS)

        sessions, events = await expire_sessions(store, START_MS + 10 * DAY_MS)

        assert sessions == ["old", "old_child"]
        assert events > 0
        assert await store.streams() == ["kept", "recent_child", "recent"]

    async def test_an_exported_session_imports_back_with_identical_events(
        self, store: EventStore, tmp_path: Path
    ) -> None:
        await write_session(store, "other")
        await write_session(store, "ses")
        lines = await exported(store, "ses")
        original = await store.read("ses")
        (tmp_path / "copy").mkdir()

        async with self.open_store(tmp_path / "copy") as copy:
            log = await import_session(copy, lines)
            restored = await copy.read("ses")
            assert await check_sessions(copy) == []

        assert [(r.seq, r.event) for r in restored] == [(r.seq, r.event) for r in original]
        assert log.history == (await SessionLog.open(store, "ses")).history
        assert lines[0].startswith(b'{"format":"contextledger-session","version":1')

    async def test_importing_a_session_that_exists_raises_and_writes_nothing(
        self, store: EventStore
    ) -> None:
        await write_session(store, "ses")
        lines = await exported(store, "ses")
        before = await store.read_all()

        with pytest.raises(ConcurrencyError):
            await import_session(store, lines)

        assert await store.read_all() == before

    @pytest.mark.parametrize(("damage", "message"), NOT_AN_EXPORT.items(), ids=NOT_AN_EXPORT)
    async def test_a_file_that_is_not_an_export_raises_and_writes_nothing(
        self, store: EventStore, tmp_path: Path, damage: str, message: str
    ) -> None:
        await write_session(store, "ses")
        lines = _not_an_export(await exported(store, "ses"), damage)
        (tmp_path / "copy").mkdir()

        async with self.open_store(tmp_path / "copy") as copy:
            with pytest.raises(InvalidExport, match=message):
                await import_session(copy, lines)
            assert await copy.streams() == []

    async def test_subscribe_yields_existing_events_then_new_ones(self, store: EventStore) -> None:
        await store.append("a", 0, notes("a1", "a2", stream="a"))
        send, receive = trio.open_memory_channel[RecordedEvent](math.inf)

        async def write_more() -> None:
            await store.append("b", 0, notes("b1", stream="b"))
            await store.append("a", 2, notes("a3", "a4", stream="a"))

        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_forward, store, 1, send)
                existing = [await receive.receive() for _ in range(2)]
                await trio.testing.wait_all_tasks_blocked()  # the subscriber has caught up
                nursery.start_soon(write_more)
                new = [await receive.receive() for _ in range(3)]
                nursery.cancel_scope.cancel()

        assert coordinates(existing) == [("a", 1, 1), ("a", 2, 2)]
        assert coordinates(new) == [("b", 1, 3), ("a", 3, 4), ("a", 4, 5)]
        assert existing + new == await store.read_all()

    async def test_subscribe_from_a_position_starts_there(self, store: EventStore) -> None:
        await store.append("s", 0, notes("a", "b", "c"))
        send, receive = trio.open_memory_channel[RecordedEvent](math.inf)

        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_forward, store, 3, send)
                first = await receive.receive()
                await store.append("s", 3, notes("d"))
                second = await receive.receive()
                nursery.cancel_scope.cancel()

        assert texts([first, second]) == ["c", "d"]

    async def test_subscribers_each_see_every_event(self, store: EventStore) -> None:
        send_1, receive_1 = trio.open_memory_channel[RecordedEvent](math.inf)
        send_2, receive_2 = trio.open_memory_channel[RecordedEvent](math.inf)

        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_forward, store, 1, send_1)
                nursery.start_soon(_forward, store, 1, send_2)
                await trio.testing.wait_all_tasks_blocked()
                await store.append("s", 0, notes("a", "b"))
                seen_1 = [await receive_1.receive() for _ in range(2)]
                seen_2 = [await receive_2.receive() for _ in range(2)]
                nursery.cancel_scope.cancel()

        assert texts(seen_1) == texts(seen_2) == ["a", "b"]

    async def test_a_waiting_subscriber_raises_store_closed_when_the_store_closes(
        self,
        store: EventStore,
    ) -> None:
        async def follow() -> None:
            async for _ in store.subscribe():
                pass

        with trio.fail_after(TIMEOUT), pytest.RaisesGroup(StoreClosedError):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(follow)
                await trio.testing.wait_all_tasks_blocked()
                await store.aclose()

    # --- concurrency --------------------------------------------------------------------------

    async def test_concurrent_appends_to_different_streams_all_land(
        self, store: EventStore
    ) -> None:
        writers, appends_each = 20, 10
        returned: list[RecordedEvent] = []

        async def write(stream: str) -> None:
            version = 0
            for i in range(appends_each):
                batch = notes(*(f"{stream}.{i}.{j}" for j in range(1 + i % 3)), stream=stream)
                returned.extend(await store.append(stream, version, batch))
                version += len(batch)

        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                for w in range(writers):
                    nursery.start_soon(write, f"w{w}")

        total = writers * sum(1 + i % 3 for i in range(appends_each))
        assert sorted(r.position for r in returned) == list(range(1, total + 1))
        assert await store.read_all() == sorted(returned, key=lambda r: r.position)
        for w in range(writers):
            recorded = await store.read(f"w{w}")
            assert [r.seq for r in recorded] == list(range(1, len(recorded) + 1))
            assert texts(recorded) == [
                f"w{w}.{i}.{j}" for i in range(appends_each) for j in range(1 + i % 3)
            ]

    async def test_concurrent_appends_expecting_the_same_version_let_exactly_one_win(
        self,
        store: EventStore,
    ) -> None:
        await store.append("s", 0, notes("seed"))

        won, lost = await _race(lambda name: store.append("s", 1, notes(name, f"{name}-2")))

        assert len(won) == 1
        assert [(e.expected, e.actual) for e in lost] == [(1, 3)] * 9
        assert texts(await store.read("s")) == ["seed", won[0], f"{won[0]}-2"]
        assert [r.position for r in await store.read_all()] == [1, 2, 3]

    async def test_a_task_appending_in_a_loop_lets_other_tasks_run(self, store: EventStore) -> None:
        other_ran = 0

        async def other() -> None:
            nonlocal other_ran
            while True:
                other_ran += 1
                await trio.sleep(0)

        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(other)
                for i in range(2000):
                    await store.append("s", i, notes(f"n{i}"))
                other_ran_meanwhile = other_ran
                nursery.cancel_scope.cancel()

        assert other_ran_meanwhile > 0

    async def test_a_cancelled_append_still_commits_and_returns(self, store: EventStore) -> None:
        # Cancellation takes effect at the caller's next checkpoint, never inside an append.
        returned: list[RecordedEvent] = []
        with trio.CancelScope() as scope:
            scope.cancel()
            returned = await store.append("s", 0, notes("a", "b"))
            await trio.lowlevel.checkpoint()

        assert scope.cancelled_caught
        assert returned == await store.read("s")
        assert texts(returned) == ["a", "b"]

    @pytest.mark.parametrize("call", CLOSED_CALLS.values(), ids=CLOSED_CALLS.keys())
    async def test_calls_after_aclose_raise_store_closed(
        self, store: EventStore, call: Callable[[Any], Awaitable[Any]]
    ) -> None:
        await store.append("s", 0, notes("a"))
        await store.aclose()

        with pytest.raises(StoreClosedError):
            await call(store)

    async def test_a_snapshot_reader_raises_store_closed_after_aclose(
        self, store: EventStore
    ) -> None:
        reader = store.snapshot_reader("s")
        await store.aclose()

        with pytest.raises(StoreClosedError):
            reader.chunk("a")
        with pytest.raises(StoreClosedError):
            reader.events()

    async def test_aclose_twice_is_harmless(self, store: EventStore) -> None:
        await store.aclose()
        await store.aclose()

    @pytest.mark.parametrize("call", WRONGLY_TYPED_CALLS.values(), ids=WRONGLY_TYPED_CALLS.keys())
    async def test_a_wrongly_typed_argument_is_refused_typed_with_nothing_written(
        self, store: EventStore, call: Callable[[Any], Awaitable[Any]]
    ) -> None:
        kept = note("kept")
        await store.append("s", 0, [kept])
        await store.save_snapshot(Snapshot("s", 1, 1, b"kept"))

        with pytest.raises(LedgerError):
            await call(store)

        assert [r.event for r in await store.read_all()] == [kept]
        assert await store.streams() == ["s"]
        assert await store.load_snapshot("s") == Snapshot("s", 1, 1, b"kept")
        assert [r.seq for r in await store.append("s", 1, [kept])] == [2]
