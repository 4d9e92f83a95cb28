"""``ChatBuilder``: one session's events, built turn by turn by the importers of every format but
Claude Code's.

It writes the shapes the runtime writes: a user message with its text and file parts; per
model call an assistant message (step start, its reasoning, text and tool parts in order, step
finish, ``AssistantFinished``, ``UsageReported`` when the format reports usage); a result
completes its call with ``ToolStateChanged``; a compaction is a request, a summary message and
``CompactionCompleted``. Ids are new and monotonic; times are the input's (never going
backwards) or a synthetic clock. What the input holds but no event carries is recorded with
``leave_out`` (its line and reason), never dropped in silence. A lenient import builds each
record of a JSON document inside ``record``, which undoes a record that turns out malformed.
Inside ``streaming`` the events go to the sink as they are built (see ``EventBuffer``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

import msgspec

from contextledger.events._catalogue import (
    AssistantFinished,
    CompactionCompleted,
    CompactionProjection,
    CompactionRequested,
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
    MessageError,
    ModelRef,
    Part,
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
from contextledger.importers._errors import TraceImportError
from contextledger.importers._imported import (
    ApiCall,
    HashedKey,
    ImportedSession,
    derived_session_id,
)
from contextledger.importers._records import MALFORMED_RECORD, malformed_record
from contextledger.importers._sink import EventBuffer

#: Where the synthetic clock of a format without timestamps starts (2023-11-14T22:13:20Z).
SYNTHETIC_START_MS: Final = 1_700_000_000_000
#: How far the synthetic clock advances per message.
SYNTHETIC_STEP_MS: Final = 1000
#: The agent of a compaction's summary message (``contextledger.compaction`` writes the same).
COMPACTION_AGENT: Final = "compaction"
#: Why a result answering no pending call is left out.
ORPHAN_RESULT: Final = "a tool result whose call was never made (or was answered already)"
#: Why a second call with a pending call's id is left out.
DUPLICATE_CALL: Final = "a tool call whose id an unanswered call already has"


class ToolCall(msgspec.Struct, frozen=True):
    """One tool call of an assistant message: the original call id, tool name and input;
    ``metadata`` is the provider's call metadata; ``provider_executed`` marks a call the
    provider ran itself (a hosted web search); ``line`` (0: the message's) and ``field`` (a
    JSON path) say where the call is, named when it is left out."""

    call_id: str
    tool: str
    input: dict[str, Any]
    metadata: dict[str, Any] = {}
    provider_executed: bool = False
    field: str = ""
    line: int = 0


class Text(msgspec.Struct, frozen=True):
    """A text part of an assistant message."""

    text: str
    metadata: dict[str, Any] = {}


class Reasoning(msgspec.Struct, frozen=True):
    """A reasoning part of an assistant message (``metadata`` holds provider signatures)."""

    text: str
    metadata: dict[str, Any] = {}


class Attachment(msgspec.Struct, frozen=True):
    """A file or medium: its MIME type and a ``data:`` URL or link."""

    mime: str
    url: str
    filename: str | None = None
    source_path: str | None = None


#: A part of an assistant message: text, reasoning, a tool call, or a medium (a file part).
AssistantItem = Text | Reasoning | ToolCall | Attachment


class _Pending(msgspec.Struct):
    message_id: str
    part_id: str
    tool: str
    input: dict[str, Any]
    started_ms: int


class _Checkpoint(msgspec.Struct, kw_only=True):
    """What ``ChatBuilder.record`` restores when a record fails."""

    events: int
    first_ms: int | None
    calls: int
    message_ids: int
    left_out: int
    pending: dict[str, _Pending]
    skipped: Counter[str]
    read: Counter[str]
    config: dict[str, Any]
    now: int | None
    last_user: str | None
    model: ModelRef | None


class ChatBuilder:
    """Builds one session's events from turns; times are real (``time_ms``) or synthetic."""

    def __init__(
        self,
        *,
        fmt: str,
        session_id: str | None,
        start_ms: int | None = None,
        config: dict[str, Any] | None = None,
        key: str | bytes | HashedKey | None = None,
    ) -> None:
        self.fmt = fmt
        self.config: dict[str, Any] = {"source": fmt, **(config or {})}
        self.model: ModelRef | None = None
        self.title = ""
        self.agent = "main"
        self.parent_session_id: str | None = None
        self.parent_call_id: str | None = None
        self.source_session_id: str | None = None
        self.started_ms: int | None = None
        self.skipped: Counter[str] = Counter()
        self.read: Counter[str] = Counter()
        self.left_out: list[LeftOut] = []
        self.requested_id = session_id
        self.key = key
        self._start_ms = start_ms
        self._now: int | None = None
        self._events = EventBuffer()
        self._calls: list[ApiCall] = []
        self._pending: dict[str, _Pending] = {}
        self._used_call_ids: set[str] = set()
        self._messages = IdGenerator("msg")
        self._parts = IdGenerator("prt")
        self._last_user: str | None = None
        self._message_ids: list[str] = []
        self._head_start = 0
        self._session_id = session_id or ""

    # --- bookkeeping ----------------------------------------------------------------------

    def leave_out(self, line: int, kind: str, reason: str, field: str = "") -> None:
        """Record that the input's ``kind`` at ``line`` (``field``) became no event, and why."""
        self.skipped[kind] += 1
        self.left_out.append(LeftOut(line=line, kind=kind, reason=reason, field=field))

    def tick(self, time_ms: int | None = None) -> int:
        """The time of the next event: ``time_ms`` (never before the last), else one synthetic
        step after the last."""
        if time_ms is None:
            base = self._start_ms if self._start_ms is not None else SYNTHETIC_START_MS
            now = base if self._now is None else self._now + SYNTHETIC_STEP_MS
        else:
            now = time_ms if self._now is None else max(time_ms, self._now)
        self._now = now
        return now

    @property
    def pending(self) -> list[str]:
        """The call ids still waiting for a result, oldest first."""
        return list(self._pending)

    @property
    def messages(self) -> int:
        """How many messages were written so far."""
        return len(self._message_ids)

    @contextmanager
    def record(self, *, lenient: bool, state: object | None = None) -> Iterator[None]:
        """Build from one input record (a message of a JSON document). With ``lenient``, a
        ``TraceImportError`` it raises undoes what it built (events, calls, pending calls,
        counts, left-out items, the clock, and the attributes of the importer's own
        ``state`` object) and leaves the record out as malformed, with the error's line,
        field and reason; without, the error goes on."""
        if not lenient:
            yield
            return
        with self._events.hold():
            yield from self._undoable(state)

    def _undoable(self, state: object | None) -> Iterator[None]:
        kept = {
            name: value.copy() if isinstance(value, dict | list | set) else value
            for name, value in (vars(state) if state is not None else {}).items()
        }
        saved = _Checkpoint(
            events=len(self._events.events),
            first_ms=self._events.first_ms,
            calls=len(self._calls),
            message_ids=len(self._message_ids),
            left_out=len(self.left_out),
            pending=dict(self._pending),
            skipped=Counter(self.skipped),
            read=Counter(self.read),
            config=dict(self.config),
            now=self._now,
            last_user=self._last_user,
            model=self.model,
        )
        try:
            yield
        except TraceImportError as error:
            self._restore(saved)
            if state is not None:
                vars(state).update(kept)
            self.read[MALFORMED_RECORD] += 1
            self.skipped[MALFORMED_RECORD] += 1
            self.left_out.append(malformed_record(error))

    def _restore(self, saved: _Checkpoint) -> None:
        for event in self._events.events[saved.events :]:
            if isinstance(event, PartAdded) and isinstance(event.part, ToolPart):
                self._used_call_ids.discard(event.part.call_id)
        del self._events.events[saved.events :]
        self._events.first_ms = saved.first_ms
        del self._calls[saved.calls :]
        del self._message_ids[saved.message_ids :]
        del self.left_out[saved.left_out :]
        self._pending = saved.pending
        self.skipped, self.read, self.config = saved.skipped, saved.read, saved.config
        self._now, self._last_user, self.model = saved.now, saved.last_user, saved.model

    # --- turns ----------------------------------------------------------------------------

    def user(
        self,
        texts: Sequence[str],
        *,
        now: int,
        synthetic: bool = False,
        ignored: bool = False,
        files: Sequence[Attachment] = (),
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """A user message with one text part per text (``ignored`` text is shown, never sent)
        and one file part per file; returns its id."""
        message_id = self.open_user(now=now, synthetic=synthetic)
        for text in texts:
            part = TextPart(
                id=self._parts.next(now),
                message_id=message_id,
                text=text,
                synthetic=synthetic,
                ignored=ignored,
                metadata=metadata or {},
            )
            self._part(part, now)
        for file in files:
            self._part(self._file(file, message_id, now), now)
        return message_id

    def open_user(self, *, now: int, synthetic: bool = False, agent: str | None = None) -> str:
        """Start a user message (add its parts with ``add_part``); returns its id."""
        message_id = self._message("user", now=now, synthetic=synthetic, agent=agent)
        self._last_user = message_id
        return message_id

    def assistant(
        self,
        *,
        now: int,
        line: int,
        texts: Sequence[str] = (),
        reasoning: Sequence[str] = (),
        calls: Sequence[ToolCall] = (),
        items: Sequence[AssistantItem] | None = None,
        usage: Usage | None = None,
        model: ModelRef | None = None,
        api_message_id: str | None = None,
        finish: str | None = None,
        cost: float = 0.0,
    ) -> str:
        """One complete assistant message (one model call); returns its id. Its parts are
        ``items`` in order, else the ``reasoning``, then the ``texts``, then the ``calls``.
        ``UsageReported`` is written only when ``usage`` is given."""
        if items is None:
            items = [*map(Reasoning, reasoning), *map(Text, texts), *calls]
        message_id = self.open_assistant(now=now, model=model)
        tools = 0
        for item in items:
            tools += self.add_item(message_id, item, now, line=line)
        reason = finish or ("tool-calls" if tools else "stop")
        self.step_finish(
            message_id,
            now=now,
            line=line,
            reason=reason,
            usage=usage,
            cost=cost,
            model=model,
            api_message_id=api_message_id,
        )
        self.finish(message_id, now=now, finish=reason, usage=usage, cost=cost)
        return message_id

    def open_assistant(
        self,
        *,
        now: int,
        model: ModelRef | None = None,
        summary_of: str | None = None,
        agent: str | None = None,
        step_start: bool = True,
        snapshot: str | None = None,
    ) -> str:
        """Start an assistant message (answering the last user message, or the compaction
        request ``summary_of``) with a step-start part; returns its id."""
        model = model or self.model
        if self.model is None:
            self.model = model
        message_id = self._message(
            "assistant",
            now=now,
            parent_id=summary_of or self._last_user,
            model=model,
            summary=summary_of is not None,
            agent=agent,
        )
        if step_start:
            self.step_start(message_id, now=now, snapshot=snapshot)
        return message_id

    def step_start(self, message_id: str, *, now: int, snapshot: str | None = None) -> None:
        """A model-call boundary inside an assistant message."""
        part = StepStartPart(id=self._parts.next(now), message_id=message_id, snapshot=snapshot)
        self._part(part, now)

    def add_item(self, message_id: str, item: AssistantItem, now: int, *, line: int = 0) -> int:
        """Add one text, reasoning, file or tool-call part; returns 1 for a tool call, else 0
        (also for a call left out because an unanswered call has its id)."""
        match item:
            case Attachment():
                part: Part = self._file(item, message_id, now)
            case Text(text=text, metadata=metadata):
                part = TextPart(
                    id=self._parts.next(now), message_id=message_id, text=text, metadata=metadata
                )
            case Reasoning(text=text, metadata=metadata):
                part = ReasoningPart(
                    id=self._parts.next(now), message_id=message_id, text=text, metadata=metadata
                )
            case ToolCall():
                return self._tool_part(message_id, item, now, line)
        self._part(part, now)
        return 0

    def add_part(self, part: Part, now: int) -> None:
        """Add a part the caller built (with ``part_id``)."""
        self._part(part, now)

    def part_id(self, now: int) -> str:
        """A new part id."""
        return self._parts.next(now)

    def step_finish(
        self,
        message_id: str,
        *,
        now: int,
        line: int,
        reason: str,
        usage: Usage | None,
        cost: float = 0.0,
        model: ModelRef | None = None,
        api_message_id: str | None = None,
    ) -> None:
        """The end of one model call: a step-finish part, ``UsageReported`` (when ``usage`` is
        given) and its ``ApiCall``."""
        part = StepFinishPart(
            id=self._parts.next(now),
            message_id=message_id,
            reason=reason,
            usage=usage or Usage(),
            cost=cost,
        )
        self._part(part, now)
        model = model or self.model
        if usage is not None:
            self._add(
                UsageReported(
                    session_id=self._session_id,
                    time_ms=now,
                    message_id=message_id,
                    usage=usage,
                    model=model,
                )
            )
        self._calls.append(
            ApiCall(
                message_id=message_id,
                api_message_id=api_message_id or message_id,
                model=model.model_id if model else "",
                usage=usage or Usage(),
                line=line,
                time_ms=now,
            )
        )

    def finish(
        self,
        message_id: str,
        *,
        now: int,
        finish: str,
        usage: Usage | None = None,
        cost: float = 0.0,
        error: MessageError | None = None,
    ) -> None:
        """``AssistantFinished`` for ``message_id``."""
        self._add(
            AssistantFinished(
                session_id=self._session_id,
                time_ms=now,
                message_id=message_id,
                finish=finish,
                usage=usage or Usage(),
                cost=cost,
                error=error,
            )
        )

    def result(
        self,
        call_id: str,
        output: str,
        *,
        now: int,
        line: int = 0,
        error: bool = False,
        interrupted: bool = False,
        attachments: Sequence[Attachment] = (),
        title: str = "",
        metadata: dict[str, Any] | None = None,
        started_ms: int | None = None,
        field: str = "",
    ) -> bool:
        """Complete (or fail) the pending call ``call_id``; when there is none, record the
        result as left out (at ``line`` and ``field``) and return False."""
        call = self._pending.pop(call_id, None)
        if call is None:
            self.leave_out(line, "orphan_tool_result", ORPHAN_RESULT, field)
            return False
        start = call.started_ms if started_ms is None else started_ms
        state: ToolCompleted | ToolErrored
        if error or interrupted:
            state = ToolErrored(
                input=call.input,
                error=output,
                metadata=metadata or {},
                interrupted=interrupted,
                started_ms=start,
                ended_ms=now,
            )
        else:
            files = tuple(self._file(a, call.message_id, now) for a in attachments)
            state = ToolCompleted(
                input=call.input,
                output=output,
                title=title,
                metadata=metadata or {},
                attachments=files,
                started_ms=start,
                ended_ms=now,
            )
        self._add(
            ToolStateChanged(
                session_id=self._session_id,
                time_ms=now,
                message_id=call.message_id,
                part_id=call.part_id,
                state=state,
            )
        )
        return True

    # --- compaction -----------------------------------------------------------------------

    def compaction_requested(self, *, now: int, auto: bool, overflow: bool = False) -> str:
        """A compaction request (a user message holding the compaction part); returns its id.
        Its head is every message since the previous compaction."""
        message_id = self._messages.next(now)
        self._add(
            CompactionRequested(
                session_id=self._session_id,
                time_ms=now,
                message_id=message_id,
                part_id=self._parts.next(now),
                auto=auto,
                overflow=overflow,
                trigger="overflow" if overflow else ("auto" if auto else "manual"),
            )
        )
        self._message_ids.append(message_id)
        self._last_user = message_id
        return message_id

    def compaction_completed(
        self, request_id: str, summary_id: str, summary: str, *, now: int
    ) -> None:
        """Complete the compaction ``request_id`` with the (finished) summary message: no
        verbatim tail is kept, the summary replaces everything before the request."""
        index = self._message_ids.index(request_id)
        head = self._message_ids[self._head_start : index]
        self._head_start = self._message_ids.index(summary_id) + 1
        projection = CompactionProjection(
            summary=summary,
            head_first_id=head[0] if head else None,
            head_last_id=head[-1] if head else None,
            template=self.fmt,
        )
        self._add(
            CompactionCompleted(
                session_id=self._session_id,
                time_ms=now,
                request_message_id=request_id,
                summary_message_id=summary_id,
                tail_start_id=None,
                projection=projection,
            )
        )

    def compaction(
        self,
        *,
        now: int,
        summary: str,
        auto: bool = True,
        overflow: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """A whole compaction whose summary the input gives (no model call of its own: it is
        no ``ApiCall``); returns the summary message's id."""
        request_id = self.compaction_requested(now=now, auto=auto, overflow=overflow)
        summary_id = self.open_assistant(now=now, summary_of=request_id, agent=COMPACTION_AGENT)
        self.add_item(summary_id, Text(summary, metadata or {}), now)
        self.finish(summary_id, now=now, finish="stop")
        self.compaction_completed(request_id, summary_id, summary, now=now)
        return summary_id

    # --- the result -----------------------------------------------------------------------

    def build(
        self, session_ids: IdGenerator | None = None, *, derived_id: str | None = None
    ) -> ImportedSession:
        """The finished session; calls never answered stay pending. The session id is the one
        asked for, else ``derived_id``, else derived from the builder's ``key``, else
        generated by ``session_ids`` (a new generator by default)."""
        first = self._events.first_ms
        start = self.started_ms
        if start is None:
            start = first if first is not None else (self._start_ms or SYNTHETIC_START_MS)
        if self.requested_id:
            session_id = self.requested_id
        elif derived_id is not None:
            session_id = derived_id
        elif self.key is not None:
            session_id = derived_session_id(start, self.key)
        else:
            session_id = (session_ids or IdGenerator("ses")).next(start)
        held, streamed = self._events.close(session_id)
        events = [msgspec.structs.replace(e, session_id=session_id) for e in held]
        started = SessionStarted(
            session_id=session_id,
            time_ms=start,
            title=self.title,
            model=self.model,
            agent=self.agent,
            parent_session_id=self.parent_session_id,
            config=self.config,
        )
        return ImportedSession(
            session_id=session_id,
            events=[started, *events],
            calls=self._calls,
            skipped=dict(sorted(self.skipped.items())),
            source_session_id=self.source_session_id,
            parent_call_id=self.parent_call_id,
            read=dict(sorted(self.read.items())),
            left_out=sorted(self.left_out, key=lambda item: item.line),
            streamed=streamed,
        )

    # --- building blocks ------------------------------------------------------------------

    def _message(
        self,
        role: str,
        *,
        now: int,
        synthetic: bool = False,
        parent_id: str | None = None,
        model: ModelRef | None = None,
        summary: bool = False,
        agent: str | None = None,
    ) -> str:
        message_id = self._messages.next(now)
        self._add(
            MessageAdded(
                session_id=self._session_id,
                time_ms=now,
                message_id=message_id,
                role="user" if role == "user" else "assistant",
                parent_id=parent_id,
                agent=agent or self.agent,
                model=model,
                summary=summary,
                synthetic=synthetic,
            )
        )
        self._message_ids.append(message_id)
        return message_id

    def _tool_part(self, message_id: str, call: ToolCall, now: int, line: int) -> int:
        if call.call_id in self._pending:
            self.leave_out(call.line or line, "duplicate_tool_call", DUPLICATE_CALL, call.field)
            return 0
        part_id = self._parts.next(now)
        self._pending[call.call_id] = _Pending(message_id, part_id, call.tool, call.input, now)
        part = ToolPart(
            id=part_id,
            message_id=message_id,
            call_id=self._unique_call_id(call.call_id),
            tool=call.tool,
            state=ToolPending(input=call.input),
            provider_executed=call.provider_executed,
            metadata=call.metadata,
        )
        self._part(part, now)
        return 1

    def _unique_call_id(self, call_id: str) -> str:
        """``call_id``, or, when an earlier (answered) call used it, ``<call_id>~<n>``."""
        unique, n = call_id, 1
        while unique in self._used_call_ids:
            n += 1
            unique = f"{call_id}~{n}"
        if n > 1:
            self.skipped["renamed_call_id"] += 1
        self._used_call_ids.add(unique)
        return unique

    def _file(self, file: Attachment, message_id: str, now: int) -> FilePart:
        return FilePart(
            id=self._parts.next(now),
            message_id=message_id,
            mime=file.mime,
            url=file.url,
            filename=file.filename,
            source_path=file.source_path,
        )

    def _add(self, event: Event) -> None:
        self._events.append(event)

    def _part(self, part: Part, now: int) -> None:
        self._add(PartAdded(session_id=self._session_id, time_ms=now, part=part))
