"""Claude Code session transcripts (``~/.claude/projects/<slug>/<sessionId>.jsonl``) into events.

``import_claude_code(path)`` reads the file; everything else is the pure
``import_claude_code_lines``: JSON lines in, an ``ImportedSession`` out, whose events pass
``validate_events``. The rules, one per record kind:

- ``assistant``: one API response is written as several lines (one per content block) sharing
  ``message.id``; they become ONE assistant message: a step-start part, the blocks' text,
  reasoning (``thinking``) and tool parts (``tool_use``, pending, ``call_id`` the original
  ``toolu_…`` id), a step-finish part with the usage, ``AssistantFinished`` and one
  ``UsageReported``. The usage, repeated on every line, is counted once: field by field the
  largest value seen (the prompt fields repeat; ``output_tokens`` grows as the response streams,
  so the largest is the final figure). A response is finished by the next user record, the
  next response or a notice that the turn is over; at the end of the file only when it is
  complete (a ``stop_reason`` that ends the turn, or a sub-agent's spawning call answered):
  otherwise it stays open (its API call is counted, with the usage read so far), as the
  transcript may be read while a response is written, and the grown transcript's import
  finishes it (``_Thread.end``).
- ``user``: each ``tool_result`` block completes (or, with ``is_error``, fails) the tool part
  whose ``call_id`` is its ``tool_use_id``; text blocks are joined with ``"\\n"``, images become
  attachments. Text (a string ``content`` or text blocks) and images become one user message;
  ``isMeta`` records (notes the CLI writes into the conversation: a slash command's expanded
  text, a skill's instructions, the local-command caveat) are marked synthetic, and the answer
  that follows still replies to the user's last prompt.
- ``attachment`` (Claude Code 2.1: context the CLI adds itself, sent to the model as user
  content): a user message of one synthetic text part, the content the attachment carries
  under a line naming its kind (``_claude_code_attachments``); a prompt the user typed while
  the model worked (``queued_command``) is the user's own message. The answer that follows
  still replies to the last prompt. Kinds never sent, or sent as fixed wording the transcript
  does not hold, are left out with the reason.
- ``summary``: skipped and counted. Claude Code writes them as the resume picker's title of a
  conversation leaf (``leafUuid``); they are never sent to the model, so they are no part of
  the history. Their texts are kept in ``ImportedSession.summaries``.
- ``system`` (CLI notices such as a model fallback) and every unknown type: skipped, counted.
- ``isSidechain`` records (a ``Task`` sub-agent's thread) go to a child session whose
  ``SessionStarted`` names the parent; a sidechain record without a parent starts a new child,
  the others follow their ``parentUuid``. A child is linked to the ``Task`` call whose
  ``prompt`` is its first user text (``parent_call_id``).

Tool calls that never got a result stay pending (the model view pairs them later). Session
ids are derived from the file's name and first line (``derived_session_id`` over them and the
start; a child's from that and its position): a session that goes on keeps its id (its
transcript imported again is appended to), and a resumed session's file, which copies the
first records under another name, gets its own; message and part ids are
our own (``IdGenerator`` over the records' timestamps); the originals are kept where a field exists:
``metadata["claude_code"]`` of text and reasoning parts holds the record ``uuid`` (and the
API ``message_id``, or the ``attachment`` kind), ``SessionStarted.config`` the original
``sessionId``. Text holding a lone UTF-16 surrogate (which UTF-8 cannot carry) or bytes that
are not UTF-8 is sanitised to U+FFFD.
A malformed record raises ``TraceImportError`` naming the line and the field; with ``lenient``
it is left out instead (``malformed_record``, with the field and reason), its content blocks
checked before any of them is used. Every record or block left out (the kinds above) is
listed in ``ImportedSession.left_out`` with its line, field and reason; ``read`` counts the
records by type.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeVar

import msgspec

from contextledger.events._catalogue import (
    AssistantFinished,
    Event,
    LeftOut,
    MessageAdded,
    PartAdded,
    SessionStarted,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._ids import IdGenerator
from contextledger.events._parts import (
    FilePart,
    ModelRef,
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    ToolPending,
    Usage,
)
from contextledger.importers._claude_code_attachments import attachment_text, typed_by_user
from contextledger.importers._errors import TraceImportError
from contextledger.importers._imported import (
    ApiCall,
    ImportedSession,
    Spawn,
    derived_session_id,
)
from contextledger.importers._records import malformed_record
from contextledger.importers._sink import EventBuffer

__all__ = [
    "ApiCall",
    "ImportedSession",
    "import_claude_code",
    "import_claude_code_lines",
]

#: Every message of a Claude Code transcript comes from Anthropic's API.
PROVIDER_ID: Final = "anthropic"

#: The model name Claude Code gives the assistant messages it writes itself (API error notices,
#: "No response requested."); such messages are marked synthetic.
SYNTHETIC_MODEL: Final = "<synthetic>"

#: Anthropic's ``stop_reason`` in the AI SDK's finish vocabulary (opencode's, and ours).
FINISH_REASONS: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content-filter",
    "pause_turn": "other",
}

#: The ``system`` notices Claude Code writes after a turn: its last reply is complete.
TURN_END_NOTICES: Final = frozenset({"stop_hook_summary", "turn_duration"})
#: The ``stop_reason`` after which a reply goes on: tool calls, of which more may follow
#: (Claude Code 2.1.150 and later write the reply's final ``stop_reason`` on each block).
GOES_ON: Final = "tool_use"
#: The content blocks of a model's reasoning.
REASONING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})

#: Joins the text blocks of one ``tool_result`` (the API sends them as separate blocks; a
#: newline keeps their words apart, as Claude Code's own transcript viewer does).
TEXT_BLOCK_SEPARATOR: Final = "\n"

#: What ``SessionStarted.agent`` says for a sub-agent whose ``Task`` call named no type.
SUBAGENT: Final = "subagent"

#: The tools that spawn a sub-agent (``Task`` before Claude Code 2.1, ``Agent`` after).
SPAWN_TOOLS: Final = frozenset({"Task", "Agent"})
#: A sub-agent transcript in a session's ``subagents`` folder (Claude Code 2.1).
SUBAGENT_GLOB: Final = "agent-*.jsonl"

#: Where the metadata this importer keeps sits in a part's ``metadata``.
METADATA_KEY: Final = "claude_code"

#: Why each kind of input is left out (``ImportedSession.left_out``).
SUMMARY_REASON: Final = (
    "a resume-picker title of a conversation leaf, never sent to the model "
    "(kept in ImportedSession.summaries)"
)
SYSTEM_REASON: Final = "a CLI notice (system record), not part of the conversation"
OTHER_RECORD_REASON: Final = "a record type that is neither a user nor an assistant message"
DUPLICATE_RECORD: Final = "a record whose uuid was seen before"
DUPLICATE_TOOL_USE: Final = "a tool_use whose id was seen before"
ORPHAN_RESULT: Final = "a tool_result for a call that was never made"
DUPLICATE_RESULT: Final = "a second result for the same call"
UNREAD_BLOCK: Final = "a content block of a type the importer does not read"

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND: Final = timedelta(milliseconds=1)
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_KNOWN_TYPES: Final = frozenset({"user", "assistant", "attachment"})
_MSGSPEC_PATH: Final = re.compile(r"at `\$(?P<path>[^`]*)`")
_MSGSPEC_MISSING: Final = re.compile(r"missing required field `(?P<field>[^`]+)`")
_T = TypeVar("_T")


def import_claude_code(
    path: str | Path, *, session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import the Claude Code transcript at ``path`` (the only I/O of this module).

    Raises ``TraceImportError`` naming the line and field of a malformed record (records are
    checked first, then their content blocks); with ``lenient`` such a record is left out.
    ``session_id`` overrides the main session's generated id.
    """
    path = Path(path)
    with path.open("rb") as f:
        return import_claude_code_lines(f, source=str(path), session_id=session_id, lenient=lenient)


