"""What may be appended to a session: the facts each event relies on, checked before writing.

``SessionIndex`` keeps the few facts validation needs (which messages and parts exist, each
tool call's status, the last ids, open compactions). ``validate_events`` checks a whole batch
against an overlay of the index, so that later events of the batch may rely on earlier ones,
and nothing in the index changes unless the batch is applied.
"""

from __future__ import annotations

import math
from collections import ChainMap
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any, Literal, Protocol

import msgspec

from contextledger.events._catalogue import (
    AssistantFinished,
    CompactionCompleted,
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
    PrefixRotated,
    RequestSent,
    SessionStarted,
    ToolOutputCleared,
    ToolOutputTrimmed,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._errors import InvalidEvent
from contextledger.events._ids import is_id
from contextledger.events._parts import (
    CompactionPart,
    Part,
    ReasoningPart,
    StepFinishPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    ToolRunning,
    Usage,
    struct_tag,
)

ToolStatus = Literal["pending", "running", "completed", "error", "cleared"]
CompactionStatus = Literal["requested", "completed", "rolled_back"]
#: The part kinds ``PartsStripped`` may name.
_STRIPPABLE: frozenset[str] = frozenset({"file", "reasoning"})

#: Which tool statuses may follow which. Completed, error and cleared are terminal.
_NEXT_STATUS: dict[str, frozenset[str]] = {
    "pending": frozenset({"running", "completed", "error"}),
    "running": frozenset({"completed", "error"}),
}


class _MessageFacts(msgspec.Struct, gc=False):
    role: str
    parent_id: str | None
    summary: bool
    agent_id: str
    #: An assistant message's finish reason, once it has finished.
    finish: str | None = None


class _PartFacts(msgspec.Struct, gc=False):
    message_id: str
    kind: str
    status: ToolStatus | None


class _MessageLike(Protocol):
    @property
    def role(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def summary(self) -> bool: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def finish(self) -> str | None: ...


def message_facts(message: _MessageLike) -> _MessageFacts:
    """What validation knows of a projected message."""
    finish = message.finish if message.role == "assistant" else None
    return _MessageFacts(message.role, message.parent_id, message.summary, message.agent_id, finish)


def part_facts(part: Part) -> _PartFacts:
    """What validation knows of a projected part (its current version)."""
    status = _added_status(part) if isinstance(part, ToolPart) else None
    return _PartFacts(part.message_id, _KINDS[type(part)], status)


class SessionIndex:
    """The facts about one session that decide whether an event may follow."""

    __slots__ = (
        "calls",
        "compactions",
        "environment",
        "instructions",
        "last_message_id",
        "last_part_id",
        "memory_pinned",
        "messages",
        "parts",
        "prefix_keys",
        "session_id",
        "started",
        "stripped",
    )

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.started = False
        self.last_message_id = ""
        self.last_part_id = ""
        self.memory_pinned = False
        #: The pinned prefix's key, by agent (each agent's requests have their own prefix).
        self.prefix_keys: MutableMapping[str, str] = {}
        self.messages: MutableMapping[str, _MessageFacts] = {}
        self.parts: MutableMapping[str, _PartFacts] = {}
        self.calls: MutableMapping[str, str] = {}
        self.compactions: MutableMapping[str, CompactionStatus] = {}
        self.environment: MutableMapping[str, None] = {}
        self.instructions: MutableMapping[tuple[str, str | None], None] = {}
        self.stripped: MutableMapping[str, None] = {}

    def overlay(self) -> SessionIndex:
        """A copy whose changes do not reach this index (maps are layered, not copied).

        Facts objects are copied on write by ``note``, so the base is never mutated.
        """
        copy = SessionIndex(self.session_id)
        copy.started = self.started
        copy.last_message_id = self.last_message_id
        copy.last_part_id = self.last_part_id
        copy.memory_pinned = self.memory_pinned
        copy.prefix_keys = ChainMap({}, self.prefix_keys)
        copy.messages = ChainMap({}, self.messages)
        copy.parts = ChainMap({}, self.parts)
        copy.calls = ChainMap({}, self.calls)
        copy.compactions = ChainMap({}, self.compactions)
        copy.environment = ChainMap({}, self.environment)
        copy.instructions = ChainMap({}, self.instructions)
        copy.stripped = ChainMap({}, self.stripped)
        return copy

    def facts(self) -> tuple[object, ...]:
        """Everything this index knows, comparable: two indexes with equal facts accept and
        reject exactly the same events."""
        return (
            self.session_id,
            self.started,
            self.last_message_id,
            self.last_part_id,
            self.memory_pinned,
            dict(self.prefix_keys),
            {
                k: (m.role, m.parent_id, m.summary, m.agent_id, m.finish)
                for k, m in self.messages.items()
            },
            {k: (p.message_id, p.kind, p.status) for k, p in self.parts.items()},
            dict(self.calls),
            dict(self.compactions),
            set(self.environment),
            set(self.instructions),
            set(self.stripped),
        )

    # --- checking -------------------------------------------------------------------------

    def check(self, event: Event) -> str | None:
        """Return why ``event`` may not follow the events indexed so far, or None if it may."""
        if event.session_id != self.session_id:
            return f"belongs to session {event.session_id!r}, not {self.session_id!r}"
        if isinstance(event, SessionStarted):
            return "the session has started already" if self.started else None
        if not self.started:
            return "the session has not started (its first event must be session.started)"
        match event:
            case MessageAdded():
                return self._check_new_message(event.message_id, event.parent_id) or (
                    self._check_answer(event) if event.role == "assistant" else None
                )
            case CompactionRequested():
                return self._check_new_message(event.message_id, event.parent_id) or (
                    self._check_new_part(event.part_id)
                )
            case PartAdded(part=part):
                if isinstance(part, CompactionPart):
                    return "compaction parts are added by compaction.requested"
                message = self.messages.get(part.message_id)
                if message is None:
                    return f"message {part.message_id!r} does not exist"
                if message.finish is not None and not _late_call(part, message.finish):
                    return f"message {part.message_id!r} has finished"
                if isinstance(part, ToolPart):
                    if message.role != "assistant":
                        return "tool calls belong to assistant messages"
                    if not part.call_id or not part.tool:
                        return "a tool call needs a call id and a tool name"
                    if part.call_id in self.calls:
                        return f"tool call id {part.call_id!r} is used already"
                if isinstance(part, StepFinishPart):
                    reason = _bad_accounting(part.usage, part.cost)
                    if reason:
                        return reason
                return self._check_new_part(part.id)
            case PartUpdated(part=part):
                facts = self.parts.get(part.id)
                if facts is None:
                    return f"part {part.id!r} does not exist"
                if facts.kind != struct_tag(part) or facts.message_id != part.message_id:
                    return f"part {part.id!r} cannot change its kind or message"
                if facts.kind in ("tool", "compaction"):
                    return f"{facts.kind} parts change through their own events"
                if isinstance(part, StepFinishPart):
                    return _bad_accounting(part.usage, part.cost)
                return None
            case ToolStateChanged():
                return self._check_tool_transition(event)
            case AssistantFinished():
                message = self.messages.get(event.message_id)
                if message is None or message.role != "assistant":
                    return f"assistant message {event.message_id!r} does not exist"
                if message.finish is not None:
                    return f"message {event.message_id!r} finished already"
                return _bad_accounting(event.usage, event.cost)
            case ToolOutputCleared():
                if not event.part_ids:
                    return "no part ids"
                for part_id in event.part_ids:
                    reason = self._check_completed_tool(part_id)
                    if reason:
                        return reason
                if len(set(event.part_ids)) != len(event.part_ids):
                    return "a part id is listed twice"
                return None
            case ToolOutputTrimmed():
                if event.head_chars < 0 or event.tail_chars < 0:
                    return "head_chars and tail_chars must not be negative"
                return self._check_completed_tool(event.part_id)
            case PartsStripped():
                return self._check_stripped(event)
            case CompactionCompleted():
                return self._check_compaction_completed(event)
            case CompactionRolledBack():
                status = self.compactions.get(event.request_message_id)
                if status != "requested":
                    return f"no open compaction request {event.request_message_id!r}"
                return None
            case EnvironmentCaptured():
                message = self.messages.get(event.user_message_id)
                if message is None or message.role != "user":
                    return f"user message {event.user_message_id!r} does not exist"
                if event.user_message_id in self.environment:
                    return f"the environment of {event.user_message_id!r} is captured already"
                return None
            case MemoryPinned():
                return "memory is pinned once per session" if self.memory_pinned else None
            case InstructionLoaded():
                return self._check_instruction(event)
            case PrefixPinned():
                return None
            case PrefixRotated():
                pinned = event.agent_id in self.prefix_keys
                return None if pinned else "no prefix is pinned to rotate"
            case PrefixAdvanced():
                if event.key != self.prefix_keys.get(event.agent_id):
                    return f"prefix {event.key!r} is not the pinned one"
                if event.message_id not in self.messages:
                    return f"message {event.message_id!r} does not exist"
                return None
            case UsageReported():
                if event.message_id not in self.messages:
                    return f"message {event.message_id!r} does not exist"
                return "usage counts must not be negative" if _negative(event.usage) else None
            case RequestSent() | InputLeftOut():
                return None
        return f"unknown event {type(event).__name__}"

    def _check_new_message(self, message_id: str, parent_id: str | None) -> str | None:
        if not is_id(message_id):
            return f"message id {message_id!r} is not a monotonic id (see events.ids)"
        if message_id <= self.last_message_id:
            return f"message id {message_id!r} does not follow {self.last_message_id!r}"
        if parent_id is not None and parent_id not in self.messages:
            return f"parent message {parent_id!r} does not exist"
        return None

    def _check_answer(self, event: MessageAdded) -> str | None:
        """An assistant message answers a user message (a compaction request included) of
        its own agent."""
        if event.parent_id is None:
            return None
        parent = self.messages[event.parent_id]
        if parent.role != "user":
            return f"an assistant message answers a user message, not {event.parent_id!r}"
        if parent.agent_id != event.agent_id:
            return f"parent message {event.parent_id!r} belongs to agent {parent.agent_id!r}"
        return None

    def _check_new_part(self, part_id: str) -> str | None:
        if not is_id(part_id):
            return f"part id {part_id!r} is not a monotonic id (see events.ids)"
        if part_id <= self.last_part_id:
            return f"part id {part_id!r} does not follow {self.last_part_id!r}"
        return None

    def _check_tool_transition(self, event: ToolStateChanged) -> str | None:
        facts = self.parts.get(event.part_id)
        if facts is None or facts.kind != "tool":
            return f"tool call {event.part_id!r} does not exist"
        if facts.message_id != event.message_id:
            return f"tool call {event.part_id!r} belongs to message {facts.message_id!r}"
        new = struct_tag(event.state)
        allowed = _NEXT_STATUS.get(facts.status or "", frozenset())
        if new not in allowed:
            return f"tool call {event.part_id!r} cannot go from {facts.status} to {new}"
        return None

    def _check_completed_tool(self, part_id: str) -> str | None:
        facts = self.parts.get(part_id)
        if facts is None or facts.kind != "tool":
            return f"tool call {part_id!r} does not exist"
        if facts.status == "cleared":
            return f"tool output {part_id!r} is cleared already"
        if facts.status != "completed":
            return f"tool call {part_id!r} has no output ({facts.status})"
        return None

    def _check_stripped(self, event: PartsStripped) -> str | None:
        if not event.part_ids:
            return "no part ids"
        if len(set(event.part_ids)) != len(event.part_ids):
            return "a part id is listed twice"
        for part_id in event.part_ids:
            facts = self.parts.get(part_id)
            if facts is None:
                return f"part {part_id!r} does not exist"
            if facts.kind not in _STRIPPABLE:
                return f"part {part_id!r} is a {facts.kind} part, not a file or reasoning part"
            if part_id in self.stripped:
                return f"part {part_id!r} is stripped already"
        return None

    def _check_instruction(self, event: InstructionLoaded) -> str | None:
        if not event.path:
            return "an instruction needs the path it was read from"
        if (event.source == "directory") != (event.message_id is not None):
            return "directory rules, and only they, name the assistant message that loaded them"
        if event.message_id is not None:
            message = self.messages.get(event.message_id)
            if message is None or message.role != "assistant":
                return f"assistant message {event.message_id!r} does not exist"
        if (event.path, event.message_id) in self.instructions:
            where = f" for {event.message_id!r}" if event.message_id else ""
            return f"instructions from {event.path!r} are loaded already{where}"
        return None

    def _check_compaction_completed(self, event: CompactionCompleted) -> str | None:
        if self.compactions.get(event.request_message_id) != "requested":
            return f"no open compaction request {event.request_message_id!r}"
        summary = self.messages.get(event.summary_message_id)
        if summary is None or summary.role != "assistant" or not summary.summary:
            return f"summary message {event.summary_message_id!r} does not exist"
        if summary.finish is None:
            return f"summary message {event.summary_message_id!r} has not finished"
        if summary.parent_id != event.request_message_id:
            return f"summary {event.summary_message_id!r} does not answer the request"
        tail = event.tail_start_id
        if tail is not None and (tail not in self.messages or tail >= event.request_message_id):
            return f"tail start {tail!r} is not a message before the request"
        if tail is not None and (tail in self.compactions or self.messages[tail].summary):
            return f"tail start {tail!r} is a compaction request or summary, not a turn"
        return None

    # --- noting ---------------------------------------------------------------------------

    def note(self, event: Event) -> None:
        """Record the facts ``event`` establishes (call after ``check`` passed)."""
        noter = NOTERS.get(type(event))
        if noter is not None:
            noter(self, event)

    def _set_status(self, part_id: str, status: ToolStatus) -> None:
        old = self.parts[part_id]
        self.parts[part_id] = _PartFacts(old.message_id, old.kind, status)


# --- what each event establishes (dispatched on the event's type: this runs on every apply) ---


#: The kind tag of each part type, looked up rather than read off the struct config.
_KINDS: dict[type, str] = {t: str(t.__struct_config__.tag) for t in Part.__args__}


def _note_part_added(index: SessionIndex, event: PartAdded) -> None:
    part = event.part
    status: ToolStatus | None = None
    if isinstance(part, ToolPart):
        status = _added_status(part)
        index.calls[part.call_id] = part.id
    index.parts[part.id] = _PartFacts(part.message_id, _KINDS[type(part)], status)
    index.last_part_id = part.id


def _note_tool_state(index: SessionIndex, event: ToolStateChanged) -> None:
    index._set_status(event.part_id, _status_of(event.state))


def _note_message(index: SessionIndex, event: MessageAdded) -> None:
    index.messages[event.message_id] = _MessageFacts(
        event.role, event.parent_id, event.summary, event.agent_id
    )
    index.last_message_id = event.message_id


def _note_finished(index: SessionIndex, event: AssistantFinished) -> None:
    old = index.messages[event.message_id]
    new = _MessageFacts(old.role, old.parent_id, old.summary, old.agent_id, event.finish)
    index.messages[event.message_id] = new


def _note_cleared(index: SessionIndex, event: ToolOutputCleared) -> None:
    for part_id in event.part_ids:
        index._set_status(part_id, "cleared")


def _note_stripped(index: SessionIndex, event: PartsStripped) -> None:
    for part_id in event.part_ids:
        index.stripped[part_id] = None


def _note_compaction_requested(index: SessionIndex, event: CompactionRequested) -> None:
    index.messages[event.message_id] = _MessageFacts("user", event.parent_id, False, event.agent_id)
    index.last_message_id = event.message_id
    index.parts[event.part_id] = _PartFacts(event.message_id, "compaction", None)
    index.last_part_id = event.part_id
    index.compactions[event.message_id] = "requested"


def _note_started(index: SessionIndex, event: SessionStarted) -> None:
    index.started = True


def _note_completed(index: SessionIndex, event: CompactionCompleted) -> None:
    index.compactions[event.request_message_id] = "completed"


def _note_rolled_back(index: SessionIndex, event: CompactionRolledBack) -> None:
    index.compactions[event.request_message_id] = "rolled_back"


def _note_instruction(index: SessionIndex, event: InstructionLoaded) -> None:
    index.instructions[(event.path, event.message_id)] = None


def _note_memory(index: SessionIndex, event: MemoryPinned) -> None:
    index.memory_pinned = True


def _note_environment(index: SessionIndex, event: EnvironmentCaptured) -> None:
    index.environment[event.user_message_id] = None


def _note_prefix(index: SessionIndex, event: PrefixPinned | PrefixRotated) -> None:
    index.prefix_keys[event.agent_id] = event.key


#: What each event type establishes, by type (``History`` calls these directly when applying).
NOTERS: dict[type, Callable[[SessionIndex, Any], None]] = {
    PartAdded: _note_part_added,
    ToolStateChanged: _note_tool_state,
    MessageAdded: _note_message,
    AssistantFinished: _note_finished,
    ToolOutputCleared: _note_cleared,
    PartsStripped: _note_stripped,
    CompactionRequested: _note_compaction_requested,
    SessionStarted: _note_started,
    CompactionCompleted: _note_completed,
    CompactionRolledBack: _note_rolled_back,
    MemoryPinned: _note_memory,
    InstructionLoaded: _note_instruction,
    EnvironmentCaptured: _note_environment,
    PrefixPinned: _note_prefix,
    PrefixRotated: _note_prefix,
}


def _late_call(part: Part, finish: str) -> bool:
    """Whether ``part`` may still be added to a message that finished with ``finish``: only a
    later block (a tool call, a text, a reasoning) of a message that ended by calling tools.
    Claude Code writes a response's blocks as records of their own, its ``tool_use`` blocks
    each followed by its result, so its importer adds a response's later blocks after the
    step finished. The recorder, which a running agent writes through, refuses them."""
    return finish == "tool-calls" and isinstance(part, ToolPart | TextPart | ReasoningPart)


def _negative(usage: Usage) -> bool:
    return min(usage.input, usage.output, usage.reasoning, usage.cache_read, usage.cache_write) < 0


def _bad_accounting(usage: Usage, cost: float) -> str | None:
    """Why a step's usage and cost cannot be stored, or None: counts are never negative, and a
    cost is a finite amount, never negative (NaN would poison every sum it enters)."""
    if _negative(usage):
        return "usage counts must not be negative"
    if not math.isfinite(cost) or cost < 0:
        return f"cost must be a finite amount, not negative (got {cost!r})"
    return None


def _added_status(part: ToolPart) -> ToolStatus:
    state = part.state
    if isinstance(state, ToolCompleted) and state.compacted_ms is not None:
        return "cleared"
    return "running" if isinstance(state, ToolRunning) else struct_tag(state)  # type: ignore[return-value]


def _status_of(state: ToolRunning | ToolCompleted | ToolErrored) -> ToolStatus:
    if isinstance(state, ToolRunning):
        return "running"
    return "completed" if isinstance(state, ToolCompleted) else "error"


def validate_events(index: SessionIndex, events: Iterable[Event]) -> None:
    """Raise ``InvalidEvent`` for the first event of ``events`` that may not follow the
    session indexed by ``index`` and the batch's earlier events. ``index`` is not changed."""
    scratch = index.overlay()
    for i, event in enumerate(events):
        reason = scratch.check(event)
        if reason is not None:
            raise InvalidEvent(i, struct_tag(event), reason)
        scratch.note(event)
