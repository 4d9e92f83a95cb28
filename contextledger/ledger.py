"""``SessionLog``: one session's stream in a store together with its live projection.

It is the only sanctioned way to write a session: each batch is type-checked against the
event schemas and validated against the projection (``InvalidEvent``, nothing written),
appended with the projection's version as the expected version (``ConcurrencyError`` if
another writer got there first, nothing written), then applied. Loading starts from the
latest projection snapshot and replays only the events after it; a snapshot is written every
``snapshot_every`` events, and holds only the messages changed since the one before. Once a
batch has committed, its append returns: applying a checked batch cannot fail, and a snapshot
that fails is logged, never raised.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Final, Protocol

import msgspec
import structlog
import trio

from contextledger.events._catalogue import Event, RecordedEvent, SessionStarted
from contextledger.events._codec import DEFAULT_CODEC
from contextledger.events._errors import EventDecodeError, InvalidEvent, LedgerError
from contextledger.events._ids import IdGenerator
from contextledger.events._parts import struct_tag
from contextledger.history._projection import SNAPSHOT_SCHEMA, History, SnapshotCursor
from contextledger.history._validation import SessionIndex, validate_events
from contextledger.store._checker import Problem
from contextledger.store._errors import ConcurrencyError, SnapshotBaseError, StoreCorruptError
from contextledger.store._protocol import EventStore, Snapshot, SnapshotReader, check_append

#: Events between projection snapshots: opening a session replays at most this many. A
#: snapshot writes the messages those events changed (about 130 for 1,000 events of a coding
#: session) and the head, so its cost follows the events, not the session's length;
#: replaying 1,000 events takes a few milliseconds.
SNAPSHOT_EVERY: Final = 1000

_log = structlog.get_logger("contextledger.ledger")


class NewIds:
    """New message and part ids for one session: each after every id its history holds
    and every id issued here before (``IdGenerator`` from the greatest, at ``time_ms``)."""

    __slots__ = ("_history", "_message", "_part")

    def __init__(self, history: History) -> None:
        self._history = history
        self._message = ""
        self._part = ""

    def message(self, time_ms: int) -> str:
        """A new message id."""
        messages = self._history.messages
        last = max(self._message, messages[-1].id if messages else "")
        self._message = IdGenerator("msg", last or None).next(time_ms)
        return self._message

    def part(self, time_ms: int) -> str:
        """A new part id."""
        last = max(self._part, self._history.index.last_part_id)
        self._part = IdGenerator("prt", last or None).next(time_ms)
        return self._part


#: A batch made when its turn to be written comes, with ids from the writer's ``NewIds``.
Compose = Callable[[NewIds], Sequence[Event]]


class EventLog(Protocol):
    """What writes one session: its projection, and validated atomic appends. A
    ``SessionLog`` is one; inside the runtime, other actors get the session actor's
    ``SessionWriter``, whose appends go through the session's mailbox."""

    @property
    def session_id(self) -> str: ...

    @property
    def history(self) -> History: ...

    async def append(self, events: Sequence[Event]) -> list[RecordedEvent]: ...

    async def append_new(self, compose: Compose) -> list[RecordedEvent]:
        """Append the batch ``compose`` makes when the writer comes to it, after every batch
        queued before: the ids it takes from the ``NewIds`` it is given follow every id
        written before, whoever wrote it, and it sees the projection as it then is."""
        ...


class _Source:
    """The ``SnapshotSource`` of a restored projection: a store's ``SnapshotReader``, logging
    a snapshot found unusable once it was opened, and refusing to rebuild from the events of
    a session created again under the id of the ``log`` it serves."""

    __slots__ = ("_reader", "_session_id", "log")

    def __init__(self, reader: SnapshotReader, session_id: str) -> None:
        self._reader = reader
        self._session_id = session_id
        self.log: SessionLog | None = None

    def chunk(self, key: str) -> bytes | None:
        return self._reader.chunk(key)

    def events(self, reason: str) -> list[RecordedEvent]:
        _log.warning("snapshot unusable, rebuilding", session_id=self._session_id, error=reason)
        recorded = self._reader.events()
        if self.log is not None:
            self.log._check_place(recorded)
        return recorded


class _Chunks:
    """The ``SnapshotSource`` of a snapshot loaded whole, which cannot be rebuilt from."""

    __slots__ = ("_chunks",)

    def __init__(self, chunks: dict[str, bytes]) -> None:
        self._chunks = chunks

    def chunk(self, key: str) -> bytes | None:
        return self._chunks.get(key)

    def events(self, reason: str) -> list[RecordedEvent]:
        raise ValueError(reason)


