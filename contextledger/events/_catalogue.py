"""The event catalogue: every fact a session's log can hold.

Each event is a frozen msgspec Struct in one tagged union (``Event``), named in the past
tense. ``VERSION`` is the event type's schema version; the store records it beside each
event, and events stored under an older version are upcast on read (``events._upcasting``).
Never change the meaning of a released version: add a version and an upcaster.

The store wraps each event in a ``RecordedEvent`` with its stream, per-stream ``seq`` and
global ``position``; the event itself carries the session, the agent slice and the time.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec

from contextledger.events._parts import (
    CompactionTrigger,
    MessageError,
    ModelRef,
    Part,
    PromptMeasure,
    ToolChoice,
    ToolCompleted,
    ToolErrored,
    ToolRunning,
    ToolSchema,
    Usage,
)

MAIN_AGENT = "main"


class EventBase(
    msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True, tag_field="type"
):
    """Fields every event has. ``time_ms`` is wall time captured by the shell, never read
    inside the core."""

    VERSION: ClassVar[int] = 1

    session_id: str
    agent_id: str = MAIN_AGENT
    time_ms: int = 0

    @property
    def v(self) -> int:
        """The schema version of this event type."""
        return self.VERSION


class SessionStarted(EventBase, tag="session.started", frozen=True):
    """A session began. ``parent_session_id`` links a subtask's child session."""

    title: str = ""
    model: ModelRef | None = None
    agent: str = MAIN_AGENT
    parent_session_id: str | None = None
    config: dict[str, Any] = {}


Role = Literal["user", "assistant"]


class MessageAdded(EventBase, tag="message.added", frozen=True):
    """A message was created. ``summary`` marks an assistant message that is a compaction
    summary; ``synthetic`` a message written by the runtime rather than a person or model."""

    message_id: str
    role: Role
    parent_id: str | None = None
    agent: str = MAIN_AGENT
    model: ModelRef | None = None
    summary: bool = False
    synthetic: bool = False


class PartAdded(EventBase, tag="part.added", frozen=True):
    """A part was added to a message. A tool part added here is the model's call."""

    part: Part


class PartUpdated(EventBase, tag="part.updated", frozen=True):
    """A text or reasoning part was replaced by its final content (after streaming)."""

    part: Part


class ToolStateChanged(EventBase, tag="tool.state_changed", frozen=True):
    """A tool call started, completed or failed. Completed and errored are terminal."""

    message_id: str
    part_id: str
    state: ToolRunning | ToolCompleted | ToolErrored


class AssistantFinished(EventBase, tag="assistant.finished", frozen=True):
    """An assistant message ended: why, with what usage, and the error if any."""

    message_id: str
    finish: str
    usage: Usage = Usage()
    cost: float = 0.0
    error: MessageError | None = None


PruneReason = Literal["normal", "payload-limit", "post-compaction", "pressure", "cost"]


class ToolOutputCleared(EventBase, tag="tool.output_cleared", frozen=True):
    """A prune: these tool outputs are sent as a placeholder from now on. The output itself
    stays in the log and can be paged back."""

    part_ids: tuple[str, ...]
    reason: PruneReason


class ToolOutputTrimmed(EventBase, tag="tool.output_trimmed", frozen=True):
    """A soft trim: only the first ``head_chars`` and last ``tail_chars`` of the output are
    sent, with a marker between them."""

    part_id: str
    head_chars: int
    tail_chars: int


class PartsStripped(EventBase, tag="parts.stripped", frozen=True):
    """Old media and reasoning leave the view: a stripped file part is sent as a short
    placeholder, a stripped reasoning part not at all. The parts stay in the log."""

    part_ids: tuple[str, ...]
    reason: PruneReason


class CompactionRequested(EventBase, tag="compaction.requested", frozen=True):
    """A compaction was asked for: creates the user message ``message_id`` holding one
    compaction part ``part_id``. One event, so a request is never half-visible."""

    message_id: str
    part_id: str
    auto: bool
    overflow: bool = False
    trigger: CompactionTrigger = "auto"
    parent_id: str | None = None


class FileRange(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True):
    """A file the session read or wrote, with the line ranges touched."""

    path: str
    action: Literal["read", "write"]
    ranges: tuple[tuple[int, int], ...] = ()


class CompactionProjection(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True):
    """What a compaction decided: the summary text, the files to remember, and the range of
    messages the summary replaces (``head_first_id`` .. ``head_last_id``)."""

    summary: str
    head_first_id: str | None = None
    head_last_id: str | None = None
    file_manifest: tuple[FileRange, ...] = ()
    template: str = "opencode"


class CompactionCompleted(EventBase, tag="compaction.completed", frozen=True):
    """A compaction succeeded: ``summary_message_id`` answers ``request_message_id`` and the
    verbatim tail starts at ``tail_start_id`` (None: nothing before the request is kept)."""

    request_message_id: str
    summary_message_id: str
    tail_start_id: str | None
    projection: CompactionProjection


RollbackReason = Literal["overflow", "empty", "repetitive", "cancelled", "error"]


class CompactionRolledBack(EventBase, tag="compaction.rolled_back", frozen=True):
    """A compaction attempt failed and is undone: its request and any summary written for it
    leave every view, which is then exactly what it was before the request."""

    request_message_id: str
    reason: RollbackReason
    detail: str = ""


class EnvironmentCaptured(EventBase, tag="environment.captured", frozen=True):
    """The per-turn environment block computed once for a user message."""

    user_message_id: str
    text: str