def import_claude_code_lines(
    lines: Iterable[bytes | str],
    *,
    source: str = "<lines>",
    session_id: str | None = None,
    lenient: bool = False,
) -> ImportedSession:
    """Import a transcript given as its lines; pure. See the module docstring for the rules."""
    return _Importer(source, _Lines(lines, source, lenient), session_id).run()


def import_subagents(session: ImportedSession, folder: Path, *, lenient: bool = False) -> None:
    """Add the sub-agent transcripts Claude Code 2.1 writes beside a session's file
    (``<session>/subagents/agent-<id>.jsonl``, every record a sidechain one, with an
    ``agent-<id>.meta.json`` naming its ``agentType``) to ``session.children``, in name order:
    each a child session linked to the ``Task``/``Agent`` call whose prompt is its first user
    text. The last reply of a sub-agent whose spawning call has its result is complete."""
    answered = frozenset(
        spawn.prompt for spawn in session.spawns if spawn.answered and isinstance(spawn.prompt, str)
    )
    for path in sorted((folder / "subagents").glob(SUBAGENT_GLOB)):
        with path.open("rb") as f:
            importer = _Importer(str(path), _Lines(f, str(path), lenient), None, own_thread=True)
            child = importer.run(answered)
        meta = _subagent_meta(path.with_name(path.stem + ".meta.json"))
        prompt = importer.main.first_prompt
        linked = _linked(child, session, prompt, meta.get("agentType"))
        session.children.append(msgspec.structs.replace(linked, source=str(path)))


class _Lines:
    """The records of ``lines``, parsed one at a time as they are read; a malformed one is
    left out into ``malformed`` (``lenient``; else it raises). ``key`` is the key of the
    session id: the file's name and the SHA-256 of its first line, which stay the same as the
    session goes on (a resumed session's new file copies the first records under another
    name)."""

    def __init__(self, lines: Iterable[bytes | str], source: str, lenient: bool) -> None:
        self.malformed: list[LeftOut] = []
        self._lines = lines
        self._source = source
        self._lenient = lenient
        self._digest: str | None = None

    @property
    def key(self) -> str:
        return f"claude-code:{Path(self._source).name}:{self._digest}"

    def __iter__(self) -> Iterator[_Line]:
        for number, data in _nonblank(self._lines):
            if self._digest is None:
                self._digest = hashlib.sha256(data.rstrip(b"\r\n")).hexdigest()
            try:
                line = _parse_line(data, number, self._source)
                if self._lenient:
                    _check_blocks(line, self._source)
            except TraceImportError as e:
                if not self._lenient:
                    raise
                self.malformed.append(malformed_record(e))
                continue
            yield line


