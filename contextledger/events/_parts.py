"""The message and part model: what a session's history is made of.

Parts follow the opencode / Kilo Code part model (text, reasoning, file, tool, step start and
finish, subtask, agent, retry, compaction). Parts are immutable values; a mutation (a tool
finishing, a prune, a soft trim, a compaction boundary) is an event that replaces the part with
an updated copy in the projection. Field names use the domain's words.

Every struct here and in the event catalogue is declared with ``gc=False`` (plain data that
never refers back to itself, so it cannot form reference cycles; a long log of them would
otherwise slow every garbage collection) and ``omit_defaults=True`` (fields at their default
are not written, so events are smaller and faster to encode and decode; a missing field reads
back as its default, which is why a released default must never change).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class ModelRef(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True):
    """Which provider and model produced or will receive a message."""

    provider_id: str
    model_id: str
    variant: str | None = None


class ToolSchema(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True):
    """A tool definition as advertised to the model with every request."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = {}


#: Which tools a request lets the model call: any it chooses, none, or at least one.
ToolChoice = Literal["auto", "none", "required"]


class Usage(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True):
    """Token usage of one model call as the provider reported it.

    ``input`` is the uncached input; the whole prompt is ``input + cache_read + cache_write``.
    """

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def prompt(self) -> int:
        """Every prompt token of the call, cached or not."""
        return self.input + self.cache_read + self.cache_write

    @property
    def total(self) -> int:
        """Kilo's full count: input + output + reasoning + cache read and write."""
        return self.prompt + self.output + self.reasoning