async def _restored(
    store: EventStore, session_id: str, source: _Source | None
) -> tuple[History | None, str | None]:
    """The session's projection as its snapshot holds it, when there is a snapshot it can be
    loaded from, else None and why not: ``None`` when there is none or it is of another
    schema (logged at info), the problem when it does not match its checksum
    (``StoreCorruptError``), does not decode, or does not fit the session (past its last
    event, of another session). Such a snapshot is ignored in favour of a rebuild.

    Only the snapshot's head is read: the projection reads its messages from the store as
    it needs them through ``source``, and rebuilds itself from the events if one of them is
    unusable. Without a ``source``, every chunk is read and checked first, and read from
    memory (``check``)."""
    whole = source is None
    try:
        if whole:
            snapshot = await store.load_snapshot(session_id)
        else:
            snapshot = await store.load_snapshot_head(session_id)
    except StoreCorruptError as exc:
        return None, str(exc)
    if snapshot is None:
        return None, None
    if snapshot.schema != SNAPSHOT_SCHEMA:
        _log.info(
            "snapshot schema changed, rebuilding",
            session_id=session_id,
            found=snapshot.schema,
            current=SNAPSHOT_SCHEMA,
        )
        return None, None
    undecodable = f"the snapshot at seq {snapshot.seq} does not decode"
    try:
        history = History.restore(snapshot.data, source or _Chunks(snapshot.chunks))
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        return None, f"{undecodable}: {exc}"
    version = await store.stream_version(session_id)
    if history.seq != snapshot.seq or history.session_id != session_id or history.seq > version:
        return None, (
            f"the snapshot at seq {snapshot.seq} holds {history.session_id!r} at seq "
            f"{history.seq}, the session has {version} events"
        )
    if whole:
        try:
            history.load_all()
        except (KeyError, ValueError) as exc:
            return None, f"{undecodable}: {exc}"
    return history, None


class SessionReplacedError(ConcurrencyError):
    """The session a log holds was deleted since the log read it, and may have been created
    again under its id: the events the store now holds are another session's. Nothing was
    written or applied; open the session again (``SessionLog.open``)."""

    def __init__(self, stream: str, expected: int, actual: int) -> None:
        super().__init__(stream, expected, actual)
        self.args = (
            f"session {stream!r} was deleted since this log read it at seq {expected} (it "
            f"now has {actual} events): open it again",
        )


