"""The ``History`` projection: one session's messages and parts with every mutation applied.

``History.apply`` folds one recorded event in, in constant time (per part touched), and
``History.rebuild`` folds many. The state lives in one msgspec Struct (``HistoryState``) so a
snapshot is its encoding and two projections are equal exactly when their states are.
Messages are kept in id order; a message's ``version`` counts its changes, so views can
memoise per message version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

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
from contextledger.history._validation import (
    NOTERS,
    CompactionStatus,
    SessionIndex,
    validate_events,
)

#: Bumped whenever ``HistoryState``'s shape or the snapshot's layout changes; snapshots of
#: another schema are ignored and the session is rebuilt from its events instead. (7: the
#: messages in chunks of their own, ``snapshot_chunks``.)
SNAPSHOT_SCHEMA: Final = 7


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
    last_request: RequestSent | None = None
    usage_reports: list[UsageReported] = []
    left_out: list[InputLeftOut] = []


class _MessageChunk(msgspec.Struct, array_like=True, gc=False):
    """A message as a snapshot chunk stores it: with the token estimates of its parts."""

    message: Message
    part_tokens: list[int]


TokenEstimator = Callable[[Part], int]


_snapshot_encoder = msgspec.msgpack.Encoder()
_snapshot_decoder = msgspec.msgpack.Decoder(HistoryState)
_chunk_decoder = msgspec.msgpack.Decoder(_MessageChunk)


class History:
    """The projection of one session. Apply events in order; read ``messages``.

    Invariants kept by construction: messages and parts are in id order; a part's token
    estimate is computed once per part version; ``seq`` is the last applied event's seq.
    """

    __slots__ = (
        "_changes",
        "_estimate",
        "_finished",
        "_index",
        "_inputs",
        "_messages",
        "_parts",
        "_structure",
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
        self._structure = 0
        self._finished: dict[str, int] = {}

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
    def messages(self) -> list[Message]:
        """Every message in id order, excluded ones included (views skip those)."""
        return self.state.messages

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

    def __eq__(self, other: object) -> bool:
        return isinstance(other, History) and self.state == other.state

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
        self._apply(recorded.event)
        self.state.seq = recorded.seq

    def apply_all(self, recorded: Iterable[RecordedEvent]) -> None:
        """Fold events in order."""
        for r in recorded:
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

    def _on_request(self, event: RequestSent) -> None:
        self.state.last_request = event

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

    def _add_message(self, message: Message) -> None:
        self._messages[message.id] = message
        self.state.messages.append(message)
        self._changes.append(message.id)

    def _add_part(self, part: Part) -> None:
        message = self._messages[part.message_id]
        self._parts[part.id] = (message, len(message.parts))
        message.parts.append(part)
        self._touch(message)
        self.state.part_tokens[part.id] = self._tokens(part)

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
        return _snapshot_encoder.encode(self.state)

    @classmethod
    def from_snapshot(
        cls, data: bytes, *, estimate: TokenEstimator = estimate_part_tokens
    ) -> History:
        """Restore a projection saved by ``snapshot`` (same ``SNAPSHOT_SCHEMA``)."""
        return cls._restored(_snapshot_decoder.decode(data), estimate)

    def snapshot_head(self) -> bytes:
        """The projection without its messages, encoded: a snapshot's head, whose chunks
        are the messages (``snapshot_chunks``)."""
        head = msgspec.structs.replace(self.state, messages=[], part_tokens={})
        return _snapshot_encoder.encode(head)

    def snapshot_chunks(self, message_ids: Iterable[str] | None = None) -> dict[str, bytes]:
        """The messages ``message_ids`` (every message when None) encoded, each with its
        parts' token estimates, by message id: what a snapshot stores of the messages
        ``changed_since`` the last one."""
        messages = self.messages if message_ids is None else map(self.message, message_ids)
        tokens = self.state.part_tokens
        return {
            m.id: _snapshot_encoder.encode(_MessageChunk(m, [tokens[p.id] for p in m.parts]))
            for m in messages
        }

    @classmethod
    def from_snapshot_chunks(
        cls,
        head: bytes,
        chunks: Iterable[tuple[str, bytes]],
        *,
        estimate: TokenEstimator = estimate_part_tokens,
    ) -> History:
        """Restore a projection from a snapshot's head and its chunks in message id order
        (``snapshot_head``, ``snapshot_chunks``). Raises ``msgspec.DecodeError`` or
        ``msgspec.ValidationError`` for bytes that do not decode, and ``ValueError`` for
        chunks that do not make a projection (a message under another key, out of order, or
        with another number of token estimates than parts)."""
        state = _snapshot_decoder.decode(head)
        if state.messages or state.part_tokens:
            raise ValueError("a snapshot's head holds no messages")
        last = ""
        for key, data in chunks:
            chunk = _chunk_decoder.decode(data)
            message = chunk.message
            if message.id != key or key <= last:
                raise ValueError(f"chunk {key!r} holds message {message.id!r} after {last!r}")
            if len(chunk.part_tokens) != len(message.parts):
                raise ValueError(f"chunk {key!r} has token estimates for other parts")
            state.messages.append(message)
            state.part_tokens.update(
                zip((p.id for p in message.parts), chunk.part_tokens, strict=True)
            )
            last = key
        return cls._restored(state, estimate)

    @classmethod
    def _restored(cls, state: HistoryState, estimate: TokenEstimator) -> History:
        history = cls(state.session_id, estimate=estimate)
        history.state = state
        for message in state.messages:
            history._messages[message.id] = message
            for i, part in enumerate(message.parts):
                history._parts[part.id] = (message, i)
            if message.finish is not None:
                history._count_finished(message)
        return history

    @property
    def index(self) -> SessionIndex:
        """The facts validation checks new events against (built from the state on first
        use, then kept current by ``apply``)."""
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
        for message in state.messages:
            index.note(
                MessageAdded(
                    session_id=state.session_id,
                    message_id=message.id,
                    role=message.role,
                    parent_id=message.parent_id,
                    summary=message.summary,
                )
            )
            if message.finish is not None and message.role == "assistant":
                index.messages[message.id].finished = True
            for part in message.parts:
                index.note(PartAdded(session_id=state.session_id, part=part))
            for part_id in message.stripped:
                index.stripped[part_id] = None
        for compaction in state.compactions.values():
            index.compactions[compaction.request_message_id] = compaction.status
        # Parts can be added to an older message later, so the last part noted is not always
        # the greatest; ids must keep increasing.
        index.last_part_id = max(self._parts, default="")
        for message_id in state.environment:
            index.environment[message_id] = None
        for instruction in state.instructions:
            index.instructions[(instruction.path, instruction.message_id)] = None
        return index


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