def _subagent_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _linked(
    child: ImportedSession, parent: ImportedSession, prompt: str | None, agent: Any
) -> ImportedSession:
    """``child`` with its start naming ``parent``, its agent type and the call that spawned it
    (the parent's ``Task``/``Agent`` call whose ``prompt`` is the child's first user text)."""
    call = next((spawn for spawn in parent.spawns if spawn.prompt == prompt), None)
    started = child.events[0]
    assert isinstance(started, SessionStarted)
    config = {**started.config, **({"parent_call_id": call.call_id} if call else {})}
    kind = agent if isinstance(agent, str) and agent else None
    if kind is None and call is not None:
        kind = str(call.subagent_type or SUBAGENT)
    started = msgspec.structs.replace(
        started, parent_session_id=parent.session_id, agent=kind or SUBAGENT, config=config
    )
    return msgspec.structs.replace(
        child,
        events=[started, *child.events[1:]],
        parent_call_id=call.call_id if call else None,
    )


# --- parsing: lines to typed records -------------------------------------------------------


class _Head(msgspec.Struct):
    type: str


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    output_tokens: int | None = None

    def to_usage(self) -> Usage:
        return Usage(
            input=self.input_tokens or 0,
            output=self.output_tokens or 0,
            cache_read=self.cache_read_input_tokens or 0,
            cache_write=self.cache_creation_input_tokens or 0,
        )


class _Message(msgspec.Struct):
    content: str | list[dict[str, Any]]
    role: str | None = None
    id: str | None = None
    model: str | None = None
    usage: _Usage | None = None
    stop_reason: str | None = None


class _Record(msgspec.Struct):
    """A ``user`` or ``assistant`` record (camelCase: the transcript's own field names)."""

    type: str
    uuid: str | None = None
    parentUuid: str | None = None
    sessionId: str | None = None
    timestamp: str | None = None
    isSidechain: bool | None = None
    isMeta: bool | None = None
    message: _Message | None = None
    attachment: dict[str, Any] | None = None


class _Summary(msgspec.Struct):
    summary: str = ""


class _Text(msgspec.Struct):
    text: str


class _Thinking(msgspec.Struct):
    thinking: str = ""
    signature: str | None = None


class _RedactedThinking(msgspec.Struct):
    data: str = ""


class _ToolUse(msgspec.Struct):
    id: str
    name: str
    input: dict[str, Any] = {}


class _ToolResult(msgspec.Struct):
    tool_use_id: str
    content: str | list[dict[str, Any]] | None = None
    is_error: bool | None = None


class _Source(msgspec.Struct):
    type: str = "base64"
    media_type: str | None = None
    data: str | None = None
    url: str | None = None


class _Media(msgspec.Struct):
    source: _Source


class _Line(msgspec.Struct, frozen=True):
    """One parsed line: its number, its record (or summary text), its time in ms, and whether
    it is a notice Claude Code writes once the model's turn is over (``_ends_turn``)."""

    number: int
    kind: str
    record: _Record | None
    summary: str | None
    time_ms: int | None
    ends_turn: bool = False


def _nonblank(lines: Iterable[bytes | str]) -> Iterator[tuple[int, bytes]]:
    for number, raw in enumerate(lines, 1):
        data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
        if data.strip():
            yield number, data