class SessionLog:
    """A session's event stream and its ``History``, kept in step."""

    __slots__ = ("_place", "_snapshot_every", "_snapshot_seq", "_stored", "history", "store")

    def __init__(
        self, store: EventStore, history: History, *, snapshot_every: int = SNAPSHOT_EVERY
    ) -> None:
        if snapshot_every < 1:
            raise ValueError("snapshot_every must be at least 1")
        self.store = store
        self.history = history
        self._snapshot_every = snapshot_every
        # The seq of the last snapshot written or tried (the next one is due
        # ``snapshot_every`` events later).
        self._snapshot_seq = history.seq
        # The seq of the snapshot this log knows stored and the history's cursor as of it:
        # the next snapshot writes what changed since. None: write it whole.
        self._stored: tuple[int, SnapshotCursor] | None = None
        # The seq and position of the last event this log applied (the position None until
        # known): no other event is ever given that position, so it tells this session from
        # one created again under its id.
        self._place: tuple[int, int | None] = (history.seq, None)

    @property
    def session_id(self) -> str:
        """The session (and stream) this log writes."""
        return self.history.session_id

    @classmethod
    async def open(
        cls, store: EventStore, session_id: str, *, snapshot_every: int = SNAPSHOT_EVERY
    ) -> SessionLog:
        """Load ``session_id`` from its latest snapshot plus the events after it (an empty
        history when the session has no events yet). A snapshot of another schema, or a
        damaged one, is ignored and the session rebuilt from its events."""
        source = _Source(store.snapshot_reader(session_id), session_id)
        restored, problem = await _restored(store, session_id, source)
        if problem is not None:
            _log.warning("snapshot unusable, rebuilding", session_id=session_id, error=problem)
        history = restored or History(session_id)
        # A stale or damaged snapshot counts as none: the next append past the interval
        # replaces it whole. A restored history's changes are those of the events after it.
        stored = None if restored is None else (restored.seq, restored.snapshot_cursor())
        log = source.log = cls(store, history, snapshot_every=snapshot_every)
        await log.refresh()
        log._snapshot_seq = 0 if restored is None else restored.seq
        log._stored = stored
        return log

    async def append(self, events: Sequence[Event]) -> list[RecordedEvent]:
        """Type-check, validate, append and apply ``events`` as one atomic batch.

        Each event is first checked against its schema, strictly (``EventCodec.typed_copies``:
        bytes are not text, None is not a finish reason, a role is one of the roles); the
        checked copies are what is validated, written, applied and returned, so the projection
        holds exactly what a later read of the store gives. Raises ``StoreArgumentError`` when
        ``events`` is not a list or tuple, ``InvalidEvent`` (naming
        the event's index in ``events`` and, for a wrong type, its field) or
        ``ConcurrencyError`` with nothing written and the projection unchanged. Once the
        batch has committed this returns normally: a snapshot written after it that fails is
        logged as a warning (``snapshot failed``) and tried again ``snapshot_every`` events
        later. The store is also told the position of the last event this log applied, so
        a session deleted since this log read it and created again to as many events (or
        fewer) raises ``SessionReplacedError`` (a ``ConcurrencyError``); one created again
        to more events raises the ``ConcurrencyError`` of any other writer's append, and
        ``refresh`` then raises ``SessionReplacedError``.
        """
        check_append(self.session_id, self.history.seq, events)
        typed = DEFAULT_CODEC.typed_copies(events)
        self.history.validate(typed)
        try:
            recorded = await self.store.append(
                self.session_id, self.history.seq, typed, expected_position=self._place[1]
            )
        except ConcurrencyError as exc:
            # Fewer events than this log applied, or as many ending in another one.
            if exc.actual < exc.expected or exc.actual_position is not None:
                raise SessionReplacedError(exc.stream, exc.expected, exc.actual) from None
            raise
        self.history.apply_all(recorded)
        if recorded:  # an empty batch writes nothing
            self._place = (recorded[-1].seq, recorded[-1].position)
        if self.history.seq - self._snapshot_seq >= self._snapshot_every:
            # The batch is committed; a snapshot is only a shortcut for loading, so neither a
            # cancellation nor any failure of it may turn this append into an error.
            with trio.CancelScope(shield=True):
                try:
                    await self.save_snapshot()
                except Exception as exc:
                    # Not at every append from now on: a full disk stays full for a while.
                    self._snapshot_seq = self.history.seq
                    _log.warning(
                        "snapshot failed",
                        session_id=self.session_id,
                        seq=self.history.seq,
                        error=f"{type(exc).__name__}: {exc}",
                    )
        return recorded

    async def append_new(self, compose: Compose) -> list[RecordedEvent]:
        """See ``EventLog.append_new``; a ``SessionLog`` is written by one task, so the batch
        is made now."""
        return await self.append(compose(NewIds(self.history)))

    async def refresh(self) -> int:
        """Apply events other writers appended since; return how many there were. Raises
        ``SessionReplacedError``, applying nothing, when the session was deleted since this
        log read it: the event at the history's seq is gone, or is another one (at another
        position)."""
        seq = self.history.seq
        recorded = await self.store.read(self.session_id, max(seq, 1))
        self._check_place(recorded)
        tail = recorded[1:] if seq else recorded
        self.history.apply_all(tail)
        if recorded:
            self._place = (recorded[-1].seq, recorded[-1].position)
        return len(tail)

    def _check_place(self, recorded: Sequence[RecordedEvent]) -> None:
        """Raise ``SessionReplacedError`` when ``recorded``, the session's events as the
        store now holds them (from seq 1, or from the history's seq, to the last), does not
        hold the last event this log applied: the session was deleted since."""
        seq, position = self._place
        if not seq:
            return
        at = seq - recorded[0].seq if recorded else -1
        if not 0 <= at < len(recorded) or position not in (None, recorded[at].position):
            raise SessionReplacedError(self.session_id, seq, recorded[-1].seq if recorded else 0)

    async def save_snapshot(self) -> None:
        """Store a snapshot of the projection as of now: its head and the messages changed
        since the last snapshot this log stored, on top of that one; the whole projection
        the first time, or when the store holds another writer's snapshot
        (``SnapshotBaseError``)."""
        history = self.history
        base, cursor = self._stored or (0, None)
        now = history.snapshot_cursor()
        try:
            await self.store.save_snapshot(self._snapshot(base, cursor))
        except SnapshotBaseError:
            await self.store.save_snapshot(self._snapshot(0, None))
        self._snapshot_seq = history.seq
        self._stored = (history.seq, now)

    def _snapshot(self, base: int, since: SnapshotCursor | None) -> Snapshot:
        history = self.history
        chunks = history.snapshot_chunks(since if base else None)
        return Snapshot(
            self.session_id, history.seq, SNAPSHOT_SCHEMA, history.snapshot_head(), chunks, base
        )


