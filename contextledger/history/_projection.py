"""The ``History`` projection: one session's messages and parts with every mutation applied.

``History.apply`` folds one recorded event in, in constant time (per part touched), and
``History.rebuild`` folds many. The state lives in one msgspec Struct (``HistoryState``) so a
snapshot is its encoding and two projections are equal exactly when their states are.
Messages are kept in id order; a message's ``version`` counts its changes, so views can
memoise per message version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, overload

import msgspec

from contextledger.events._catalogue import (
    MAIN_AGENT,
    AssistantFinished,
    CompactionCompleted,
    CompactionProjection,
    CompactionRequested,
    CompactionRolledBack,
    EnvironmentCaptured,
    Event,
    InputLeftOut,
    InstructionLoaded,
    MemoryPinned,
    MessageAdded,
    PartAdded,
    PartsStripped,
    PartUpdated,
    PrefixAdvanced,
    PrefixPinned,
    PrefixProfile,
    PrefixRotated,
    RecordedEvent,
    RequestSent,
    Role,
    SessionStarted,
    ToolOutputCleared,
    ToolOutputTrimmed,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._errors import LedgerError
from contextledger.events._parts import (
    CompactionPart,
    MessageError,
    ModelRef,
    Part,
    ToolCompleted,
    ToolPart,
    ToolSchema,
    Usage,
)
from contextledger.history._estimate import estimate_part_tokens, input_chars
from contextledger.history._pages import (
    CALL_BUCKETS,
    PAGE_ROWS,
    LoadingDict,
    PageProblem,
    PageTable,
    SnapshotSource,
    call_fingerprint,
    decode_page,
)
from contextledger.history._validation import (
    NOTERS,
    CompactionStatus,
    SessionIndex,
    message_facts,
    part_facts,
    validate_events,
)

#: Bumped whenever ``HistoryState``'s shape or the snapshot's layout changes; snapshots of
#: another schema are ignored and the session is rebuilt from its events instead. (7: the
#: messages in chunks of their own, ``snapshot_chunks``; 8: a chunk tells the seq of its
#: message's last change, and the ids are in pages, so a projection restores lazily; 9: the
#: tool calls' fingerprints in tables of their own, ``call_fingerprint``; 10: the last
#: request of each agent, ``last_requests``, where one held the session's last.)
SNAPSHOT_SCHEMA: Final = 10


class Message(msgspec.Struct, kw_only=True, gc=False):
    """One message of the history with its parts in id order.

    ``finished_ms`` is when an assistant message finished (its ``AssistantFinished``), None
    until it has. ``excluded`` is set when a rolled-back compaction withdrew the message from
    every view.
    ``stripped`` lists, in event order, the file and reasoning parts a ``PartsStripped``
    marked: the view sends a placeholder for such a file and nothing for such reasoning; the
    parts themselves stay as they were. ``version`` grows by one with each change to the
    message or one of its parts.
    """

    id: str
    role: Role
    parent_id: str | None = None
    agent: str
    agent_id: str
    model: ModelRef | None = None
    summary: bool = False
    synthetic: bool = False
    created_ms: int = 0
    finished_ms: int | None = None
    finish: str | None = None
    usage: Usage | None = None
    cost: float = 0.0
    error: MessageError | None = None
    excluded: bool = False
    stripped: tuple[str, ...] = ()
    version: int = 0
    parts: list[Part] = []


class Compaction(msgspec.Struct, kw_only=True, gc=False):
    """One compaction request and what became of it."""

    request_message_id: str
    status: CompactionStatus = "requested"
    summary_message_ids: list[str] = []
    tail_start_id: str | None = None
    projection: CompactionProjection | None = None


class PinnedPrefix(msgspec.Struct, kw_only=True, gc=False):
    """The request prefix in force and how far a successful step has carried it."""

    key: str
    profile: PrefixProfile
    tool_table: tuple[ToolSchema, ...] = ()
    advanced_to: str | None = None


class HistoryState(msgspec.Struct, kw_only=True):
    """Everything a session's events amount to. Its encoding is the projection snapshot.

    The projection's structs are not tracked by the garbage collector (``gc=False``): they
    hold plain data and never refer back to each other, so they cannot form cycles, and a
    long history of them would otherwise make every collection slower.
    """

    session_id: str
    seq: int = 0
    started: SessionStarted | None = None
    messages: list[Message] = []
    part_tokens: dict[str, int] = {}
    compactions: dict[str, Compaction] = {}
    environment: dict[str, str] = {}
    memory: str | None = None
    instructions: list[InstructionLoaded] = []
    prefix: PinnedPrefix | None = None
    #: The prefixes of the other agents' requests, by agent id (``prefix`` is the main one's).
    agent_prefixes: dict[str, PinnedPrefix] = {}
    #: Each agent's last request, by agent id: the one its next answer answers.
    last_requests: dict[str, RequestSent] = {}
    usage_reports: list[UsageReported] = []
    left_out: list[InputLeftOut] = []


class _MessageChunk(msgspec.Struct, array_like=True, gc=False):
    """A message as a snapshot chunk stores it: with the token estimates of its parts and the
    seq of the event that last changed it (a chunk stored by a later snapshot than the one
    a projection was restored from is still its message as of the projection's seq when
    that is not past its projection's seq)."""

    message: Message
    part_tokens: list[int]
    changed_seq: int


class _Head(msgspec.Struct, array_like=True):
    """A snapshot's head: the state without its messages, and what a projection restored
    from it needs before it reads a message: how many rows each id table has (their pages
    are chunks; ``History._tables``) and each agent's finished steps."""

    state: HistoryState
    finished: dict[str, int]
    counts: list[int]


#: Where a snapshot cursor stands: changes seen, and rows of each id table.
SnapshotCursor = tuple[int, ...]


TokenEstimator = Callable[[Part], int]


_snapshot_encoder = msgspec.msgpack.Encoder()
_snapshot_decoder = msgspec.msgpack.Decoder(HistoryState)
_head_decoder = msgspec.msgpack.Decoder(_Head)
_chunk_decoder = msgspec.msgpack.Decoder(_MessageChunk)


class History:
    """The projection of one session. Apply events in order; read ``messages``.

    Invariants kept by construction: messages and parts are in id order; a part's token
    estimate is computed once per part version; ``seq`` is the last applied event's seq.

    A projection restored from a snapshot (``History.restore``) starts with its head only
    and reads each message, and each page of ids, from the snapshot the first time it is
    needed; reading it is the same as reading a projection rebuilt from the events. Until
    ``load_all``, its ``state`` holds only the messages (and ``part_tokens`` only the parts)
    read so far, and reading more needs its store open.
    """

    __slots__ = (
        "_applying",
        "_calls",
        "_changed_at",
        "_changes",
        "_estimate",
        "_fingerprints",
        "_finished",
        "_index",
        "_inputs",
        "_lazy",
        "_messages",
        "_parts",
        "_rebuilt",
        "_source",
        "_structure",
        "_tables",
        "_unlisted",
        "state",
    )

    def __init__(self, session_id: str, *, estimate: TokenEstimator = estimate_part_tokens) -> None:
        self.state = HistoryState(session_id=session_id)
        # Built on first use from the state, then kept current: a replay that never
        # validates (views, the CLI, benchmarks) does not pay for it.
        self._index: SessionIndex | None = None
        self._estimate = estimate
        # Tool calls keep their input from version to version: its size is measured once.
        self._inputs: dict[str, tuple[dict[str, Any], int]] = {}
        self._messages: dict[str, Message] = {}
        self._parts: dict[str, tuple[Message, int]] = {}
        self._changes: list[str] = []
        # Each message's last change, by the seq of the event that made it (the one being
        # applied: ``state.seq`` is the last one applied whole).
        self._changed_at: dict[str, int] = {}
        self._applying = 0
        self._structure = 0
        self._finished: dict[str, int] = {}
        # The ids in the order they came: messages; parts with their message; tool calls
        # (part id, call id); then the calls' fingerprints, by bucket (``call_fingerprint``).
        self._tables = (
            PageTable("m", 1),
            PageTable("p", 2),
            PageTable("c", 2),
            *(PageTable(f"f{bucket}", 1) for bucket in range(CALL_BUCKETS)),
        )
        # Parts added and not yet in the tables (nor, unless restored, messages): applying
        # only notes them, the tables take them when next read (``_listed_tables``).
        self._unlisted: list[Part] = []
        # A restored projection's snapshot, its messages as a lazy sequence, its calls by
        # id once asked for, and the projection rebuilt from the events when the snapshot
        # turned out to be unusable.
        self._source: SnapshotSource | None = None
        self._lazy: _LazyMessages | None = None
        self._calls: dict[str, str] | None = None
        # Per bucket: how many of its table's rows the set of fingerprints holds.
        self._fingerprints: dict[int, tuple[int, set[str]]] = {}
        self._rebuilt: History | None = None

    # --- reading --------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session this history projects."""
        return self.state.session_id

    @property
    def seq(self) -> int:
        """The seq of the last event applied (0 before any)."""
        return self.state.seq

    @property
    def messages(self) -> Sequence[Message]:
        """Every message in id order, excluded ones included (views skip those). Of a
        restored projection, a sequence that reads each message when it is first asked for:
        reading from the end back costs what is read."""
        return self.state.messages if self._lazy is None else self._lazy

    def message(self, message_id: str) -> Message:
        """The message ``message_id``; raises ``KeyError`` when it does not exist."""
        return self._messages[message_id]

    def part(self, part_id: str) -> Part:
        """The current version of part ``part_id``; raises ``KeyError`` when unknown."""
        message, i = self._parts[part_id]
        return message.parts[i]

    def part_tokens(self, part_id: str) -> int:
        """The token estimate of the current version of part ``part_id``."""
        return self.state.part_tokens[part_id]

    def load_all(self) -> None:
        """Read every message a restored projection has not read yet, so that ``state``
        holds them all (done by ``==`` and ``snapshot``); nothing for any other."""
        if self._lazy is None:
            return
        tables = self._listed_tables()
        messages = list(map(self._listed, tables[0].column(0)))
        for table in tables[1:]:
            table.column(0)  # every page read: the tables are whole from now on
        self._lazy = None
        self._source = None
        self._rebuilt = None
        self.state.messages = messages
        self.state.part_tokens = dict(self.state.part_tokens)
        self._messages = dict(self._messages)
        self._parts = dict(self._parts)
        self._index = None  # rebuilt whole from the state when next needed

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, History):
            return False
        self.load_all()
        other.load_all()
        return self.state == other.state

    __hash__ = None  # type: ignore[assignment]

    @property
    def structure(self) -> int:
        """Counts events after which a view must be rebuilt rather than patched: they move
        messages in or out of it (a compaction requested, completed or rolled back, and a
        summary message appearing or finishing)."""
        return self._structure

    def finished_steps(self, agent_id: str) -> int:
        """How many of ``agent_id``'s model steps have finished: its assistant messages,
        summaries aside, that have a finish (excluded ones included), counted as they finish
        rather than looked up."""
        return self._finished.get(agent_id, 0)

    def changed_since(self, cursor: int) -> tuple[list[str], int]:
        """Ids of the messages changed by events applied since ``cursor`` (oldest first, may
        repeat) and the cursor to pass next time. Cursors are valid for this object only."""
        return self._changes[cursor:], len(self._changes)

    # --- writing --------------------------------------------------------------------------

    def validate(self, events: Iterable[Event]) -> None:
        """Raise ``InvalidEvent`` if ``events`` may not be appended next; change nothing."""
        validate_events(self.index, events)

    def apply(self, recorded: RecordedEvent) -> None:
        """Fold one recorded event into the projection."""
        self._applying = recorded.seq
        self._apply(recorded.event)
        self.state.seq = recorded.seq

    def apply_all(self, recorded: Iterable[RecordedEvent]) -> None:
        """Fold events in order."""
        for r in recorded:
            self._applying = r.seq
            self._apply(r.event)
            self.state.seq = r.seq

    @classmethod
    def rebuild(
        cls,
        session_id: str,
        recorded: Iterable[RecordedEvent],
        *,
        estimate: TokenEstimator = estimate_part_tokens,
    ) -> History:
        """A new projection of ``session_id`` from its events."""
        history = cls(session_id, estimate=estimate)
        history.apply_all(recorded)
        return history

    def _apply(self, event: Event) -> None:
        kind = type(event)
        if self._index is not None:
            noter = NOTERS.get(kind)
            if noter is not None:
                noter(self._index, event)
        _APPLIERS[kind](self, event)

    # One method per event type, dispatched on the type (this runs for every event applied).

    def _on_part_added(self, event: PartAdded) -> None:
        self._add_part(event.part)

    def _on_tool_state(self, event: ToolStateChanged) -> None:
        message, i = self._parts[event.part_id]
        part = message.parts[i]
        assert isinstance(part, ToolPart)
        self._replace_part(msgspec.structs.replace(part, state=event.state))

    def _on_message(self, event: MessageAdded) -> None:
        self._add_message(
            Message(
                id=event.message_id,
                role=event.role,
                parent_id=event.parent_id,
                agent=event.agent,
                agent_id=event.agent_id,
                model=event.model,
                summary=event.summary,
                synthetic=event.synthetic,
                created_ms=event.time_ms,
            )
        )
        if event.summary:
            self._structure += 1
            compaction = self.state.compactions.get(event.parent_id or "")
            if compaction is not None:
                compaction.summary_message_ids.append(event.message_id)

    def _on_finished(self, event: AssistantFinished) -> None:
        message = self._messages[event.message_id]
        if message.finish is None:
            self._count_finished(message)
        message.finish = event.finish
        message.finished_ms = event.time_ms
        message.usage = event.usage
        message.cost = event.cost
        message.error = event.error
        if message.summary:
            self._structure += 1  # a finished summary is what cuts the view before it
        self._touch(message)

    def _on_part_updated(self, event: PartUpdated) -> None:
        self._replace_part(event.part)

    def _on_cleared(self, event: ToolOutputCleared) -> None:
        for part_id in event.part_ids:
            self._update_tool(
                part_id,
                lambda p: _with_output(
                    p, compacted_ms=event.time_ms, compacted_reason=event.reason
                ),
            )

    def _on_trimmed(self, event: ToolOutputTrimmed) -> None:
        self._update_tool(
            event.part_id,
            lambda p: _with_output(p, trimmed=(event.head_chars, event.tail_chars)),
        )

    def _on_stripped(self, event: PartsStripped) -> None:
        for part_id in event.part_ids:
            message, _ = self._parts[part_id]
            message.stripped = (*message.stripped, part_id)
            self._touch(message)

    def _on_compaction_requested(self, event: CompactionRequested) -> None:
        self._structure += 1
        self._add_message(
            Message(
                id=event.message_id,
                role="user",
                parent_id=event.parent_id,
                agent=event.agent_id,
                agent_id=event.agent_id,
                synthetic=event.trigger != "manual",
                created_ms=event.time_ms,
            )
        )
        self._add_part(
            CompactionPart(
                id=event.part_id,
                message_id=event.message_id,
                auto=event.auto,
                overflow=event.overflow,
                trigger=event.trigger,
            )
        )
        self.state.compactions[event.message_id] = Compaction(request_message_id=event.message_id)

    def _on_compaction_completed(self, event: CompactionCompleted) -> None:
        self._structure += 1
        compaction = self.state.compactions[event.request_message_id]
        compaction.status = "completed"
        compaction.tail_start_id = event.tail_start_id
        compaction.projection = event.projection
        for part in self._messages[event.request_message_id].parts:
            if isinstance(part, CompactionPart):
                self._replace_part(msgspec.structs.replace(part, tail_start_id=event.tail_start_id))

    def _on_rolled_back(self, event: CompactionRolledBack) -> None:
        self._structure += 1
        compaction = self.state.compactions[event.request_message_id]
        compaction.status = "rolled_back"
        for message_id in (event.request_message_id, *compaction.summary_message_ids):
            message = self._messages[message_id]
            message.excluded = True
            self._touch(message)

    def _on_started(self, event: SessionStarted) -> None:
        self.state.started = event

    def _on_environment(self, event: EnvironmentCaptured) -> None:
        self.state.environment[event.user_message_id] = event.text
        self._touch(self._messages[event.user_message_id])

    def _on_memory(self, event: MemoryPinned) -> None:
        self.state.memory = event.text

    def _on_instruction(self, event: InstructionLoaded) -> None:
        self.state.instructions.append(event)

    def _on_prefix(self, event: PrefixPinned | PrefixRotated) -> None:
        pinned = PinnedPrefix(key=event.key, profile=event.profile, tool_table=event.tool_table)
        if event.agent_id == MAIN_AGENT:
            self.state.prefix = pinned
        else:
            self.state.agent_prefixes[event.agent_id] = pinned

    def _on_prefix_advanced(self, event: PrefixAdvanced) -> None:
        pinned = self.pinned_prefix(event.agent_id)
        if pinned is not None:
            pinned.advanced_to = event.message_id

    def pinned_prefix(self, agent_id: str = MAIN_AGENT) -> PinnedPrefix | None:
        """The prefix pinned for ``agent_id``'s requests (each agent has its own, so
        switching agents rotates nothing), None before its first request."""
        if agent_id == MAIN_AGENT:
            return self.state.prefix
        return self.state.agent_prefixes.get(agent_id)

    def last_request(self, agent_id: str = MAIN_AGENT) -> RequestSent | None:
        """The last request ``agent_id`` sent (another agent's requests sent since, while
        its call ran, leave it as it is), None before its first."""
        return self.state.last_requests.get(agent_id)

    def _on_request(self, event: RequestSent) -> None:
        self.state.last_requests[event.agent_id] = event

    def _on_usage(self, event: UsageReported) -> None:
        self.state.usage_reports.append(event)

    def _on_left_out(self, event: InputLeftOut) -> None:
        self.state.left_out.append(event)

    def _count_finished(self, message: Message) -> None:
        if message.role == "assistant" and not message.summary:
            self._finished[message.agent_id] = self._finished.get(message.agent_id, 0) + 1

    def _touch(self, message: Message) -> None:
        message.version += 1
        self._changes.append(message.id)
        self._changed_at[message.id] = self._applying

    def _add_message(self, message: Message) -> None:
        self._messages[message.id] = message
        if self._lazy is None:
            self.state.messages.append(message)
        else:
            self._tables[0].append((message.id,))
        self._changes.append(message.id)
        self._changed_at[message.id] = self._applying

    def _add_part(self, part: Part) -> None:
        message = self._messages[part.message_id]
        self._parts[part.id] = (message, len(message.parts))
        message.parts.append(part)
        self._touch(message)
        self.state.part_tokens[part.id] = self._tokens(part)
        self._unlisted.append(part)

    def _tokens(self, part: Part) -> int:
        if type(part) is not ToolPart or self._estimate is not estimate_part_tokens:
            return self._estimate(part)
        tool_input = part.state.input
        known = self._inputs.get(part.id)
        if known is None or (known[0] is not tool_input and known[0] != tool_input):
            known = self._inputs[part.id] = (tool_input, input_chars(tool_input))
        elif known[0] is not tool_input:
            # An equal copy (each event decodes its own): keep the part's, not the old one.
            self._inputs[part.id] = (tool_input, known[1])
        return estimate_part_tokens(part, tool_input_chars=known[1])

    def _replace_part(self, part: Part) -> None:
        message, i = self._parts[part.id]
        message.parts[i] = part
        self._touch(message)
        self.state.part_tokens[part.id] = self._tokens(part)

    def _update_tool(self, part_id: str, change: Callable[[ToolPart], ToolPart]) -> None:
        message, i = self._parts[part_id]
        part = message.parts[i]
        assert isinstance(part, ToolPart)
        self._replace_part(change(part))

    # --- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The projection encoded whole; ``History.from_snapshot`` restores it."""
        self.load_all()
        return _snapshot_encoder.encode(self.state)

    @classmethod
    def from_snapshot(
        cls, data: bytes, *, estimate: TokenEstimator = estimate_part_tokens
    ) -> History:
        """Restore a projection saved by ``snapshot`` (same ``SNAPSHOT_SCHEMA``)."""
        state = _snapshot_decoder.decode(data)
        history = cls(state.session_id, estimate=estimate)
        history.state = state
        for message in state.messages:
            history._messages[message.id] = message
            for i, part in enumerate(message.parts):
                history._parts[part.id] = (message, i)
            if message.finish is not None:
                history._count_finished(message)
        # In id order, as they were added (parts can be added to an older message later).
        parts = (part for message in state.messages for part in message.parts)
        history._unlisted = sorted(parts, key=lambda part: part.id)
        return history

    def _listed_tables(self) -> tuple[PageTable, ...]:
        """The tables of ids, with every message and part added so far."""
        messages, parts, calls, *fingerprints = self._tables
        if self._lazy is None:
            for message in self.state.messages[len(messages) :]:
                messages.append((message.id,))
        for part in self._unlisted:
            parts.append((part.id, part.message_id))
            if type(part) is ToolPart:
                calls.append((part.id, part.call_id))
                bucket, fingerprint = call_fingerprint(part.call_id)
                fingerprints[bucket].append((fingerprint,))
        self._unlisted.clear()
        return self._tables

    def snapshot_cursor(self) -> SnapshotCursor:
        """Where the projection stands now, for ``snapshot_chunks`` to give what changes
        after. Valid for this object only."""
        return len(self._changes), *map(len, self._listed_tables())

    def snapshot_head(self) -> bytes:
        """A snapshot's head, encoded: the projection without its messages, whose chunks
        are the messages and the pages of ids (``snapshot_chunks``)."""
        state = msgspec.structs.replace(self.state, messages=[], part_tokens={})
        counts = list(map(len, self._listed_tables()))
        return _snapshot_encoder.encode(_Head(state, self._finished, counts))

    def snapshot_chunks(self, since: SnapshotCursor | None = None) -> dict[str, bytes]:
        """A snapshot's chunks, by key: each message changed since ``since``
        (``snapshot_cursor``; every message when None) encoded with its parts' token
        estimates, and the pages of ids that changed since."""
        tables = self._listed_tables()
        if since is None:
            keys: Iterable[str] = tables[0].column(0)
            since = (0,) * (1 + len(tables))
        else:
            keys = dict.fromkeys(self._changes[since[0] :])
        tokens = self.state.part_tokens
        chunks = {}
        for key in keys:
            message = self.message(key)
            part_tokens = [tokens[p.id] for p in message.parts]
            # Restored from a whole snapshot, a message's last change is not known: the seq
            # now is an upper bound, so a reader at an earlier seq does not take it.
            chunk = _MessageChunk(message, part_tokens, self._changed_at.get(key, self.seq))
            chunks[key] = _snapshot_encoder.encode(chunk)
        for table, count in zip(tables, since[1:], strict=True):
            chunks.update(table.pages_since(count))
        return chunks

    @classmethod
    def restore(
        cls,
        head: bytes,
        source: SnapshotSource,
        *,
        estimate: TokenEstimator = estimate_part_tokens,
    ) -> History:
        """A projection restored from a snapshot's head (``snapshot_head``) that reads its
        messages and pages of ids from ``source`` as it needs them. Raises
        ``msgspec.DecodeError`` or ``msgspec.ValidationError`` for a head that does not
        decode and ``ValueError`` for one that holds messages. A chunk or page read later
        that is damaged or does not fit (``PageProblem``) makes it rebuild itself from the
        events (``SnapshotSource.events``) and read from that from then on."""
        decoded = _head_decoder.decode(head)
        state = decoded.state
        if state.messages or state.part_tokens:
            raise ValueError("a snapshot's head holds no messages")
        history = cls(state.session_id, estimate=estimate)
        history.state = state
        history._finished = decoded.finished
        history._source = source
        counts = decoded.counts
        if len(counts) != len(history._tables) or min(counts) < 0:
            raise ValueError(f"a snapshot's head counts {counts} ids in its tables")
        history._tables = tuple(
            PageTable(t.name, t.width, n, history._read_page)
            for t, n in zip(history._tables, counts, strict=True)
        )
        history._lazy = _LazyMessages(history)
        history._messages = LoadingDict(history._read_message)
        history._parts = LoadingDict(history._find_part)
        state.part_tokens = LoadingDict(history._find_part_tokens)
        return history

    def _read_page(self, table: PageTable, number: int, rows: int) -> list[list[str]]:
        key = table.page_key(number)
        if self._rebuilt is None:
            try:
                assert self._source is not None
                return decode_page(self._source.chunk(key), key, table.width, rows)
            except (LedgerError, PageProblem) as exc:
                self._rebuild(str(exc))
        assert self._rebuilt is not None
        rebuilt = {t.name: t for t in self._rebuilt._listed_tables()}[table.name]
        start = number * PAGE_ROWS
        held = [rebuilt.row(i) for i in range(start, start + rows)]
        return [[row[c] for row in held] for c in range(table.width)]

    def _read_message(self, message_id: str) -> Message:
        if self._rebuilt is None:
            try:
                return self._decode_message(message_id)
            except (LedgerError, PageProblem, msgspec.DecodeError, msgspec.ValidationError) as exc:
                self._rebuild(str(exc))
        assert self._rebuilt is not None
        rebuilt = self._rebuilt
        message = rebuilt.message(message_id)
        self._keep(message, [rebuilt.part_tokens(p.id) for p in message.parts])
        self._changed_at[message_id] = rebuilt._changed_at[message_id]
        return message

    def _decode_message(self, message_id: str) -> Message:
        assert self._source is not None
        data = self._source.chunk(message_id)
        if data is None:
            raise KeyError(message_id)
        chunk = _chunk_decoder.decode(data)
        message = chunk.message
        if message.id != message_id or len(chunk.part_tokens) != len(message.parts):
            raise PageProblem(f"chunk {message_id!r} holds another message or other parts")
        if chunk.changed_seq > self.seq:
            raise PageProblem(
                f"chunk {message_id!r} was changed at seq {chunk.changed_seq}, after {self.seq}"
            )
        self._keep(message, chunk.part_tokens)
        self._changed_at[message_id] = chunk.changed_seq
        return message

    def _keep(self, message: Message, part_tokens: list[int]) -> None:
        """Hold the parts of ``message``, read from the snapshot."""
        for i, (part, tokens) in enumerate(zip(message.parts, part_tokens, strict=True)):
            dict.__setitem__(self._parts, part.id, (message, i))
            dict.__setitem__(self.state.part_tokens, part.id, tokens)

    def _listed(self, message_id: str) -> Message:
        """A message the pages of ids list: a chunk missing for it is a damaged snapshot."""
        try:
            return self._messages[message_id]
        except KeyError:
            if self._rebuilt is not None:
                raise
            self._rebuild(f"the chunk of message {message_id!r} is missing")
            return self._messages[message_id]

    def _find_part(self, part_id: str) -> tuple[Message, int]:
        parts = self._listed_tables()[1]
        row = parts.find(part_id)
        if row is None:
            raise KeyError(part_id)
        self._listed(parts.row(row)[1])
        found = dict.get(self._parts, part_id)
        if found is None:  # the page of ids and the message disagree
            self._rebuild(f"part {part_id!r} is not in its message's chunk")
            return self._rebuilt_part(part_id)
        return found

    def _rebuilt_part(self, part_id: str) -> tuple[Message, int]:
        assert self._rebuilt is not None
        message, i = self._rebuilt._parts[part_id]
        return self.message(message.id), i

    def _find_part_tokens(self, part_id: str) -> int:
        self._parts[part_id]  # reads its message, and with it its parts' estimates
        return int(dict.__getitem__(self.state.part_tokens, part_id))

    def _rebuild(self, reason: str) -> None:
        """Read from a projection rebuilt from the events up to ``seq`` from now on."""
        assert self._source is not None
        events = [r for r in self._source.events(reason) if r.seq <= self.seq]
        self._rebuilt = History.rebuild(self.session_id, events, estimate=self._estimate)

    @property
    def index(self) -> SessionIndex:
        """The facts validation checks new events against (built from the state on first
        use, then kept current by ``apply``). A restored projection's index reads each fact
        from the message it is about when it is first asked for."""
        if self._index is None:
            self._index = self._index_from_state()
        return self._index

    def _index_from_state(self) -> SessionIndex:
        state = self.state
        index = SessionIndex(state.session_id)
        index.started = state.started is not None
        index.memory_pinned = state.memory is not None
        if state.prefix is not None:
            index.prefix_keys[MAIN_AGENT] = state.prefix.key
        index.prefix_keys.update({a: p.key for a, p in state.agent_prefixes.items()})
        for compaction in state.compactions.values():
            index.compactions[compaction.request_message_id] = compaction.status
        for message_id in state.environment:
            index.environment[message_id] = None
        for instruction in state.instructions:
            index.instructions[(instruction.path, instruction.message_id)] = None
        tables = self._listed_tables()
        index.last_message_id = tables[0].last_key()
        index.last_part_id = tables[1].last_key()
        if self._lazy is not None:
            index.messages = LoadingDict(lambda key: message_facts(self.message(key)))
            index.parts = LoadingDict(lambda key: part_facts(self.part(key)))
            index.calls = LoadingDict(self._call_part)
            index.stripped = LoadingDict(self._stripped)
            return index
        for message in state.messages:
            index.messages[message.id] = message_facts(message)
            for part in message.parts:
                index.parts[part.id] = part_facts(part)
                if type(part) is ToolPart:
                    index.calls[part.call_id] = part.id
            for part_id in message.stripped:
                index.stripped[part_id] = None
        return index

    def _call_part(self, call_id: str) -> str:
        """The part of tool call ``call_id``. Unless its fingerprint is in its bucket's
        pages (so almost only for a call made), it has none; when it is, the part is read
        from the pages of calls (once, for every call)."""
        tables = self._listed_tables()
        bucket, fingerprint = call_fingerprint(call_id)
        if fingerprint not in self._bucket(tables[3 + bucket], bucket):
            raise KeyError(call_id)
        if self._calls is None:
            calls = tables[2]
            self._calls = dict(zip(calls.column(1), calls.column(0), strict=True))
        return self._calls[call_id]

    def _bucket(self, table: PageTable, bucket: int) -> set[str]:
        """The fingerprints in ``bucket``'s table, read once and extended as it grows."""
        seen, known = self._fingerprints.get(bucket, (0, set()))
        if seen < len(table):
            known.update(table.column(0, seen))
            self._fingerprints[bucket] = (len(table), known)
        return known

    def _stripped(self, part_id: str) -> None:
        message, _ = self._parts[part_id]
        if part_id not in message.stripped:
            raise KeyError(part_id)


