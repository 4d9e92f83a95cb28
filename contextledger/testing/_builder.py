"""``SessionBuilder``: write a session's events in a few readable lines.

    b = SessionBuilder("ses_1")
    user = b.user("fix the failing test")
    reply = b.assistant(user)
    call = b.tool_call(reply, "bash", {"command": "pytest -x"})
    b.tool_result(call, "1 failed")
    b.finish(reply, "tool-calls")
    b.prune([call])
    events = b.events

Ids come from ``IdGenerator`` on a simulated clock that advances one second per message, so
they strictly increase; the events are valid by construction (``validate_events`` accepts
them) as long as the calls make sense (a result for a call that was made, and so on).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from contextledger.events._catalogue import (
    MAIN_AGENT,
    AssistantFinished,
    CompactionCompleted,
    CompactionProjection,
    CompactionRequested,
    CompactionRolledBack,
    EnvironmentCaptured,
    Event,
    MessageAdded,
    PartAdded,
    PartsStripped,
    PruneReason,
    RollbackReason,
    SessionStarted,
    ToolOutputCleared,
    ToolOutputTrimmed,
    ToolStateChanged,
)
from contextledger.events._ids import IdGenerator
from contextledger.events._parts import (
    CompactionTrigger,
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
    ToolRunning,
    Usage,
)
from contextledger.vocabulary._defaults import SOFT_TRIM_KEEP_CHARS

#: 2026-01-01T00:00:00Z, the default start of a built session's clock.
DEFAULT_START_MS = 1_767_225_600_000
DEFAULT_MODEL = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4")


class SessionBuilder:
    """Appends events for one session to ``events``; methods return the new ids."""

    def __init__(
        self,
        session_id: str = "ses_test",
        *,
        start_ms: int = DEFAULT_START_MS,
        model: ModelRef = DEFAULT_MODEL,
        title: str = "",
        parent_session_id: str | None = None,
        started: bool = True,
    ) -> None:
        self.session_id = session_id
        self.clock_ms = start_ms
        self.model = model
        self.events: list[Event] = []
        self._message_ids = IdGenerator("msg")
        self._part_ids = IdGenerator("prt")
        self._calls = 0
        self._tool_parts: dict[str, ToolPart] = {}
        if started:
            self.add(
                SessionStarted,
                title=title,
                model=model,
                parent_session_id=parent_session_id,
            )

    # --- plumbing -------------------------------------------------------------------------

    def add(self, event_type: type[Event], agent_id: str = MAIN_AGENT, **fields: Any) -> Event:
        """Append an event of ``event_type`` stamped with this session, agent and clock."""
        event = event_type(
            session_id=self.session_id, agent_id=agent_id, time_ms=self.clock_ms, **fields
        )
        self.events.append(event)
        return event

    def tick(self, ms: int = 1000) -> int:
        """Advance the simulated clock."""
        self.clock_ms += ms
        return self.clock_ms

    def new_message_id(self) -> str:
        """The next message id (advances the clock by a second)."""
        return self._message_ids.next(self.tick())

    def new_part_id(self) -> str:
        """The next part id."""
        return self._part_ids.next(self.clock_ms)

    def part(self, part: Part, agent_id: str = MAIN_AGENT) -> str:
        """Add ``part`` to its message; return its id."""
        self.add(PartAdded, agent_id, part=part)
        return part.id

    # --- messages -------------------------------------------------------------------------

    def user(
        self,
        text: str = "",
        *,
        agent_id: str = MAIN_AGENT,
        files: Iterable[tuple[str, str]] = (),
        environment: str | None = None,
        synthetic: bool = False,
    ) -> str:
        """A user message with ``text`` and optional ``(mime, filename)`` attachments."""
        message_id = self.new_message_id()
        self.add(
            MessageAdded,
            agent_id,
            message_id=message_id,
            role="user",
            agent=agent_id,
            model=self.model,
            synthetic=synthetic,
        )
        if text:
            self.text(message_id, text, agent_id=agent_id)
        for mime, filename in files:
            self.part(
                FilePart(
                    id=self.new_part_id(),
                    message_id=message_id,
                    mime=mime,
                    url=f"data:{mime};base64,AAAA",
                    filename=filename,
                ),
                agent_id,
            )
        if environment is not None:
            self.add(EnvironmentCaptured, agent_id, user_message_id=message_id, text=environment)
        return message_id

    def assistant(
        self,
        parent_id: str,
        *,
        agent_id: str = MAIN_AGENT,
        model: ModelRef | None = None,
        summary: bool = False,
        step_start: bool = True,
    ) -> str:
        """An assistant message answering ``parent_id``, opened with a step-start part."""
        message_id = self.new_message_id()
        self.add(
            MessageAdded,
            agent_id,
            message_id=message_id,
            role="assistant",
            parent_id=parent_id,
            agent=agent_id,
            model=model or self.model,
            summary=summary,
        )
        if step_start:
            self.part(StepStartPart(id=self.new_part_id(), message_id=message_id), agent_id)
        return message_id

    def text(self, message_id: str, text: str, *, agent_id: str = MAIN_AGENT, **flags: Any) -> str:
        """A text part (``synthetic=``, ``ignored=``, ``metadata=`` pass through)."""
        return self.part(
            TextPart(id=self.new_part_id(), message_id=message_id, text=text, **flags), agent_id
        )

    def reasoning(
        self,
        message_id: str,
        text: str,
        *,
        signature: str | None = None,
        agent_id: str = MAIN_AGENT,
    ) -> str:
        """A reasoning part, signed like Anthropic's when ``signature`` is given."""
        metadata = {"anthropic": {"signature": signature}} if signature else {}
        return self.part(
            ReasoningPart(
                id=self.new_part_id(), message_id=message_id, text=text, metadata=metadata
            ),
            agent_id,
        )

    def finish(
        self,
        message_id: str,
        finish: str = "stop",
        *,
        usage: Usage | None = None,
        error: MessageError | None = None,
        agent_id: str = MAIN_AGENT,
    ) -> None:
        """End an assistant message, with a step-finish part carrying ``usage``."""
        usage = usage or Usage()
        self.part(
            StepFinishPart(
                id=self.new_part_id(), message_id=message_id, reason=finish, usage=usage
            ),
            agent_id,
        )
        self.add(
            AssistantFinished,
            agent_id,
            message_id=message_id,
            finish=finish,
            usage=usage,
            error=error,
        )

    # --- tools ----------------------------------------------------------------------------

    def tool_call(
        self,
        message_id: str,
        tool: str,
        tool_input: dict[str, Any] | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        agent_id: str = MAIN_AGENT,
    ) -> str:
        """The model's call of ``tool`` (pending); returns the tool part's id."""
        self._calls += 1
        part = ToolPart(
            id=self.new_part_id(),
            message_id=message_id,
            call_id=f"call_{self._calls:04d}",
            tool=tool,
            state=ToolPending(input=tool_input or {}),
            metadata=metadata or {},
        )
        self._tool_parts[part.id] = part
        return self.part(part, agent_id)

    def tool_running(self, part_id: str, *, agent_id: str = MAIN_AGENT) -> None:
        """The call started."""
        part = self._tool_parts[part_id]
        self.add(
            ToolStateChanged,
            agent_id,
            message_id=part.message_id,
            part_id=part_id,
            state=ToolRunning(input=part.state.input, started_ms=self.clock_ms),
        )

    def tool_result(
        self,
        part_id: str,
        output: str,
        *,
        attachments: Iterable[tuple[str, str | None]] = (),
        title: str = "",
        running: bool = True,
        agent_id: str = MAIN_AGENT,
    ) -> None:
        """The call completed with ``output`` and optional ``(mime, filename)`` media
        attachments (marked running first unless ``running=False``)."""
        if running:
            self.tool_running(part_id, agent_id=agent_id)
        part = self._tool_parts[part_id]
        files = tuple(
            FilePart(
                id=self.new_part_id(),
                message_id=part.message_id,
                mime=mime,
                url=f"data:{mime};base64,AAAA",
                filename=filename,
            )
            for mime, filename in attachments
        )
        self.add(
            ToolStateChanged,
            agent_id,
            message_id=part.message_id,
            part_id=part_id,
            state=ToolCompleted(
                input=part.state.input,
                output=output,
                title=title,
                attachments=files,
                started_ms=self.clock_ms,
                ended_ms=self.tick(10),
            ),
        )

    def tool_error(
        self,
        part_id: str,
        error: str,
        *,
        partial_output: str | None = None,
        running: bool = True,
        agent_id: str = MAIN_AGENT,
    ) -> None:
        """The call failed; with ``partial_output`` it counts as interrupted mid-way."""
        if running:
            self.tool_running(part_id, agent_id=agent_id)
        part = self._tool_parts[part_id]
        self.add(
            ToolStateChanged,
            agent_id,
            message_id=part.message_id,
            part_id=part_id,
            state=ToolErrored(
                input=part.state.input,
                error=error,
                interrupted=partial_output is not None,
                partial_output=partial_output,
                started_ms=self.clock_ms,
                ended_ms=self.tick(10),
            ),
        )

    def prune(self, part_ids: Iterable[str], reason: PruneReason = "normal") -> None:
        """Clear these tool outputs (a prune)."""
        self.add(ToolOutputCleared, part_ids=tuple(part_ids), reason=reason)

    def trim(
        self,
        part_id: str,
        head_chars: int = SOFT_TRIM_KEEP_CHARS,
        tail_chars: int = SOFT_TRIM_KEEP_CHARS,
    ) -> None:
        """Soft-trim a tool output to its head and tail."""
        self.add(ToolOutputTrimmed, part_id=part_id, head_chars=head_chars, tail_chars=tail_chars)

    def strip(self, part_ids: Iterable[str], reason: PruneReason = "pressure") -> None:
        """Strip these file or reasoning parts from the view (they stay in the log)."""
        self.add(PartsStripped, part_ids=tuple(part_ids), reason=reason)

    # --- compaction -----------------------------------------------------------------------

    def request_compaction(
        self,
        *,
        trigger: CompactionTrigger = "auto",
        parent_id: str | None = None,
        agent_id: str = MAIN_AGENT,
    ) -> str:
        """A compaction request (a user message with a compaction part); returns its id."""
        message_id = self.new_message_id()
        self.add(
            CompactionRequested,
            agent_id,
            message_id=message_id,
            part_id=self.new_part_id(),
            auto=trigger != "manual",
            overflow=trigger == "overflow",
            trigger=trigger,
            parent_id=parent_id,
        )
        return message_id

    def summary(self, request_id: str, text: str, *, agent_id: str = MAIN_AGENT) -> str:
        """The summary message answering ``request_id``, finished."""
        message_id = self.assistant(request_id, summary=True, agent_id=agent_id, step_start=False)
        self.text(message_id, text, agent_id=agent_id)
        self.add(AssistantFinished, agent_id, message_id=message_id, finish="stop")
        return message_id

    def complete_compaction(
        self,
        request_id: str,
        summary_id: str,
        tail_start_id: str | None,
        summary: str = "",
        *,
        agent_id: str = MAIN_AGENT,
    ) -> None:
        """Mark the compaction done, keeping the tail from ``tail_start_id``."""
        self.add(
            CompactionCompleted,
            agent_id,
            request_message_id=request_id,
            summary_message_id=summary_id,
            tail_start_id=tail_start_id,
            projection=CompactionProjection(summary=summary),
        )

    def compact(self, summary: str, tail_start_id: str | None = None, **kw: Any) -> str:
        """Request, summarise and complete a compaction in one go (in ``agent_id``'s slice);
        returns the request id."""
        agent_id = kw.get("agent_id", MAIN_AGENT)
        request_id = self.request_compaction(**kw)
        summary_id = self.summary(request_id, summary, agent_id=agent_id)
        self.complete_compaction(request_id, summary_id, tail_start_id, summary, agent_id=agent_id)
        return request_id

    def roll_back(self, request_id: str, reason: RollbackReason = "empty") -> None:
        """Undo a compaction attempt."""
        self.add(CompactionRolledBack, request_message_id=request_id, reason=reason)