class PromptMeasure(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """The size of (part of) a prompt by kind of content: characters of text, of tool inputs
    and of tool outputs, the pieces a tokenizer's pre-split cuts each kind into (words,
    digit groups, punctuation runs, whitespace runs: ``policy._tokens.pieces``), tool calls and
    media items. Adds and subtracts field by field. The token counters turn it into tokens;
    usage reports carry it so calibration can learn. Measures recorded before pieces were
    counted have none (0)."""

    text_chars: int = 0
    input_chars: int = 0
    output_chars: int = 0
    tool_calls: int = 0
    media: int = 0
    text_pieces: int = 0
    input_pieces: int = 0
    output_pieces: int = 0

    @property
    def chars(self) -> int:
        """Every character, of every kind."""
        return self.text_chars + self.input_chars + self.output_chars

    @property
    def pieces(self) -> int:
        """Every piece, of every kind."""
        return self.text_pieces + self.input_pieces + self.output_pieces

    def __add__(self, other: PromptMeasure) -> PromptMeasure:
        return PromptMeasure(
            text_chars=self.text_chars + other.text_chars,
            input_chars=self.input_chars + other.input_chars,
            output_chars=self.output_chars + other.output_chars,
            tool_calls=self.tool_calls + other.tool_calls,
            media=self.media + other.media,
            text_pieces=self.text_pieces + other.text_pieces,
            input_pieces=self.input_pieces + other.input_pieces,
            output_pieces=self.output_pieces + other.output_pieces,
        )

    def __sub__(self, other: PromptMeasure) -> PromptMeasure:
        return PromptMeasure(
            text_chars=self.text_chars - other.text_chars,
            input_chars=self.input_chars - other.input_chars,
            output_chars=self.output_chars - other.output_chars,
            tool_calls=self.tool_calls - other.tool_calls,
            media=self.media - other.media,
            text_pieces=self.text_pieces - other.text_pieces,
            input_pieces=self.input_pieces - other.input_pieces,
            output_pieces=self.output_pieces - other.output_pieces,
        )


ErrorName = Literal[
    "AbortedError",
    "ContextOverflowError",
    "APIError",
    "AuthError",
    "OutputLengthError",
    "StructuredOutputError",
    "UnknownError",
]


class MessageError(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True):
    """Why an assistant message ended in error (opencode's named error union)."""

    name: ErrorName
    message: str = ""
    retryable: bool = False


def struct_tag(value: msgspec.Struct) -> str:
    """The tag a tagged-union Struct is encoded under (a part's kind, an event's type)."""
    return str(value.__struct_config__.tag)


# --- parts ---------------------------------------------------------------------------------


class PartBase(
    msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True, tag_field="kind"
):
    """Fields every part has: its own id and the message it belongs to."""

    id: str
    message_id: str


class TextPart(PartBase, tag="text", frozen=True):
    """Text. ``synthetic`` text was written by the system but is sent; ``ignored`` never is."""

    text: str
    synthetic: bool = False
    ignored: bool = False
    metadata: dict[str, Any] = {}


class ReasoningPart(PartBase, tag="reasoning", frozen=True):
    """Model reasoning; ``metadata`` carries provider signatures (e.g. ``anthropic.signature``)."""

    text: str
    metadata: dict[str, Any] = {}


class FilePart(PartBase, tag="file", frozen=True):
    """A file or media attachment: a ``data:`` URL or a link, with its MIME type."""

    mime: str
    url: str
    filename: str | None = None
    source_path: str | None = None


class ToolPending(
    msgspec.Struct,
    frozen=True,
    gc=False,
    omit_defaults=True,
    kw_only=True,
    tag_field="status",
    tag="pending",
):
    """The model asked for the call; it has not started."""

    input: dict[str, Any] = {}
    raw: str = ""


class ToolRunning(
    msgspec.Struct,
    frozen=True,
    gc=False,
    omit_defaults=True,
    kw_only=True,
    tag_field="status",
    tag="running",
):
    """The call is executing."""

    input: dict[str, Any] = {}
    title: str = ""
    metadata: dict[str, Any] = {}
    started_ms: int = 0


class ToolCompleted(
    msgspec.Struct,
    frozen=True,
    gc=False,
    omit_defaults=True,
    kw_only=True,
    tag_field="status",
    tag="completed",
):
    """The call returned ``output``.

    ``compacted_ms`` is set by a prune (the output is then sent as a placeholder, never lost);
    ``trimmed`` by a soft trim (only the head and tail characters are sent).
    """

    input: dict[str, Any] = {}
    output: str = ""
    title: str = ""
    metadata: dict[str, Any] = {}
    started_ms: int = 0
    ended_ms: int = 0
    attachments: tuple[FilePart, ...] = ()
    compacted_ms: int | None = None
    compacted_reason: str | None = None
    trimmed: tuple[int, int] | None = None


class ToolErrored(
    msgspec.Struct,
    frozen=True,
    gc=False,
    omit_defaults=True,
    kw_only=True,
    tag_field="status",
    tag="error",
):
    """The call failed. ``interrupted`` with ``partial_output`` means it was cut off mid-way."""

    input: dict[str, Any] = {}
    error: str = ""
    metadata: dict[str, Any] = {}
    interrupted: bool = False
    partial_output: str | None = None
    synthetic: bool = False
    started_ms: int = 0
    ended_ms: int = 0


ToolState = ToolPending | ToolRunning | ToolCompleted | ToolErrored


class ToolPart(PartBase, tag="tool", frozen=True):
    """A tool call and, once it has one, its result. ``call_id`` is the provider's call id;
    ``metadata`` carries the provider's call metadata, sent back only to the same model."""

    call_id: str
    tool: str
    state: ToolState
    provider_executed: bool = False
    metadata: dict[str, Any] = {}


class StepStartPart(PartBase, tag="step-start", frozen=True):
    """A model-call boundary inside one assistant message."""

    snapshot: str | None = None


class StepFinishPart(PartBase, tag="step-finish", frozen=True):
    """The end of one model call inside an assistant message, with its usage."""

    reason: str
    usage: Usage = Usage()
    cost: float = 0.0


class SubtaskPart(PartBase, tag="subtask", frozen=True):
    """A subtask run by another agent (opencode's ``subtask`` part)."""

    prompt: str
    description: str = ""
    agent: str = ""
    model: ModelRef | None = None
    command: str | None = None
    child_session_id: str | None = None


class AgentPart(PartBase, tag="agent", frozen=True):
    """A switch to another agent."""

    name: str


class RetryPart(PartBase, tag="retry", frozen=True):
    """A retried model call and the error that caused it."""

    attempt: int
    error: str


CompactionTrigger = Literal["auto", "manual", "overflow"]


class CompactionPart(PartBase, tag="compaction", frozen=True):
    """A compaction request on a user message.

    ``auto`` says whether the session continues by itself afterwards; ``overflow`` whether the
    provider's context-overflow error caused it (the triggering message is replayed after);
    ``tail_start_id`` is the first message of the verbatim tail kept after the summary, set
    when the compaction completes.
    """

    auto: bool
    overflow: bool = False
    trigger: CompactionTrigger = "auto"
    tail_start_id: str | None = None


Part = (
    TextPart
    | ReasoningPart
    | FilePart
    | ToolPart
    | StepStartPart
    | StepFinishPart
    | SubtaskPart
    | AgentPart
    | RetryPart
    | CompactionPart
)

#: MIME types that count as media (stripped or replaced by placeholders in views).
MEDIA_PREFIXES = ("image/", "audio/", "video/")
MEDIA_TYPES = frozenset({"application/pdf"})


def is_media(mime: str) -> bool:
    """Return True for images, audio, video and PDF."""
    return mime.startswith(MEDIA_PREFIXES) or mime in MEDIA_TYPES