class _LazyMessages(Sequence[Message]):
    """The messages of a restored projection, in id order, each read when first asked for."""

    __slots__ = ("_history",)

    def __init__(self, history: History) -> None:
        self._history = history

    def __len__(self) -> int:
        return len(self._history._tables[0])

    @overload
    def __getitem__(self, i: int) -> Message: ...

    @overload
    def __getitem__(self, i: slice) -> list[Message]: ...

    def __getitem__(self, i: int | slice) -> Message | list[Message]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError("message index out of range")
        return self._history._listed(self._history._tables[0].key(i % n))

    def __iter__(self) -> Iterator[Message]:
        return map(self.__getitem__, range(len(self)))

    def __reversed__(self) -> Iterator[Message]:
        return map(self.__getitem__, range(len(self) - 1, -1, -1))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


def _with_output(
    part: ToolPart,
    *,
    compacted_ms: int | None = None,
    compacted_reason: str | None = None,
    trimmed: tuple[int, int] | None = None,
) -> ToolPart:
    state = part.state
    assert isinstance(state, ToolCompleted)
    changes: dict[str, object] = {}
    if compacted_ms is not None:
        changes.update(compacted_ms=compacted_ms, compacted_reason=compacted_reason)
    if trimmed is not None:
        changes["trimmed"] = trimmed
    return msgspec.structs.replace(part, state=msgspec.structs.replace(state, **changes))


_APPLIERS: dict[type, Callable[[History, Any], None]] = {
    PartAdded: History._on_part_added,
    ToolStateChanged: History._on_tool_state,
    MessageAdded: History._on_message,
    AssistantFinished: History._on_finished,
    PartUpdated: History._on_part_updated,
    ToolOutputCleared: History._on_cleared,
    ToolOutputTrimmed: History._on_trimmed,
    PartsStripped: History._on_stripped,
    CompactionRequested: History._on_compaction_requested,
    CompactionCompleted: History._on_compaction_completed,
    CompactionRolledBack: History._on_rolled_back,
    SessionStarted: History._on_started,
    EnvironmentCaptured: History._on_environment,
    MemoryPinned: History._on_memory,
    InstructionLoaded: History._on_instruction,
    PrefixPinned: History._on_prefix,
    PrefixRotated: History._on_prefix,
    PrefixAdvanced: History._on_prefix_advanced,
    RequestSent: History._on_request,
    UsageReported: History._on_usage,
    InputLeftOut: History._on_left_out,
}