class MemoryPinned(EventBase, tag="memory.pinned", frozen=True):
    """The session's memory block, pinned once so the prefix stays byte-stable."""

    text: str


InstructionSource = Literal["project", "global", "config", "directory"]


class InstructionLoaded(EventBase, tag="instruction.loaded", frozen=True):
    """An instruction file read once and captured, so every request and every replay uses
    the same bytes. ``project``, ``global`` and ``config`` files go into the system prompt;
    ``directory`` rules were loaded while assistant message ``message_id`` read a file under
    their directory (once per assistant message)."""

    path: str
    text: str
    source: InstructionSource
    message_id: str | None = None


class PrefixProfile(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True):
    """What a request prefix depends on; its SHA-256 over sorted-key JSON is the prefix key."""

    provider_id: str
    model_id: str
    agent: str
    system_mode: str
    system: tuple[str, ...]
    tools: tuple[str, ...]
    permissions: dict[str, Any] = {}


class PrefixPinned(EventBase, tag="prefix.pinned", frozen=True):
    """A request prefix was pinned: requests use its system text and tool order.

    Version 2 adds ``tool_table``: the tool definitions as pinned, in order, so a tool that
    is gone for a while keeps its slot and its bytes (empty in version 1 events: the
    definitions were not recorded)."""

    VERSION: ClassVar[int] = 2

    key: str
    profile: PrefixProfile
    tool_table: tuple[ToolSchema, ...] = ()


class PrefixRotated(EventBase, tag="prefix.rotated", frozen=True):
    """The pinned prefix was replaced (the tool table changed, or the model did). Version 2
    adds ``tool_table``, as in ``PrefixPinned``."""

    VERSION: ClassVar[int] = 2

    key: str
    profile: PrefixProfile
    reason: str
    tool_table: tuple[ToolSchema, ...] = ()


class PrefixAdvanced(EventBase, tag="prefix.advanced", frozen=True):
    """A step succeeded with the pinned prefix; the prefix now covers up to ``message_id``."""

    key: str
    message_id: str


class RequestSent(EventBase, tag="request.sent", frozen=True):
    """A provider request was built and sent: what it hashed to and where breakpoints were.
    Version 2 adds ``measure``, the ``PromptMeasure`` of the prompt (None in version 1
    events), which the ``UsageReported`` of its answer carries for calibration. Version 3
    adds ``tool_choice``, the request's tool choice as sent (None: unset, and in older
    events: not recorded), which a summary request repeats to keep the prompt cache."""

    VERSION: ClassVar[int] = 3

    provider_id: str
    model_id: str
    prefix_hash: str
    body_hash: str
    body_bytes: int
    estimated_tokens: int
    breakpoints: tuple[int, ...] = ()
    last_message_id: str | None = None
    measure: PromptMeasure | None = None
    tool_choice: ToolChoice | None = None


class UsageReported(EventBase, tag="usage.reported", frozen=True):
    """A provider reported usage for a call. With ``measure`` (the size of the prompt it
    answers) and ``model``, token counting calibrates itself from these reports."""

    message_id: str
    usage: Usage
    estimated_tokens: int = 0
    measure: PromptMeasure | None = None
    model: ModelRef | None = None


class LeftOut(msgspec.Struct, frozen=True, kw_only=True):
    """Something in an imported transcript that became no event: where it is (the 1-based
    ``line`` of a JSON-lines or text file, the message's position in a JSON document's list; 0
    for the file as a whole), the ``field`` inside it (a JSON path, empty for the whole
    record), what it is (``kind``: a record type, a block type, …) and why it was left out."""

    line: int
    kind: str
    reason: str
    field: str = ""


class InputLeftOut(EventBase, tag="input.left_out", frozen=True):
    """An import of ``source`` left ``items`` out of this session (each with its line, field,
    kind and reason), so the loss stays in the log beside what was imported."""

    source: str
    items: tuple[LeftOut, ...]


Event = (
    SessionStarted
    | MessageAdded
    | PartAdded
    | PartUpdated
    | ToolStateChanged
    | AssistantFinished
    | ToolOutputCleared
    | ToolOutputTrimmed
    | PartsStripped
    | CompactionRequested
    | CompactionCompleted
    | CompactionRolledBack
    | EnvironmentCaptured
    | MemoryPinned
    | InstructionLoaded
    | PrefixPinned
    | PrefixRotated
    | PrefixAdvanced
    | RequestSent
    | UsageReported
    | InputLeftOut
)

EVENT_TYPES: tuple[type[EventBase], ...] = (
    SessionStarted,
    MessageAdded,
    PartAdded,
    PartUpdated,
    ToolStateChanged,
    AssistantFinished,
    ToolOutputCleared,
    ToolOutputTrimmed,
    PartsStripped,
    CompactionRequested,
    CompactionCompleted,
    CompactionRolledBack,
    EnvironmentCaptured,
    MemoryPinned,
    InstructionLoaded,
    PrefixPinned,
    PrefixRotated,
    PrefixAdvanced,
    RequestSent,
    UsageReported,
    InputLeftOut,
)


def event_tag(event_type: type[EventBase]) -> str:
    """The tag under which ``event_type`` is stored (e.g. ``"message.added"``)."""
    tag = msgspec.inspect.type_info(event_type)
    assert isinstance(tag, msgspec.inspect.StructType)
    return str(tag.tag)


class RecordedEvent(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """An event as stored: its stream, per-stream ``seq`` (from 1) and global ``position``."""

    stream: str
    seq: int
    position: int
    event: Event
