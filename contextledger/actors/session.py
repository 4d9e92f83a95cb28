"""The ``Session`` actor: the only writer of one session's events.

It owns the session's ``SessionLog`` (stream and projection) and handles its commands one at
a time, so every write is validated against everything written before it. Other actors (the
compactor writing a summary, the pruner) write through it too: ``SessionWriter`` is the
``EventLog`` they are given, and its appends are commands in this mailbox, so a compaction
never blocks the session and never races its writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from contextledger.actors.commands import (
    AddText,
    AddUser,
    Append,
    CallTool,
    Finish,
    Seq,
    StartAssistant,
    StartStep,
    ToolResult,
)
from contextledger.actors.mailbox import Mailbox
from contextledger.events.catalogue import (
    AssistantFinished,
    Event,
    MessageAdded,
    PartAdded,
    RecordedEvent,
    ToolStateChanged,
)
from contextledger.events.ids import IdGenerator
from contextledger.events.parts import (
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
from contextledger.history.projection import History
from contextledger.ledger import SessionLog
from contextledger.request.turn import user_message_events

Clock = Callable[[], int]


class Session:
    """One session's actor. ``run`` serves its mailbox until it is closed."""

    def __init__(
        self, log: SessionLog, clock: Clock, *, default_model: ModelRef | None = None
    ) -> None:
        self.log = log
        self.mailbox: Mailbox[Any] = Mailbox()
        self._clock = clock
        self._model = default_model
        self._message_id = ""
        self._part_id = ""
        self._logger = structlog.get_logger(__name__).bind(
            actor="session", session_id=log.session_id
        )

    @property
    def session_id(self) -> str:
        """The session this actor writes."""
        return self.log.session_id

    @property
    def history(self) -> History:
        """The projection, current as of the last command handled (read-only for others)."""
        return self.log.history

    async def run(self) -> None:
        """Serve commands until the mailbox closes."""
        await self.mailbox.serve(self._handle)

    # --- commands -------------------------------------------------------------------------------

    async def _handle(self, command: Any) -> Any:
        match command:
            case Append(events=events):
                return await self._append(events)  # the recorded events
            case AddUser():
                return await self._add_user(command)
            case StartAssistant():
                return await self._start_assistant(command)
            case StartStep(message_id=message_id, agent_id=agent_id):
                return await self._part(
                    StepStartPart(id=self._new_part(), message_id=message_id), agent_id
                )
            case AddText():
                return await self._add_text(command)
            case CallTool():
                return await self._call_tool(command)
            case ToolResult():
                return await self._tool_result(command)
            case Finish():
                return await self._finish(command)
            case Seq():
                return self.log.history.seq
        raise TypeError(f"the session actor has no command {type(command).__name__}")

    async def _append(self, events: Sequence[Event]) -> list[RecordedEvent]:
        recorded = await self.log.append(events)
        if recorded:
            self._logger.debug(
                "appended",
                agent_id=recorded[0].event.agent_id,
                seq=recorded[-1].seq,
                events=len(recorded),
            )
        return recorded

    async def _write(self, events: Sequence[Event]) -> int:
        """Append ``events``; the new seq."""
        await self._append(events)
        return self.log.history.seq

    def _stamp(self, agent_id: str) -> dict[str, Any]:
        return {"session_id": self.session_id, "agent_id": agent_id, "time_ms": self._clock()}

    def _new_message(self) -> str:
        messages = self.log.history.messages
        last = max(self._message_id, messages[-1].id if messages else "")
        self._message_id = IdGenerator("msg", last or None).next(self._clock())
        return self._message_id

    def _new_part(self) -> str:
        last = max(self._part_id, self.log.history.index.last_part_id)
        self._part_id = IdGenerator("prt", last or None).next(self._clock())
        return self._part_id

    async def _part(self, part: Part, agent_id: str) -> str:
        await self._write([PartAdded(part=part, **self._stamp(agent_id))])
        return part.id

    async def _add_user(self, command: AddUser) -> str:
        message_id = self._new_message()
        events = user_message_events(
            self.log.history,
            message_id=message_id,
            new_part_id=self._new_part,
            text=command.text,
            agent=command.agent,
            model=command.model
            or self._model
            or ModelRef(provider_id="unknown", model_id="unknown"),
            agent_id=command.agent_id,
            files=command.files,
            editor=command.editor,
            plan_path=command.plan_path,
            plan_exists=command.plan_exists,
            time_ms=self._clock(),
        )
        await self._write(events)
        return message_id

    async def _start_assistant(self, command: StartAssistant) -> str:
        message_id = self._new_message()
        stamp = self._stamp(command.agent_id)
        await self._write(
            [
                MessageAdded(
                    message_id=message_id,
                    role="assistant",
                    parent_id=command.parent_id,
                    agent=command.agent,
                    model=command.model or self._model,
                    **stamp,
                ),
                PartAdded(part=StepStartPart(id=self._new_part(), message_id=message_id), **stamp),
            ]
        )
        return message_id

    async def _add_text(self, command: AddText) -> str:
        part_id = self._new_part()
        part: Part
        if command.reasoning:
            part = ReasoningPart(
                id=part_id,
                message_id=command.message_id,
                text=command.text,
                metadata=command.metadata,
            )
        else:
            part = TextPart(
                id=part_id,
                message_id=command.message_id,
                text=command.text,
                metadata=command.metadata,
            )
        return await self._part(part, command.agent_id)

    async def _call_tool(self, command: CallTool) -> str:
        part_id = self._new_part()
        part = ToolPart(
            id=part_id,
            message_id=command.message_id,
            call_id=command.call_id or f"call_{part_id.removeprefix('prt_')}",
            tool=command.tool,
            state=ToolPending(input=command.input),
        )
        return await self._part(part, command.agent_id)

    async def _tool_result(self, command: ToolResult) -> int:
        part = self.log.history.part(command.part_id)
        if not isinstance(part, ToolPart):
            raise ValueError(f"part {command.part_id!r} is not a tool call")
        now = self._clock()
        started = getattr(part.state, "started_ms", None) or now
        state: ToolCompleted | ToolErrored
        if command.error:
            state = ToolErrored(
                input=part.state.input, error=command.output, started_ms=started, ended_ms=now
            )
        else:
            state = ToolCompleted(
                input=part.state.input, output=command.output, started_ms=started, ended_ms=now
            )
        return await self._write(
            [
                ToolStateChanged(
                    message_id=part.message_id,
                    part_id=part.id,
                    state=state,
                    **self._stamp(command.agent_id),
                )
            ]
        )

    async def _finish(self, command: Finish) -> int:
        stamp = self._stamp(command.agent_id)
        usage = command.usage
        events: list[Event] = []
        if usage is not None:
            events.append(
                PartAdded(
                    part=StepFinishPart(
                        id=self._new_part(),
                        message_id=command.message_id,
                        reason=command.finish,
                        usage=usage,
                    ),
                    **stamp,
                )
            )
        events.append(
            AssistantFinished(
                message_id=command.message_id,
                finish=command.finish,
                usage=usage or Usage(),
                error=command.error,
                **stamp,
            )
        )
        return await self._write(events)


class SessionWriter:
    """The ``EventLog`` other actors write a session through: reads go to the session's
    projection, appends are ``Append`` commands in its mailbox."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @property
    def session_id(self) -> str:
        return self._session.session_id

    @property
    def history(self) -> History:
        return self._session.history

    async def append(self, events: Sequence[Event]) -> list[RecordedEvent]:
        """Append ``events`` as one batch through the session; return them as recorded
        (the projection holds them once this returns)."""
        recorded: list[RecordedEvent] = await self._session.mailbox.ask(
            Append(events=tuple(events))
        )
        return recorded