async def check_sessions(store: EventStore) -> list[Problem]:
    """Every problem in the sessions of ``store``, read through it: events that do not read
    (``decode``), events that name another session or may not follow the ones before them
    (``event``: a repeated message id, a part of no message, ...), and snapshots that cannot
    be used or differ from a replay of the events up to their seq (``snapshot``). Each
    session's replay stops at its first problem."""
    problems: list[Problem] = []
    for stream in await store.streams():
        try:
            recorded = await store.read(stream)
        except LedgerError as exc:
            where = getattr(exc, "position", None)
            problems.append(Problem("decode", str(exc), stream, where))
            continue
        history = History(stream)
        restored, problem = await _restored(store, stream, None)
        if problem is not None:
            problems.append(Problem("snapshot", problem, stream))
        for r in recorded:
            try:
                if r.event.session_id != stream:
                    raise InvalidEvent(0, struct_tag(r.event), "names another session")
                history.validate([r.event])
            except InvalidEvent as exc:
                detail = f"{exc.event_type}: {exc.reason}"
                problems.append(Problem("event", detail, stream, r.position, r.seq))
                break
            history.apply(r)
            if restored and r.seq == restored.seq and restored != history:
                detail = f"the snapshot at seq {r.seq} differs from the replay"
                problems.append(Problem("snapshot", detail, stream, seq=r.seq))
    return problems


# --- retention ------------------------------------------------------------------------------

#: The first line of an exported session names this format and its version.
EXPORT_FORMAT: Final = "contextledger-session"
EXPORT_VERSION: Final = 1


class InvalidExport(LedgerError):
    """A file given to ``import_session`` is not a session exported by ``export_session``
    (another format or version, a line that does not parse, seqs out of order, fewer or more
    events than its header says); nothing was written."""


async def _parents(store: EventStore) -> dict[str, str | None]:
    """Each session of ``store`` and the session it was started under (``SessionStarted.
    parent_session_id``; None for a session of its own), in the store's order."""
    parents: dict[str, str | None] = {}
    for stream in await store.streams():
        first = await store.read(stream, 1, 1)
        event = first[0].event if first else None
        parents[stream] = event.parent_session_id if isinstance(event, SessionStarted) else None
    return parents


def _children(parents: dict[str, str | None]) -> dict[str | None, list[str]]:
    children: dict[str | None, list[str]] = {}
    for stream, parent in parents.items():
        children.setdefault(parent, []).append(stream)
    return children


def _tree(children: dict[str | None, list[str]], session_id: str) -> list[str]:
    """``session_id`` and the sessions under it at any depth, parents first."""
    tree = [session_id]
    for session in tree:  # grows while it is walked: breadth first
        tree.extend(child for child in children.get(session, []) if child not in tree)
    return tree


async def session_tree(store: EventStore, session_id: str) -> list[str]:
    """``session_id`` and every session started under it (``SessionStarted.
    parent_session_id``, at any depth), parents first; empty when it does not exist."""
    parents = await _parents(store)
    return _tree(_children(parents), session_id) if session_id in parents else []


async def delete_session(store: EventStore, session_id: str) -> tuple[list[str], int]:
    """Delete ``session_id`` with its child sessions (``session_tree``) in one transaction;
    return the sessions and the number of events deleted. ``EventStore.reclaim_space``
    gives the room back afterwards (``SQLiteStore``'s file shrinks)."""
    tree = await session_tree(store, session_id)
    return tree, await store.delete_streams(tree)


async def expire_sessions(store: EventStore, before_ms: int) -> tuple[list[str], int]:
    """Delete every session tree (a session without a parent in the store, with its
    children) whose newest event is older than ``before_ms`` (its ``time_ms``); return the
    sessions and the number of events deleted."""
    parents = await _parents(store)
    newest: dict[str, int] = {}
    for stream in parents:
        last = await store.read(stream, max(await store.stream_version(stream), 1), 1)
        newest[stream] = last[0].event.time_ms if last else 0
    children = _children(parents)
    expired: list[str] = []
    for stream, parent in parents.items():
        if parent in parents:
            continue  # deleted with its root, or kept with it
        tree = _tree(children, stream)
        if max(newest[s] for s in tree) < before_ms:
            expired.extend(tree)
    return expired, await store.delete_streams(expired)


