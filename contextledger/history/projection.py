"""The ``History`` projection: one session's messages and parts with every mutation applied.

``History.apply`` folds one recorded event in, in constant time (per part touched), and
``History.rebuild`` folds many. The state lives in one msgspec Struct (``HistoryState``) so a
snapshot is its encoding and two projections are equal exactly when their states are.
Messages are kept in id order; a message's ``version`` counts its changes, so views can
memoise per message version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

import msgspec

from contextledger.events.catalogue import (
    AssistantFinished,
    CompactionCompleted,
    CompactionProjection,
    CompactionRequested,
    CompactionRolledBack,
    EnvironmentCaptured,
    Event,
    MemoryPinned,
    MessageAdded,
    PartAdded,
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
from contextledger.events.parts import (
    CompactionPart,
    MessageError,
    ModelRef,
    Part,
    ToolCompleted,
    ToolPart,
    Usage,
)
from contextledger.history.estimate import estimate_part_tokens
from contextledger.history.validation import CompactionStatus, SessionIndex, validate_events

#: Bumped whenever ``HistoryState``'s shape changes; snapshots of another schema are ignored
#: and the session is rebuilt from its events instead.
SNAPSHOT_SCHEMA: Final = 1


class Message(msgspec.Struct, kw_only=True):
    """One message of the history with its parts in id order.

    ``excluded`` is set when a rolled-back compaction withdrew the message from every view.
    ``version`` grows by one with each change to the message or one of its parts.
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
    finish: str | None = None
    usage: Usage | None = None
    cost: float = 0.0
    error: MessageError | None = None
    excluded: bool = False
    version: int = 0
    parts: list[Part] = []


class Compaction(msgspec.Struct, kw_only=True):
    """One compaction request and what became of it."""

    request_message_id: str
    status: CompactionStatus = "requested"
    summary_message_ids: list[str] = []
    tail_start_id: str | None = None
    projection: CompactionProjection | None = None


class PinnedPrefix(msgspec.Struct, kw_only=True):
    """The request prefix in force and how far a successful step has carried it."""

    key: str
    profile: PrefixProfile
    advanced_to: str | None = None


class HistoryState(msgspec.Struct, kw_only=True):
    """Everything a session's events amount to. Its encoding is the projection snapshot."""

    session_id: str
    seq: int = 0
    started: SessionStarted | None = None
    messages: list[Message] = []
    part_tokens: dict[str, int] = {}
    compactions: dict[str, Compaction] = {}
    environment: dict[str, str] = {}
    memory: str | None = None
    prefix: PinnedPrefix | None = None
    last_request: RequestSent | None = None
    usage_reports: list[UsageReported] = []


TokenEstimator = Callable[[Part], int]

#: Events after which a view must be rebuilt rather than patched: they move messages in or
#: out of the view (a compaction request appears, completes or is rolled back; so does a
#: summary message, below).
_RESHAPING = (CompactionRequested, CompactionCompleted, CompactionRolledBack)

_snapshot_encoder = msgspec.msgpack.Encoder()
_snapshot_decoder = msgspec.msgpack.Decoder(HistoryState)