def _parse_line(data: bytes, number: int, source: str) -> _Line:
    try:
        obj: Any = msgspec.json.decode(data)
    except msgspec.DecodeError:
        # msgspec refuses lone surrogate escapes and invalid UTF-8; the standard library takes
        # both once the bytes are decoded leniently, and says where real syntax errors are.
        try:
            obj = _sanitised(json.loads(data.decode("utf-8", "replace")))
        except json.JSONDecodeError as e:
            raise TraceImportError(source, number, "", f"not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise TraceImportError(source, number, "", "a record must be a JSON object")
    head = _convert(obj, _Head, source, number, "")
    if head.type == "summary":
        summary = _convert(obj, _Summary, source, number, "")
        return _Line(number, head.type, None, summary.summary, None)
    if head.type not in _KNOWN_TYPES:
        return _Line(number, head.type, None, None, _time_ms(obj.get("timestamp")), _ends_turn(obj))
    record = _convert(obj, _Record, source, number, "")
    if record.type == "attachment":
        _check_attachment(record.attachment, source, number)
    elif record.message is None:
        raise TraceImportError(source, number, "message", "missing")
    elif record.type == "assistant":
        if not record.message.id:
            raise TraceImportError(source, number, "message.id", "missing")
        if isinstance(record.message.content, str):
            raise TraceImportError(
                source, number, "message.content", "an assistant's content must be a list"
            )
    time_ms = None
    if record.timestamp is not None:
        time_ms = _time_ms(record.timestamp)
        if time_ms is None:
            raise TraceImportError(
                source, number, "timestamp", f"not an ISO-8601 time: {record.timestamp!r}"
            )
    return _Line(number, head.type, record, None, time_ms)


def _ends_turn(obj: dict[str, Any]) -> bool:
    """Whether a record that is no message says the main thread's turn is over: Claude Code
    writes a ``Stop`` hook's progress, ``stop_hook_summary`` and ``turn_duration`` once the
    model's last reply of a turn is complete."""
    if obj.get("isSidechain"):
        return False
    if obj["type"] == "system":
        return obj.get("subtype") in TURN_END_NOTICES
    data = obj.get("data")
    return (
        obj["type"] == "progress"
        and isinstance(data, dict)
        and data.get("type") == "hook_progress"
        and data.get("hookEvent") == "Stop"
    )


def _check_attachment(attachment: dict[str, Any] | None, source: str, number: int) -> None:
    if attachment is None:
        raise TraceImportError(source, number, "attachment", "missing")
    if not isinstance(attachment.get("type"), str):
        raise TraceImportError(source, number, "attachment.type", "missing or not a string")


#: The typed form of each content block the importer reads (``_check_blocks``).
_BLOCKS: Final[dict[str, type[msgspec.Struct]]] = {
    "text": _Text,
    "thinking": _Thinking,
    "redacted_thinking": _RedactedThinking,
    "tool_use": _ToolUse,
    "tool_result": _ToolResult,
    "image": _Media,
    "document": _Media,
}


def _check_blocks(line: _Line, source: str) -> None:
    """Raise ``TraceImportError`` for the first malformed content block of ``line`` (and of
    its tool results), so that a lenient import leaves the whole record out before using any
    block of it."""
    message = line.record.message if line.record else None
    content = message.content if message and isinstance(message.content, list) else []
    blocks = [(f"message.content[{i}]", b) for i, b in enumerate(content)]
    for at, block in blocks:
        kind = _block_type(block, source, line.number, at)
        if kind in _BLOCKS:
            _convert(block, _BLOCKS[kind], source, line.number, at)
        inner = block.get("content") if kind == "tool_result" else None
        if isinstance(inner, list):
            blocks.extend((f"{at}.content[{i}]", b) for i, b in enumerate(inner))


def _convert(obj: Any, kind: type[_T], source: str, line: int, at: str) -> _T:
    """``obj`` as ``kind``; a mismatch raises ``TraceImportError`` naming the field."""
    try:
        return msgspec.convert(obj, kind)
    except msgspec.ValidationError as e:
        raise TraceImportError(source, line, _field_of(str(e), at), str(e)) from None


def _field_of(message: str, at: str) -> str:
    """The dotted field path in a msgspec validation message, under the prefix ``at``."""
    match = _MSGSPEC_PATH.search(message)
    path = match.group("path").lstrip(".") if match else ""
    missing = _MSGSPEC_MISSING.search(message)
    if missing:
        path = f"{path}.{missing.group('field')}" if path else missing.group("field")
    if at and path:
        return f"{at}{'' if path.startswith('[') else '.'}{path}"
    return at or path


def _time_ms(value: object) -> int | None:
    """Milliseconds since the epoch of an ISO-8601 time (UTC when it names no zone)."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MILLISECOND


def _sanitised(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_sanitised(v) for v in value]
    if isinstance(value, dict):
        return {_sanitised(k): _sanitised(v) for k, v in value.items()}
    return value


# --- building: records to events -----------------------------------------------------------


class _ToolCall(msgspec.Struct):
    message_id: str
    part_id: str
    tool: str
    input: dict[str, Any]
    started_ms: int
    done: bool = False


class _OpenCall(msgspec.Struct):
    api_message_id: str
    message_id: str
    model: str
    line: int
    started_ms: int
    last_ms: int
    usage: Usage
    stop_reason: str | None = None
    tool_calls: int = 0
    complete: bool = False


class _Thread:
    """The events of one session (the main thread or one sub-agent) as they are built."""

    def __init__(
        self,
        session_id: str,
        *,
        source: str,
        started_ms: int,
        parent_session_id: str | None = None,
        source_session_id: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.source = source
        self.started_ms = started_ms
        self.parent_session_id = parent_session_id
        self.source_session_id = source_session_id
        self.events = EventBuffer()
        self.calls: list[ApiCall] = []
        self.skipped: Counter[str] = Counter()
        self.left_out: list[LeftOut] = []
        self.model: str | None = None
        self.first_prompt: str | None = None
        self.tool_calls: dict[str, _ToolCall] = {}
        self._message_ids = IdGenerator("msg")
        self._part_ids = IdGenerator("prt")
        self._open: _OpenCall | None = None
        self._closed: dict[str, str] = {}
        self._last_user: str | None = None

    # --- records --------------------------------------------------------------------------

    def assistant(self, line: _Line, record: _Record, now: int) -> None:
        message = record.message
        assert message is not None and message.id is not None
        assert isinstance(message.content, list)
        open_call = self._open
        if open_call is None or open_call.api_message_id != message.id:
            self.close()
            if message.id in self._closed:
                # A late line of a response already closed: its blocks still belong to it,
                # its usage was counted.
                self.skipped["late_assistant_line"] += 1
                self._blocks(line, record, self._closed[message.id], None, now)
                return
            open_call = self._open_call(line, message.id, message.model or "", now)
        open_call.last_ms = max(open_call.last_ms, now)
        if message.usage is not None:
            open_call.usage = _max_usage(open_call.usage, message.usage.to_usage())
        if message.stop_reason is not None:
            open_call.stop_reason = message.stop_reason
        self._blocks(line, record, open_call.message_id, open_call, now)
        open_call.complete = _completes(message)  # its blocks are checked now

    def user(self, line: _Line, record: _Record, now: int) -> None:
        self.close()
        message = record.message
        assert message is not None
        meta = bool(record.isMeta)
        content = message.content
        if isinstance(content, str):
            self._user_message([content], [], record, now, meta)
            return
        texts: list[str] = []
        files: list[tuple[str, str]] = []
        for i, block in enumerate(content):
            at = f"message.content[{i}]"
            kind = _block_type(block, self.source, line.number, at)
            if kind == "tool_result":
                result = _convert(block, _ToolResult, self.source, line.number, at)
                self._tool_result(result, line.number, at, now)
            elif kind == "text":
                texts.append(_convert(block, _Text, self.source, line.number, at).text)
            elif kind in ("image", "document"):
                media = _convert(block, _Media, self.source, line.number, at)
                files.append(_media_file(media.source, kind))
            else:
                self._leave(line.number, f"block:{kind}", UNREAD_BLOCK, at)
        if texts or files:
            self._user_message(texts, files, record, now, meta)

    def attachment(self, line: _Line, record: _Record, now: int) -> None:
        """Context Claude Code sent as user content (``_claude_code_attachments``): a user
        message, synthetic unless it is a prompt the user typed; or left out, with why."""
        attachment = record.attachment
        assert attachment is not None
        text, reason = attachment_text(attachment)
        if text is None:
            self._leave(line.number, f"attachment:{attachment['type']}", str(reason), "attachment")
            return
        self.close()
        typed = typed_by_user(attachment)
        self._user_message([text], [], record, now, not typed, attachment=attachment["type"])

    def end(self, *, answered: bool = False) -> None:
        """At the end of the transcript: finish the open API call when its last line says it
        is complete (``_completes``) or, for a sub-agent, when the call that spawned it has
        its result (``answered``). Otherwise more of its blocks may still be written, so it
        stays open: no step finish, no usage reported yet (its ``ApiCall`` holds the usage
        read so far); the transcript imported again once it grew adds the rest and finishes
        it."""
        call = self._open
        if call is None:
            return
        if call.complete or answered:
            self.close()
        else:
            self.calls.append(_api_call(call))

    def close(self) -> None:
        """Finish the open API call, if any: step finish, finished, usage reported."""
        call = self._open
        if call is None:
            return
        self._open = None
        self._closed[call.api_message_id] = call.message_id
        finish = _finish_reason(call.stop_reason, call.tool_calls)
        self._part(
            StepFinishPart(
                id=self._part_ids.next(call.last_ms),
                message_id=call.message_id,
                reason=finish,
                usage=call.usage,
            ),
            call.last_ms,
        )
        self._add(
            AssistantFinished(
                session_id=self.session_id,
                time_ms=call.last_ms,
                message_id=call.message_id,
                finish=finish,
                usage=call.usage,
            )
        )
        self._add(
            UsageReported(
                session_id=self.session_id,
                time_ms=call.last_ms,
                message_id=call.message_id,
                usage=call.usage,
            )
        )
        self.calls.append(_api_call(call))

    def answered_prompts(self) -> set[str]:
        """The prompts (a sub-agent's first user text) of the spawning calls that have their
        result: those sub-agents are done. A prompt that is no text names no sub-agent."""
        calls = self.tool_calls.values()
        prompts = (c.input.get("prompt") for c in calls if c.done and c.tool in SPAWN_TOOLS)
        return {p for p in prompts if isinstance(p, str)}

    def result(
        self,
        *,
        children: list[ImportedSession],
        summaries: list[str],
        skipped: Counter[str],
        left_out: list[LeftOut] | None = None,
        read: Counter[str] | None = None,
        parent_call_id: str | None = None,
        agent: str = "main",
    ) -> ImportedSession:
        """The finished session (call ``end`` first)."""
        config: dict[str, Any] = {"source": "claude-code"}
        if self.source_session_id is not None:
            config["source_session_id"] = self.source_session_id
        if parent_call_id is not None:
            config["parent_call_id"] = parent_call_id
        started = SessionStarted(
            session_id=self.session_id,
            time_ms=self.started_ms,
            model=ModelRef(provider_id=PROVIDER_ID, model_id=self.model) if self.model else None,
            agent=agent,
            parent_session_id=self.parent_session_id,
            config=config,
        )
        events, streamed = self.events.close(self.session_id)
        spawns = [
            Spawn(
                call_id=id,
                prompt=c.input.get("prompt"),
                subagent_type=c.input.get("subagent_type"),
                answered=c.done,
            )
            for id, c in self.tool_calls.items()
            if c.tool in SPAWN_TOOLS
        ]
        return ImportedSession(
            session_id=self.session_id,
            events=[started, *events],
            streamed=streamed,
            spawns=spawns,
            calls=self.calls,
            children=children,
            skipped=dict(sorted((skipped + self.skipped).items())),
            summaries=summaries,
            read=dict(sorted((read or Counter()).items())),
            left_out=sorted([*(left_out or []), *self.left_out], key=_position),
            source_session_id=self.source_session_id,
            parent_call_id=parent_call_id,
        )

    # --- building blocks ------------------------------------------------------------------

    def _add(self, event: Event) -> None:
        self.events.append(event)

    def _leave(self, line: int, kind: str, reason: str, field: str = "") -> None:
        self.skipped[kind] += 1
        self.left_out.append(LeftOut(line=line, kind=kind, reason=reason, field=field))

    def _part(self, part: Any, now: int) -> None:
        self._add(PartAdded(session_id=self.session_id, time_ms=now, part=part))

    def _open_call(self, line: _Line, api_message_id: str, model: str, now: int) -> _OpenCall:
        message_id = self._message_ids.next(now)
        synthetic = model == SYNTHETIC_MODEL
        self._add(
            MessageAdded(
                session_id=self.session_id,
                time_ms=now,
                message_id=message_id,
                role="assistant",
                parent_id=self._last_user,
                model=ModelRef(provider_id=PROVIDER_ID, model_id=model) if model else None,
                synthetic=synthetic,
            )
        )
        if self.model is None and model and not synthetic:
            self.model = model
        self._part(StepStartPart(id=self._part_ids.next(now), message_id=message_id), now)
        self._open = _OpenCall(
            api_message_id=api_message_id,
            message_id=message_id,
            model=model,
            line=line.number,
            started_ms=now,
            last_ms=now,
            usage=Usage(),
        )
        return self._open

    def _blocks(
        self, line: _Line, record: _Record, message_id: str, call: _OpenCall | None, now: int
    ) -> None:
        message = record.message
        assert message is not None and isinstance(message.content, list)
        origin = {"uuid": record.uuid, "message_id": message.id}
        for i, block in enumerate(message.content):
            at = f"message.content[{i}]"
            kind = _block_type(block, self.source, line.number, at)
            if kind == "text":
                text = _convert(block, _Text, self.source, line.number, at).text
                self._part(
                    TextPart(
                        id=self._part_ids.next(now),
                        message_id=message_id,
                        text=text,
                        metadata={METADATA_KEY: origin},
                    ),
                    now,
                )
            elif kind in REASONING_BLOCKS:
                self._part(self._reasoning(block, kind, line, at, message_id, origin, now), now)
            elif kind == "tool_use":
                use = _convert(block, _ToolUse, self.source, line.number, at)
                if use.id in self.tool_calls:
                    self._leave(line.number, "duplicate_tool_use", DUPLICATE_TOOL_USE, at)
                    continue
                part_id = self._part_ids.next(now)
                self.tool_calls[use.id] = _ToolCall(message_id, part_id, use.name, use.input, now)
                self._part(
                    ToolPart(
                        id=part_id,
                        message_id=message_id,
                        call_id=use.id,
                        tool=use.name,
                        state=ToolPending(input=use.input),
                    ),
                    now,
                )
                if call is not None:
                    call.tool_calls += 1
            elif kind in ("image", "document"):
                media = _convert(block, _Media, self.source, line.number, at)
                mime, url = _media_file(media.source, kind)
                file = FilePart(
                    id=self._part_ids.next(now), message_id=message_id, mime=mime, url=url
                )
                self._part(file, now)
            else:
                self._leave(line.number, f"block:{kind}", UNREAD_BLOCK, at)

    def _reasoning(
        self,
        block: dict[str, Any],
        kind: str,
        line: _Line,
        at: str,
        message_id: str,
        origin: dict[str, Any],
        now: int,
    ) -> ReasoningPart:
        metadata: dict[str, Any] = {METADATA_KEY: origin}
        if kind == "thinking":
            thinking = _convert(block, _Thinking, self.source, line.number, at)
            text = thinking.thinking
            if thinking.signature:
                metadata[PROVIDER_ID] = {"signature": thinking.signature}
        else:
            text = ""
            redacted = _convert(block, _RedactedThinking, self.source, line.number, at)
            metadata[PROVIDER_ID] = {"redactedData": redacted.data}
        return ReasoningPart(
            id=self._part_ids.next(now), message_id=message_id, text=text, metadata=metadata
        )

    def _tool_result(self, result: _ToolResult, number: int, at: str, now: int) -> None:
        call = self.tool_calls.get(result.tool_use_id)
        if call is None:
            self._leave(number, "orphan_tool_result", ORPHAN_RESULT, at)
            return
        if call.done:
            self._leave(number, "duplicate_tool_result", DUPLICATE_RESULT, at)
            return
        call.done = True
        call_input = call.input
        if call.tool not in SPAWN_TOOLS:  # a sub-agent's link reads a spawning call's input
            call.input = {}
        output, files = self._result_content(result.content, call.message_id, number, at, now)
        state: ToolCompleted | ToolErrored
        if result.is_error:
            state = ToolErrored(
                input=call_input, error=output, started_ms=call.started_ms, ended_ms=now
            )
        else:
            state = ToolCompleted(
                input=call_input,
                output=output,
                attachments=tuple(files),
                started_ms=call.started_ms,
                ended_ms=now,
            )
        self._add(
            ToolStateChanged(
                session_id=self.session_id,
                time_ms=now,
                message_id=call.message_id,
                part_id=call.part_id,
                state=state,
            )
        )

    def _result_content(
        self,
        content: str | list[dict[str, Any]] | None,
        message_id: str,
        number: int,
        at: str,
        now: int,
    ) -> tuple[str, list[FilePart]]:
        if content is None:
            return "", []
        if isinstance(content, str):
            return content, []
        texts: list[str] = []
        files: list[FilePart] = []
        for i, block in enumerate(content):
            where = f"{at}.content[{i}]"
            kind = _block_type(block, self.source, number, where)
            if kind == "text":
                texts.append(_convert(block, _Text, self.source, number, where).text)
            elif kind in ("image", "document"):
                media = _convert(block, _Media, self.source, number, where)
                mime, url = _media_file(media.source, kind)
                files.append(
                    FilePart(id=self._part_ids.next(now), message_id=message_id, mime=mime, url=url)
                )
            else:
                self._leave(number, f"block:{kind}", UNREAD_BLOCK, where)
        return TEXT_BLOCK_SEPARATOR.join(texts), files

    def _user_message(
        self,
        texts: list[str],
        files: list[tuple[str, str]],
        record: _Record,
        now: int,
        meta: bool,
        *,
        attachment: str | None = None,
    ) -> None:
        """A user message of ``texts`` and ``files``; a synthetic one (``meta``: an ``isMeta``
        note or an attachment the CLI sent on its own) is neither the message the next answer
        replies to nor a sub-agent's first prompt."""
        message_id = self._message_ids.next(now)
        if not meta:
            self._last_user = message_id
        self._add(
            MessageAdded(
                session_id=self.session_id,
                time_ms=now,
                message_id=message_id,
                role="user",
                synthetic=meta,
            )
        )
        if self.first_prompt is None and not meta:
            self.first_prompt = TEXT_BLOCK_SEPARATOR.join(texts)
        origin: dict[str, Any] = {"uuid": record.uuid}
        if attachment is not None:
            origin["attachment"] = attachment
        for text in texts:
            self._part(
                TextPart(
                    id=self._part_ids.next(now),
                    message_id=message_id,
                    text=text,
                    synthetic=meta,
                    metadata={METADATA_KEY: origin},
                ),
                now,
            )
        for mime, url in files:
            self._part(
                FilePart(id=self._part_ids.next(now), message_id=message_id, mime=mime, url=url),
                now,
            )


class _Importer:
    """Routes parsed lines to the main thread or a sub-agent's, and assembles the result."""

    def __init__(
        self, source: str, lines: _Lines, session_id: str | None, *, own_thread: bool = False
    ) -> None:
        self.source = source
        self.parsed = lines
        # A sub-agent's own transcript: its sidechain records are its main thread.
        self.own_thread = own_thread
        # The lines up to the first with a time, which is the session's start.
        self.lines = iter(lines)
        self.ahead: list[_Line] = []
        for line in self.lines:
            self.ahead.append(line)
            if line.time_ms is not None:
                break
        start_ms = next((line.time_ms for line in self.ahead if line.time_ms is not None), 0)
        self.key = lines.key
        self.main = _Thread(
            session_id or derived_session_id(start_ms, self.key),
            source=source,
            started_ms=start_ms,
        )
        self.children: list[_Thread] = []
        self.thread_of_uuid: dict[str, _Thread] = {}
        self.seen_uuids: set[str] = set()
        self.skipped: Counter[str] = Counter()
        self.left_out: list[LeftOut] = []
        self.read: Counter[str] = Counter()
        self.summaries: list[str] = []

    def run(self, answered: frozenset[str] = frozenset()) -> ImportedSession:
        """Import the lines. ``answered`` are the prompts of the parent's spawning calls that
        have their result (a sub-agent's own transcript: its last reply is then complete)."""
        now = self.main.started_ms
        for line in itertools.chain(self.ahead, self.lines):
            now = line.time_ms if line.time_ms is not None else now
            self.read[line.kind] += 1
            record = line.record
            if record is not None and record.sessionId and self.main.source_session_id is None:
                self.main.source_session_id = record.sessionId
            if record is None:
                self._leave(line.number, line.kind, _record_reason(line.kind))
                if line.summary is not None:
                    self.summaries.append(line.summary)
                if line.ends_turn and not self.own_thread:
                    self.main.close()
                continue
            if record.uuid is not None:
                if record.uuid in self.seen_uuids:
                    self._leave(line.number, "duplicate_record", DUPLICATE_RECORD)
                    continue
                self.seen_uuids.add(record.uuid)
            thread = self._thread(record, now)
            if record.type == "assistant":
                thread.assistant(line, record, now)
            elif record.type == "attachment":
                thread.attachment(line, record, now)
            else:
                thread.user(line, record, now)
        self.ahead.clear()
        done = answered | self.main.answered_prompts()
        for thread in (self.main, *self.children):
            sub_agent = thread is not self.main or self.own_thread
            prompt = thread.first_prompt
            thread.end(answered=sub_agent and prompt is not None and prompt in done)
        malformed = self.parsed.malformed
        self.left_out.extend(malformed)
        self.skipped.update(item.kind for item in malformed)
        self.read.update(item.kind for item in malformed)
        children = [self._child_result(child) for child in self.children]
        return self.main.result(
            children=children,
            summaries=self.summaries,
            skipped=self.skipped,
            left_out=self.left_out,
            read=self.read,
        )

    def _leave(self, line: int, kind: str, reason: str) -> None:
        self.skipped[kind] += 1
        self.left_out.append(LeftOut(line=line, kind=kind, reason=reason))

    def _thread(self, record: _Record, now: int) -> _Thread:
        """The main thread, or the sub-agent thread a sidechain record belongs to: a sidechain
        record starts a new child unless its parent is a record of an existing child (a parent
        never seen joins the latest child)."""
        if not record.isSidechain or self.own_thread:
            thread = self.main
        elif record.parentUuid is None:
            thread = self._new_child(now)
        else:
            parent = self.thread_of_uuid.get(record.parentUuid)
            if parent is None and record.parentUuid in self.seen_uuids:
                parent = self.main  # only sub-agents' records are in thread_of_uuid
            if parent is self.main:
                thread = self._new_child(now)
            elif parent is not None:
                thread = parent
            else:
                thread = self.children[-1] if self.children else self._new_child(now)
        if record.uuid is not None and thread is not self.main:
            self.thread_of_uuid[record.uuid] = thread
        return thread

    def _new_child(self, now: int) -> _Thread:
        child = _Thread(
            derived_session_id(now, f"{self.key}:{len(self.children)}"),
            source=self.source,
            started_ms=now,
            parent_session_id=self.main.session_id,
        )
        self.children.append(child)
        return child

    def _child_result(self, child: _Thread) -> ImportedSession:
        parent_call_id, agent = None, SUBAGENT
        for call_id, call in self.main.tool_calls.items():
            if call.tool in SPAWN_TOOLS and call.input.get("prompt") == child.first_prompt:
                parent_call_id = call_id
                agent = str(call.input.get("subagent_type") or SUBAGENT)
                break
        child.source_session_id = self.main.source_session_id
        return child.result(
            children=[], summaries=[], skipped=Counter(), parent_call_id=parent_call_id, agent=agent
        )


def _record_reason(kind: str) -> str:
    if kind == "summary":
        return SUMMARY_REASON
    return SYSTEM_REASON if kind == "system" else OTHER_RECORD_REASON


def _position(item: LeftOut) -> tuple[int, str]:
    return item.line, item.field


def _block_type(block: object, source: str, line: int, at: str) -> str:
    if not isinstance(block, dict):
        raise TraceImportError(source, line, at, "a content block must be a JSON object")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise TraceImportError(source, line, f"{at}.type", "missing or not a string")
    return kind


def _media_file(source: _Source, kind: str) -> tuple[str, str]:
    """(MIME type, URL) of an image or document block: a ``data:`` URL for base64 data."""
    mime = source.media_type or ("application/pdf" if kind == "document" else "image/png")
    if source.type == "url" and source.url:
        return mime, source.url
    return mime, f"data:{mime};base64,{source.data or ''}"


def _max_usage(a: Usage, b: Usage) -> Usage:
    return Usage(
        input=max(a.input, b.input),
        output=max(a.output, b.output),
        reasoning=max(a.reasoning, b.reasoning),
        cache_read=max(a.cache_read, b.cache_read),
        cache_write=max(a.cache_write, b.cache_write),
    )


def _api_call(call: _OpenCall) -> ApiCall:
    return ApiCall(
        message_id=call.message_id,
        api_message_id=call.api_message_id,
        model=call.model,
        usage=call.usage,
        line=call.line,
        time_ms=call.started_ms,
    )


def _completes(message: _Message) -> bool:
    """Whether a reply's line says the reply is complete: a ``stop_reason`` other than
    ``tool_use`` (the turn ends: ``end_turn``, ``max_tokens``, ...) on a block that is not
    reasoning (text follows the thinking of a reply that ends the turn). Claude Code writes
    most lines while streaming, before the reply's ``stop_reason`` is known: those say
    nothing."""
    if message.stop_reason in (None, GOES_ON):
        return False
    assert isinstance(message.content, list)
    return not message.content or message.content[-1]["type"] not in REASONING_BLOCKS


def _finish_reason(stop_reason: str | None, tool_calls: int) -> str:
    """Our finish reason for an Anthropic ``stop_reason``; Claude Code writes most lines while
    streaming, with none, so a response with tool calls then counts as ``tool-calls``."""
    if stop_reason is None:
        return "tool-calls" if tool_calls else "stop"
    return FINISH_REASONS.get(stop_reason, "other")