async def export_session(store: EventStore, session_id: str) -> AsyncIterator[bytes]:
    """The lines of a portable file of ``session_id``: a JSON header (``format``,
    ``version``, ``session``, ``events``), then one JSON line per event with its ``seq``,
    its schema version ``v`` and ``data``, its stored encoding (msgpack) in base64.
    ``import_session`` writes it back with identical events."""
    recorded = await store.read(session_id)
    if not recorded:
        raise ValueError(f"no session {session_id!r} to export")
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": session_id,
        "events": len(recorded),
    }
    yield _json.encode(header) + b"\n"
    codec = DEFAULT_CODEC
    for r in recorded:
        line = _ExportedEvent(r.seq, r.event.v, codec.encode(r.event))
        yield _json.encode(line) + b"\n"


class ExportedSession(msgspec.Struct, frozen=True):
    """A session read from an exported file (``read_export``): its id and its events, each
    decoded; ``write`` puts it into a store."""

    session_id: str
    events: list[Event]

    async def write(self, store: EventStore, *, snapshot_every: int = SNAPSHOT_EVERY) -> SessionLog:
        """Write the session into ``store`` through ``SessionLog`` (type-checked and
        validated) in one append, and return its log. Raises ``ConcurrencyError`` when the
        session already exists; nothing is written then."""
        log = await SessionLog.open(store, self.session_id, snapshot_every=snapshot_every)
        if log.history.seq:
            raise ConcurrencyError(self.session_id, 0, log.history.seq)
        await log.append(self.events)
        return log


def read_export(lines: Iterable[bytes]) -> ExportedSession:
    """The session of an exported file (``export_session``'s lines), every line read,
    decoded and its events checked as ``SessionLog.append`` checks them. Raises
    ``InvalidExport`` for a file that is not such an export."""
    rows = iter(lines)
    try:
        header = _json_decoder.decode(next(rows))
    except (StopIteration, msgspec.DecodeError):
        raise InvalidExport("not an exported session: no header line") from None
    if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
        raise InvalidExport("not an exported session: its header names no such format")
    if header.get("version") != EXPORT_VERSION or type(header.get("session")) is not str:
        raise InvalidExport(f"an export of version {header.get('version')!r} cannot be read")
    session_id: str = header["session"]
    # Rows as the store keeps them, each numbered by its line in the file.
    stored: list[tuple[int, int, int, bytes]] = []
    for number, row in enumerate(rows, 2):
        try:
            event = _event_decoder.decode(row)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise InvalidExport(f"line {number}: {exc}") from None
        if event.seq != len(stored) + 1:
            raise InvalidExport(f"line {number}: seq {event.seq} where {len(stored) + 1} belongs")
        stored.append((number, event.seq, event.v, event.data))
    if len(stored) != header.get("events"):
        raise InvalidExport(f"{len(stored)} events where the header says {header.get('events')}")
    try:
        events = [r.event for r in DEFAULT_CODEC.decode_stream(session_id, stored)]
    except EventDecodeError as exc:
        raise InvalidExport(f"line {exc.position}: {exc.reason}") from None
    try:  # as SessionLog.append will check them, before any store is opened
        validate_events(SessionIndex(session_id), DEFAULT_CODEC.typed_copies(events))
    except InvalidEvent as exc:
        raise InvalidExport(f"line {exc.index + 2}: {exc}") from None
    return ExportedSession(session_id, events)


async def import_session(
    store: EventStore, lines: Iterable[bytes], *, snapshot_every: int = SNAPSHOT_EVERY
) -> SessionLog:
    """Write the session of an exported file (``export_session``'s lines) into ``store``:
    ``read_export``, then ``ExportedSession.write``. Raises ``InvalidExport`` for a file that
    is not such an export, and ``ConcurrencyError`` when the session already exists; nothing
    is written then."""
    return await read_export(lines).write(store, snapshot_every=snapshot_every)


class _ExportedEvent(msgspec.Struct):
    seq: int
    v: int
    data: bytes


_json = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder()
_event_decoder = msgspec.json.Decoder(_ExportedEvent)


__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "SNAPSHOT_EVERY",
    "Compose",
    "EventLog",
    "ExportedSession",
    "InvalidExport",
    "NewIds",
    "SessionLog",
    "SessionReplacedError",
    "check_sessions",
    "delete_session",
    "expire_sessions",
    "export_session",
    "import_session",
    "read_export",
    "session_tree",
]
