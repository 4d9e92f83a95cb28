"""The ``Session`` actor: the only writer of one session's events.

It owns the session's ``SessionLog`` (stream and projection) and handles its commands one at
a time, so every write is validated against everything written before it. Other actors (the
compactor writing a summary, the pruner) write through it too: ``SessionWriter`` is the
``EventLog`` they are given, and its appends are commands in this mailbox, so a compaction
never blocks the session and never races its writes. Message and part ids are issued here
only, when a command is handled (``AppendNew``), never by a task that queues a batch behind
others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from contextledger.actors._commands import Append, AppendNew, Seq
from contextledger.actors._mailbox import Mailbox
from contextledger.events._catalogue import Event, RecordedEvent
from contextledger.events._parts import ModelRef
from contextledger.history._projection import History
from contextledger.ledger import Compose, NewIds, SessionLog
from contextledger.request._recording import (
    AddText,
    AddUser,
    AssistantStep,
    CallTool,
    Finish,
    ReadResult,
    Recorder,
    StartAssistant,
    StartStep,
    ToolResult,
)

Clock = Callable[[], int]


class Session:
    """One session's actor. ``run`` serves its mailbox until it is closed."""

    def __init__(
        self, log: SessionLog, clock: Clock, *, default_model: ModelRef | None = None
    ) -> None:
        self.log = log
        self.mailbox: Mailbox[Any] = Mailbox()
        self._recorder = Recorder(log, clock, default_model=default_model)
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
            case AppendNew(compose=compose):
                return await self._append(compose(NewIds(self.log.history)))
            case AddUser() | StartAssistant() | StartStep() | AddText() | CallTool() | ToolResult():
                return await self._recorder.record(command)
            case ReadResult() | Finish() | AssistantStep():
                return await self._recorder.record(command)
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

    async def append_new(self, compose: Compose) -> list[RecordedEvent]:
        """Append the batch ``compose`` makes when the session comes to it, with ids the
        session issues then (``EventLog.append_new``)."""
        recorded: list[RecordedEvent] = await self._session.mailbox.ask(AppendNew(compose=compose))
        return recorded