class History:
    """The projection of one session. Apply events in order; read ``messages``.

    Invariants kept by construction: messages and parts are in id order; a part's token
    estimate is computed once per part version; ``seq`` is the last applied event's seq.
    """

    __slots__ = ("_changes", "_estimate", "_messages", "_parts", "_structure", "index", "state")

    def __init__(self, session_id: str, *, estimate: TokenEstimator = estimate_part_tokens) -> None:
        self.state = HistoryState(session_id=session_id)
        self.index = SessionIndex(session_id)
        self._estimate = estimate
        self._messages: dict[str, Message] = {}
        self._parts: dict[str, tuple[Message, int]] = {}
        self._changes: list[str] = []
        self._structure = 0

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
        """Counts events that reshape views beyond single messages (compactions)."""
        return self._structure

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
        self.index.note(event)
        state = self.state
        if isinstance(event, _RESHAPING) or (isinstance(event, MessageAdded) and event.summary):
            self._structure += 1
        match event:
            case PartAdded(part=part):
                self._add_part(part)
            case ToolStateChanged():
                self._update_tool(
                    event.part_id, lambda p: msgspec.structs.replace(p, state=event.state)
                )
            case MessageAdded():
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
                if event.summary and event.parent_id in state.compactions:
                    state.compactions[event.parent_id].summary_message_ids.append(event.message_id)
            case AssistantFinished():
                message = self._messages[event.message_id]
                message.finish = event.finish
                message.usage = event.usage
                message.cost = event.cost
                message.error = event.error
                self._touch(message)
            case PartUpdated(part=part):
                self._replace_part(part)
            case ToolOutputCleared():
                for part_id in event.part_ids:
                    self._update_tool(
                        part_id,
                        lambda p: _with_output(
                            p, compacted_ms=event.time_ms, compacted_reason=event.reason
                        ),
                    )
            case ToolOutputTrimmed():
                self._update_tool(
                    event.part_id,
                    lambda p: _with_output(p, trimmed=(event.head_chars, event.tail_chars)),
                )
            case CompactionRequested():
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
                state.compactions[event.message_id] = Compaction(
                    request_message_id=event.message_id
                )
            case CompactionCompleted():
                compaction = state.compactions[event.request_message_id]
                compaction.status = "completed"
                compaction.tail_start_id = event.tail_start_id
                compaction.projection = event.projection
                request = self._messages[event.request_message_id]
                for part in request.parts:
                    if isinstance(part, CompactionPart):
                        self._replace_part(
                            msgspec.structs.replace(part, tail_start_id=event.tail_start_id)
                        )
            case CompactionRolledBack():
                compaction = state.compactions[event.request_message_id]
                compaction.status = "rolled_back"
                for message_id in (event.request_message_id, *compaction.summary_message_ids):
                    message = self._messages[message_id]
                    message.excluded = True
                    self._touch(message)
            case SessionStarted():
                state.started = event
            case EnvironmentCaptured():
                state.environment[event.user_message_id] = event.text
                self._touch(self._messages[event.user_message_id])
            case MemoryPinned():
                state.memory = event.text
            case PrefixPinned() | PrefixRotated():
                state.prefix = PinnedPrefix(key=event.key, profile=event.profile)
            case PrefixAdvanced():
                if state.prefix is not None:
                    state.prefix.advanced_to = event.message_id
            case RequestSent():
                state.last_request = event
            case UsageReported():
                state.usage_reports.append(event)

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
        self.state.part_tokens[part.id] = self._estimate(part)

    def _replace_part(self, part: Part) -> None:
        message, i = self._parts[part.id]
        message.parts[i] = part
        self._touch(message)
        self.state.part_tokens[part.id] = self._estimate(part)

    def _update_tool(self, part_id: str, change: Callable[[ToolPart], ToolPart]) -> None:
        message, i = self._parts[part_id]
        part = message.parts[i]
        assert isinstance(part, ToolPart)
        self._replace_part(change(part))

    # --- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The projection encoded; ``History.from_snapshot`` restores it."""
        return _snapshot_encoder.encode(self.state)

    @classmethod
    def from_snapshot(
        cls, data: bytes, *, estimate: TokenEstimator = estimate_part_tokens
    ) -> History:
        """Restore a projection saved by ``snapshot`` (same ``SNAPSHOT_SCHEMA``)."""
        state = _snapshot_decoder.decode(data)
        history = cls(state.session_id, estimate=estimate)
        history.state = state
        index = history.index
        index.started = state.started is not None
        index.memory_pinned = state.memory is not None
        index.prefix_key = state.prefix.key if state.prefix else None
        for message in state.messages:
            history._messages[message.id] = message
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
            for i, part in enumerate(message.parts):
                history._parts[part.id] = (message, i)
                index.note(PartAdded(session_id=state.session_id, part=part))
        for compaction in state.compactions.values():
            index.compactions[compaction.request_message_id] = compaction.status
        # Parts can be added to an older message later, so the last part noted is not always
        # the greatest; ids must keep increasing across the restore.
        index.last_part_id = max(history._parts, default="")
        for message_id in state.environment:
            index.environment[message_id] = None
        return history


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
