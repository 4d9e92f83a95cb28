"""The ``Runtime``: what an embedding application holds.

One nursery supervises every actor. ``session(id)`` starts a session's actors on first use
(loading the session from the store: snapshot plus tail) and returns a ``SessionHandle``;
sessions idle for ``idle_seconds`` are retired and reloaded when next used. The handle's
methods are the embedding API: record what the user and the model did, build the next
request (compacting first when the context is full), compact or prune on demand, read the
view, replay the log.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import msgspec
import structlog
import trio

from contextledger.actors.commands import (
    AddText,
    AddUser,
    CallTool,
    Finish,
    Seq,
    StartAssistant,
    StartStep,
    ToolResult,
)
from contextledger.actors.session import Session, SessionWriter
from contextledger.actors.workers import (
    Build,
    Compact,
    CompactorActor,
    Prune,
    PrunerActor,
    RequestBuilderActor,
)
from contextledger.compaction.compactor import CompactionResult
from contextledger.compaction.summarizers import ExtractiveSummarizer, Summarizer
from contextledger.config import Config
from contextledger.events.catalogue import MAIN_AGENT, CompactionRolledBack, SessionStarted
from contextledger.events.parts import CompactionTrigger, MessageError, ModelRef, Usage
from contextledger.history.messages import ModelMessage
from contextledger.history.projection import History, Message
from contextledger.history.view import ViewOptions, model_view
from contextledger.ledger import SessionLog
from contextledger.policy.cadence import early_compaction_due, early_compaction_refused
from contextledger.policy.compaction import EXHAUSTED_DETAIL
from contextledger.policy.overflow import (
    Model,
    is_overflow,
    measure_preflight,
    preflight_enabled,
    should_compact_preflight,
)
from contextledger.policy.prune import Plan
from contextledger.policy.transform import load_transform
from contextledger.providers.errors import ProviderError
from contextledger.providers.registry import wire_format
from contextledger.request.builder import BuiltRequest, RequestInputs, system_for
from contextledger.request.context import EditorState
from contextledger.request.instructions import InstructionFile
from contextledger.store.protocol import EventStore

_DEFAULT_CONFIG = Config()
#: How the rollback of a turn's attempt past ``compaction.max_attempts`` starts.
_EXHAUSTED = EXHAUSTED_DETAIL.partition("{")[0]
#: The rollback detail of a compaction found open when its session loads.
INTERRUPTED_DETAIL = "interrupted: the compaction was still open when the session loaded"


def wall_clock_ms() -> int:
    """Milliseconds since the epoch (the shell's clock; the core never reads one)."""
    return time.time_ns() // 1_000_000


def _latest_answer(history: History, agent_id: str) -> Message | None:
    """The agent's latest assistant message that is not a summary (a summary, a rolled-back
    one included, reports no usage of the conversation)."""
    for message in reversed(history.messages):
        if message.role == "assistant" and message.agent_id == agent_id and not message.summary:
            return message
    return None


class CompactionExhausted(RuntimeError):
    """The turn is still over the window after ``compaction.max_attempts`` compactions."""


class _Actors:
    """A running session's actors and the scope that stops them."""

    def __init__(
        self,
        session: Session,
        builder: RequestBuilderActor,
        compactor: CompactorActor,
        pruner: PrunerActor,
    ) -> None:
        self.session = session
        self.builder = builder
        self.compactor = compactor
        self.pruner = pruner
        self.last_used = trio.current_time()
        self.busy = 0
        self.stopped = trio.Event()

    async def run(self) -> None:
        """Run the actors until ``close``. The workers stop first; the session serves until
        they have (shielded from cancellation), so their last writes land, a cancelled
        compaction's rollback included."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._serve_session)
                try:
                    async with trio.open_nursery() as workers:
                        for actor in (self.builder, self.compactor, self.pruner):
                            workers.start_soon(actor.run)
                finally:
                    with trio.CancelScope(shield=True):
                        await self.session.mailbox.close()
        finally:
            self.stopped.set()

    async def _serve_session(self) -> None:
        with trio.CancelScope(shield=True):
            await self.session.run()

    async def close(self) -> None:
        """Stop taking commands and wait until every command already sent is handled."""
        for actor in (self.builder, self.compactor, self.pruner):
            await actor.mailbox.close()
        await self.stopped.wait()


class Runtime:
    """Supervises the actors of every open session. Open it with ``Runtime.open``."""

    def __init__(
        self,
        nursery: trio.Nursery,
        store: EventStore,
        *,
        model: Model,
        config: Config,
        wire: str,
        summarizer: Summarizer,
        clock: Callable[[], int],
        idle_seconds: float,
    ) -> None:
        self._nursery = nursery
        self.store = store
        self.model = model
        self.config = config
        self.wire = wire
        self.summarizer = summarizer
        self.clock = clock
        self.idle_seconds = idle_seconds
        self._running: dict[str, _Actors] = {}
        #: Sessions whose actors are starting or stopping, with the event set when they are done.
        self._changing: dict[str, trio.Event] = {}
        self._logger = structlog.get_logger(__name__)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        store: EventStore,
        *,
        model: Model,
        config: Config = _DEFAULT_CONFIG,
        wire: str = "anthropic",
        summarizer: Summarizer | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        idle_seconds: float = 300.0,
    ) -> AsyncIterator[Runtime]:
        """A runtime on ``store`` for ``model``; every actor stops when the block exits."""
        wire_format(wire)  # an unknown name fails here, not at the first request
        if config.view.transform is not None:
            load_transform(config.view.transform)  # so does a transform that cannot load
        async with trio.open_nursery() as nursery:
            runtime = cls(
                nursery,
                store,
                model=model,
                config=config,
                wire=wire,
                summarizer=summarizer or ExtractiveSummarizer(),
                clock=clock,
                idle_seconds=idle_seconds,
            )
            nursery.start_soon(runtime._retire_idle)
            try:
                yield runtime
            finally:
                try:
                    await runtime.aclose()
                finally:
                    nursery.cancel_scope.cancel()

    async def aclose(self) -> None:
        """Stop every session's actors once they have handled the commands already sent
        (a compaction in progress completes or rolls back)."""
        for session_id in list(self._running):
            await self._retire(session_id)

    @property
    def running(self) -> frozenset[str]:
        """The sessions whose actors are running now."""
        return frozenset(self._running)

    async def session(
        self,
        session_id: str,
        *,
        title: str = "",
        parent_session_id: str | None = None,
    ) -> SessionHandle:
        """The handle of ``session_id``, starting its actors (and the session itself, when
        the store has none of its events) as needed."""
        while session_id not in self._running:
            waiting = self._changing.get(session_id)
            if waiting is not None:
                await waiting.wait()
                continue
            self._changing[session_id] = trio.Event()
            try:
                await self._start(session_id, title, parent_session_id)
            finally:
                self._changing.pop(session_id).set()
        return SessionHandle(self, session_id)

    async def children(self, session_id: str) -> list[str]:
        """The sessions started as subtasks of ``session_id`` (their ``SessionStarted``
        names it as the parent), in id order."""
        found: list[str] = []
        for stream in sorted(await self.store.streams()):
            first = await self.store.read(stream, 1, 1)
            event = first[0].event if first else None
            if isinstance(event, SessionStarted) and event.parent_session_id == session_id:
                found.append(stream)
        return found

    async def _start(self, session_id: str, title: str, parent: str | None) -> None:
        log = await SessionLog.open(self.store, session_id)
        ref = ModelRef(provider_id=self.model.provider_id, model_id=self.model.model_id)
        if log.history.seq == 0:
            await log.append(
                [
                    SessionStarted(
                        session_id=session_id,
                        time_ms=self.clock(),
                        title=title,
                        model=ref,
                        parent_session_id=parent,
                    )
                ]
            )
        await self._roll_back_interrupted(log)
        session = Session(log, self.clock, default_model=ref)
        writer = SessionWriter(session)
        actors = _Actors(
            session,
            RequestBuilderActor(writer, lambda: wire_format(self.wire), self.config, self.clock),
            CompactorActor(writer, self.summarizer, self.model, self.config, self.clock),
            PrunerActor(writer, self.model, self.config, self.clock),
        )
        self._running[session_id] = actors
        self._nursery.start_soon(actors.run)
        self._logger.info("session started", session_id=session_id, seq=log.history.seq)

    async def _roll_back_interrupted(self, log: SessionLog) -> None:
        """Roll back the compactions a previous runtime left open (it was killed, or
        cancelled before its rollback was written): nothing will finish them, and a
        compaction is only ever completed or rolled back."""
        history = log.history
        events = [
            CompactionRolledBack(
                session_id=log.session_id,
                agent_id=history.message(c.request_message_id).agent_id,
                time_ms=self.clock(),
                request_message_id=c.request_message_id,
                reason="cancelled",
                detail=INTERRUPTED_DETAIL,
            )
            for c in history.state.compactions.values()
            if c.status == "requested"
        ]
        if events:
            await log.append(events)
            self._logger.warning(
                "interrupted compactions rolled back",
                session_id=log.session_id,
                requests=[e.request_message_id for e in events],
            )

    async def _retire(self, session_id: str) -> None:
        actors = self._running.pop(session_id, None)
        if actors is None:
            return
        # Until the old actors have stopped, a new command waits instead of starting a second
        # writer of the same stream.
        self._changing[session_id] = trio.Event()
        try:
            await actors.close()
        finally:
            self._changing.pop(session_id).set()
        self._logger.info("session retired", session_id=session_id)

    async def _retire_idle(self) -> None:
        while True:
            await trio.sleep(self.idle_seconds / 2)
            deadline = trio.current_time() - self.idle_seconds
            for session_id, actors in list(self._running.items()):
                if actors.busy == 0 and actors.last_used < deadline:
                    await self._retire(session_id)

    async def _actors(self, session_id: str) -> _Actors:
        if session_id not in self._running:
            await self.session(session_id)
        actors = self._running[session_id]
        actors.last_used = trio.current_time()
        return actors

    async def ask(self, session_id: str, target: str, command: Any) -> Any:
        """Send ``command`` to one of a session's actors (``session``, ``builder``,
        ``compactor``, ``pruner``) and wait for the reply."""
        actors = await self._actors(session_id)
        actors.busy += 1
        try:
            return await getattr(actors, target).mailbox.ask(command)
        finally:
            actors.busy -= 1
            actors.last_used = trio.current_time()

    async def history(self, session_id: str) -> History:
        """The session's projection once every command sent before is applied."""
        await self.ask(session_id, "session", Seq())
        return self._running[session_id].session.history


class SessionHandle:
    """One session, as the embedding application sees it. Methods are safe to call from
    several tasks: the session serialises them."""

    def __init__(self, runtime: Runtime, session_id: str) -> None:
        self.runtime = runtime
        self.session_id = session_id

    async def _session(self, command: Any) -> Any:
        return await self.runtime.ask(self.session_id, "session", command)

    # --- recording ----------------------------------------------------------------------------

    async def add_user(
        self,
        text: str,
        *,
        agent: str = "build",
        agent_id: str = MAIN_AGENT,
        files: Sequence[tuple[str, str, str | None]] = (),
        editor: EditorState | None = None,
        plan_path: str | None = None,
        plan_exists: bool = False,
    ) -> str:
        """Record a user message; return its id."""
        command = AddUser(
            text=text,
            agent=agent,
            agent_id=agent_id,
            files=tuple(files),
            editor=editor,
            plan_path=plan_path,
            plan_exists=plan_exists,
        )
        message_id: str = await self._session(command)
        return message_id

    async def start_assistant(
        self, parent_id: str, *, agent: str = "build", agent_id: str = MAIN_AGENT
    ) -> str:
        """Open an assistant message answering ``parent_id`` (streamed recording)."""
        message_id: str = await self._session(
            StartAssistant(parent_id=parent_id, agent=agent, agent_id=agent_id)
        )
        return message_id

    async def start_step(self, message_id: str, *, agent_id: str = MAIN_AGENT) -> str:
        """A further model step of an assistant message."""
        part_id: str = await self._session(StartStep(message_id=message_id, agent_id=agent_id))
        return part_id

    async def add_text(
        self,
        message_id: str,
        text: str,
        *,
        reasoning: bool = False,
        metadata: dict[str, Any] | None = None,
        agent_id: str = MAIN_AGENT,
    ) -> str:
        """Text or reasoning the model wrote."""
        command = AddText(
            message_id=message_id,
            text=text,
            reasoning=reasoning,
            metadata=metadata or {},
            agent_id=agent_id,
        )
        part_id: str = await self._session(command)
        return part_id

    async def call_tool(
        self,
        message_id: str,
        tool: str,
        tool_input: dict[str, Any] | None = None,
        *,
        call_id: str | None = None,
        agent_id: str = MAIN_AGENT,
    ) -> str:
        """A tool call the model made; return its part id."""
        command = CallTool(
            message_id=message_id,
            tool=tool,
            input=tool_input or {},
            call_id=call_id,
            agent_id=agent_id,
        )
        part_id: str = await self._session(command)
        return part_id

    async def record_tool_result(
        self, part_id: str, output: str, *, error: bool = False, agent_id: str = MAIN_AGENT
    ) -> None:
        """The result (or, with ``error``, the error) of a tool call."""
        await self._session(
            ToolResult(part_id=part_id, output=output, error=error, agent_id=agent_id)
        )

    async def finish(
        self,
        message_id: str,
        *,
        finish: str = "stop",
        usage: Usage | None = None,
        error: MessageError | None = None,
        agent_id: str = MAIN_AGENT,
    ) -> list[Plan]:
        """End an assistant message. When the turn is over (not ``tool-calls``, no error),
        the after-turn prune runs; return what it did."""
        await self._session(
            Finish(
                message_id=message_id, finish=finish, usage=usage, error=error, agent_id=agent_id
            )
        )
        if finish == "tool-calls" or error is not None:
            return []
        plans: list[Plan] = await self.runtime.ask(
            self.session_id, "pruner", Prune(agent_id=agent_id)
        )
        return plans

    async def record_assistant(
        self,
        parent_id: str,
        *,
        text: str = "",
        tool_calls: Sequence[tuple[str, dict[str, Any], str]] = (),
        usage: Usage | None = None,
        agent: str = "build",
        agent_id: str = MAIN_AGENT,
    ) -> str:
        """A whole assistant step: its text, its tool calls with their outputs
        (``(tool, input, output)``), finished as ``tool-calls`` when it called any."""
        message_id = await self.start_assistant(parent_id, agent=agent, agent_id=agent_id)
        if text:
            await self.add_text(message_id, text, agent_id=agent_id)
        for tool, tool_input, output in tool_calls:
            part_id = await self.call_tool(message_id, tool, tool_input, agent_id=agent_id)
            await self.record_tool_result(part_id, output, agent_id=agent_id)
        await self.finish(
            message_id,
            finish="tool-calls" if tool_calls else "stop",
            usage=usage,
            agent_id=agent_id,
        )
        return message_id

    async def record_error(
        self, message_id: str, error: ProviderError, *, agent_id: str = MAIN_AGENT
    ) -> CompactionResult | None:
        """A model call failed: the assistant message ends with the error. A context
        overflow is answered with a compaction that replays the request."""
        await self._session(
            Finish(message_id=message_id, finish="error", error=error.error, agent_id=agent_id)
        )
        if error.error.name != "ContextOverflowError":
            return None
        return await self.compact(trigger="overflow", agent_id=agent_id)

    # --- requests, compaction, pruning ----------------------------------------------------------

    async def build_request(
        self,
        inputs: RequestInputs,
        *,
        memory: str | None = None,
        instructions: Sequence[InstructionFile] = (),
        agent_id: str = MAIN_AGENT,
    ) -> BuiltRequest:
        """The next request. When the context is full (the last reported usage reaches the
        compaction limit, preflight says so, or under ``compaction.cadence = "economic"`` the
        view has passed its economic threshold), compact first, at most
        ``compaction.max_attempts`` times per turn (per step with ``attempts_per = "step"``);
        raise ``CompactionExhausted`` after."""
        runtime = self.runtime
        for _ in range(runtime.config.compaction.max_attempts + 1):
            # This caller's earlier commands are applied (each was answered); others' may
            # still be queued, and the builder, behind them, sees them anyway.
            history = (await runtime._actors(self.session_id)).session.history
            reason = self._full(history, inputs, agent_id)
            if reason is None:
                break
            result = await self.compact(trigger="auto", agent_id=agent_id)
            if reason == "economic":
                # An early compaction is optional: whatever came of it, send.
                break
            if result.outcome == "rolled_back" and result.detail.startswith(_EXHAUSTED):
                raise CompactionExhausted(result.detail)
        command = Build(
            inputs=inputs, memory=memory, instructions=tuple(instructions), agent_id=agent_id
        )
        built: BuiltRequest = await runtime.ask(self.session_id, "builder", command)
        return built

    def _full(
        self, history: History, inputs: RequestInputs, agent_id: str
    ) -> Literal["overflow", "preflight", "economic"] | None:
        """Why the agent's slice must be compacted before the next request, None if not."""
        config = self.runtime.config
        model = self.runtime.model
        finished = _latest_answer(history, agent_id)
        if finished is not None and finished.usage is not None:
            compacted_after = any(
                c.status == "completed"
                and c.request_message_id > finished.id
                and history.message(c.request_message_id).agent_id == agent_id
                for c in history.state.compactions.values()
            )
            if not compacted_after and is_overflow(model, finished.usage, config):
                return "overflow"
        preflight = preflight_enabled(model, config)
        if not preflight and config.compaction.cadence != "economic":
            return None
        agent = None if agent_id == MAIN_AGENT else agent_id
        options = ViewOptions.from_config(config, inputs.model)
        view = model_view(history, msgspec.structs.replace(options, agent_id=agent))
        if preflight:
            system = system_for(history, inputs.segments)
            measure = measure_preflight(view, config, tools=inputs.tools, system=system)
            if should_compact_preflight(model, measure, config).compact:
                return "preflight"
        if early_compaction_due(view, model, config):
            return None if early_compaction_refused(history, agent_id) else "economic"
        return None

    async def compact(
        self, *, trigger: CompactionTrigger = "manual", agent_id: str = MAIN_AGENT
    ) -> CompactionResult:
        """Compact the agent's slice now (the session keeps taking commands meanwhile)."""
        result: CompactionResult = await self.runtime.ask(
            self.session_id, "compactor", Compact(trigger=trigger, agent_id=agent_id)
        )
        return result

    async def prune(self, *, agent_id: str = MAIN_AGENT) -> list[Plan]:
        """Prune the agent's slice now, by the configured mode (even if the after-turn prune
        is off)."""
        plans: list[Plan] = await self.runtime.ask(
            self.session_id, "pruner", Prune(agent_id=agent_id, force=True)
        )
        return plans

    # --- reading --------------------------------------------------------------------------------

    async def history(self) -> History:
        """The projection (read it, do not change it)."""
        return await self.runtime.history(self.session_id)

    async def view(
        self, *, model: ModelRef | None = None, agent_id: str | None = None
    ) -> list[ModelMessage]:
        """What the model is sent: the model view of the session (or one agent's slice)."""
        history = await self.history()
        options = msgspec.structs.replace(
            ViewOptions.from_config(self.runtime.config, model), agent_id=agent_id
        )
        return model_view(history, options)

    async def start_subtask(self, session_id: str, *, title: str = "") -> SessionHandle:
        """A child session for a subtask, linked to this one (its ``SessionStarted`` names
        this session as the parent); it has its own log, view and compactions."""
        return await self.runtime.session(
            session_id, title=title, parent_session_id=self.session_id
        )

    async def family(self) -> dict[str, History]:
        """This session's projection and those of its subtasks, recursively, by session id:
        the parent and its children read together."""
        histories = {self.session_id: await self.history()}
        for child in await self.runtime.children(self.session_id):
            histories.update(await (await self.runtime.session(child)).family())
        return histories

    async def replay(self) -> bool:
        """Rebuild the projection from the store and check it equals the live one (and so
        that every view and request built from it would be byte-identical)."""
        history = await self.history()
        rebuilt = History.rebuild(self.session_id, await self.runtime.store.read(self.session_id))
        return rebuilt == history
