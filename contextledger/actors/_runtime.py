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
from functools import partial
from typing import Any

import msgspec
import structlog
import trio

from contextledger.actors._api import SessionApi
from contextledger.actors._commands import Seq
from contextledger.actors._session import Session, SessionWriter
from contextledger.actors._workers import (
    Build,
    Compact,
    CompactIfDue,
    CompactorActor,
    Prune,
    PrunerActor,
    RequestBuilderActor,
)
from contextledger.compaction._compactor import (
    CompactionResult,
    compact_while_due,
)
from contextledger.compaction._summarizers import ExtractiveSummarizer, Summarizer
from contextledger.config import Config
from contextledger.events._catalogue import MAIN_AGENT, CompactionRolledBack, SessionStarted
from contextledger.events._parts import CompactionTrigger, ModelRef
from contextledger.history._projection import History
from contextledger.history._view import ViewOptions, model_view
from contextledger.ledger import SessionLog
from contextledger.policy._decisions import CompactionReason, DecisionViews, compaction_due
from contextledger.policy._prune import Plan
from contextledger.policy._transform import load_transform
from contextledger.providers._registry import wire_format
from contextledger.request._builder import BuiltRequest, RequestInputs, system_for
from contextledger.request._instructions import InstructionFile
from contextledger.request._recording import (
    InvalidCommand,
    RecordingCommand,
    as_tuple,
    checked,
)
from contextledger.store._protocol import EventStore
from contextledger.vocabulary._messages import ModelMessage
from contextledger.vocabulary._models import Model

_DEFAULT_CONFIG = Config()
#: The rollback detail of a compaction found open when its session loads.
INTERRUPTED_DETAIL = "interrupted: the compaction was still open when the session loaded"


class RuntimeClosed(trio.ClosedResourceError):
    """A session was asked for after its runtime closed (the ``Runtime.open`` block exited
    or is exiting); nothing was written."""


def wall_clock_ms() -> int:
    """Milliseconds since the epoch (the shell's clock; the core never reads one)."""
    return time.time_ns() // 1_000_000


class ReadView(msgspec.Struct, frozen=True, kw_only=True):
    """The arguments of ``SessionHandle.view``, type-checked before reading."""

    model: ModelRef | None
    agent_id: str | None


class _OpenArguments(msgspec.Struct, frozen=True, kw_only=True):
    """The arguments of ``Runtime.open`` that have a declared type, checked before anything
    starts."""

    model: Model
    config: Config
    idle_seconds: float


def _check_open(
    store: object,
    model: object,
    config: object,
    summarizer: object,
    clock: object,
    idle_seconds: object,
) -> None:
    """Raise ``InvalidCommand`` for an argument of ``Runtime.open`` that cannot work: a
    wrongly typed model, config or idle time (or one not above 0), a store without the
    ``EventStore`` methods, a summarizer without ``summarize``, a clock that is not callable."""
    command = "Runtime.open"
    try:
        checked(_OpenArguments(model=model, config=config, idle_seconds=idle_seconds))  # type: ignore[arg-type]
    except InvalidCommand as exc:
        raise InvalidCommand(command, exc.field, exc.reason) from None
    if not idle_seconds > 0:  # type: ignore[operator]
        raise InvalidCommand(command, "idle_seconds", f"expected more than 0, got {idle_seconds}")
    if not all(callable(getattr(store, name, None)) for name in ("append", "read", "streams")):
        reason = f"expected an EventStore, got {type(store).__name__}"
        raise InvalidCommand(command, "store", reason)
    if summarizer is not None and not callable(getattr(summarizer, "summarize", None)):
        reason = f"expected a Summarizer, got {type(summarizer).__name__}"
        raise InvalidCommand(command, "summarizer", reason)
    if not callable(clock):
        raise InvalidCommand(command, "clock", f"expected a callable, got {type(clock).__name__}")


class _Actors:
    """A running session's actors, the live views its decisions read, and the scope that
    stops them."""

    def __init__(
        self,
        session: Session,
        builder: RequestBuilderActor,
        compactor: CompactorActor,
        pruner: PrunerActor,
        views: DecisionViews,
    ) -> None:
        self.session = session
        self.views = views
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
        self._closed = False
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
        """A runtime on ``store`` for ``model``; every actor stops when the block exits.
        Raises ``InvalidCommand`` for a wrongly typed argument, ``UnknownWireFormat`` for an
        unknown ``wire``."""
        _check_open(store, model, config, summarizer, clock, idle_seconds)
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
        (a compaction in progress completes or rolls back). Any later call raises
        ``RuntimeClosed``."""
        self._closed = True
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
        the store has none of its events) as needed. Raises ``InvalidCommand`` for a
        ``session_id`` that is not a non-empty text (``InvalidEvent`` for a wrongly typed
        ``title``), ``RuntimeClosed`` once the runtime is closing; nothing is written."""
        _check_session_id("session", session_id)
        while session_id not in self._running:
            if self._closed:
                raise RuntimeClosed(f"the runtime is closed: no session {session_id!r} now")
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
        names it as the parent), in id order. Raises ``InvalidCommand`` for a ``session_id``
        that is not a non-empty text."""
        _check_session_id("children", session_id)
        found: list[str] = []
        for stream in sorted(await self.store.streams()):
            started = await self._started(stream)
            if started is not None and started.parent_session_id == session_id:
                found.append(stream)
        return found

    async def _started(self, session_id: str) -> SessionStarted | None:
        """The ``SessionStarted`` of ``session_id`` in the store, None when it has none."""
        first = await self.store.read(session_id, 1, 1)
        event = first[0].event if first else None
        return event if isinstance(event, SessionStarted) else None

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
            RequestBuilderActor(
                writer, lambda: wire_format(self.wire), self.model, self.config, self.clock
            ),
            CompactorActor(writer, self.summarizer, self.model, self.config, self.clock),
            PrunerActor(writer, self.model, self.config, self.clock),
            DecisionViews(self.config),
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


def _check_session_id(command: str, session_id: object) -> None:
    """Raise ``InvalidCommand`` unless ``session_id`` is a non-empty text."""
    if type(session_id) is not str or not session_id:
        reason = f"expected a non-empty str, got {session_id!r}"
        raise InvalidCommand(command, "session_id", reason)


class SessionHandle(SessionApi):
    """One session, as the embedding application sees it: recording (``add_user``,
    ``start_assistant``, ``add_text``, ``call_tool``, ``record_tool_result``,
    ``record_read_result``, ``finish``, ``record_assistant``, and the paging tool's
    ``answer_paging_call`` and ``read_tool_output``, from ``SessionApi``), requests,
    compaction, pruning and reading. Methods are safe to call from several tasks: the
    session serialises them."""

    def __init__(self, runtime: Runtime, session_id: str) -> None:
        self.runtime = runtime
        self.session_id = session_id

    async def _record(self, command: RecordingCommand) -> Any:
        return await self.runtime.ask(self.session_id, "session", command)

    async def _turn_ended(self, agent_id: str) -> list[Plan]:
        plans: list[Plan] = await self.runtime.ask(
            self.session_id, "pruner", Prune(agent_id=agent_id)
        )
        return plans

    # --- recording ----------------------------------------------------------------------------

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
        raise ``CompactionExhausted`` after. Raises ``InvalidCommand`` (nothing written)
        for wrongly typed arguments."""
        runtime = self.runtime
        command = checked(
            Build(
                inputs=inputs,
                memory=memory,
                instructions=as_tuple(instructions),
                agent_id=agent_id,
            )
        )
        inputs, agent_id = command.inputs, command.agent_id

        def due_on(actors: _Actors) -> CompactionReason | None:
            history = actors.session.history
            return compaction_due(
                history,
                runtime.model,
                runtime.config,
                agent_id=agent_id,
                system=system_for(history, inputs.segments),
                tools=inputs.tools,
                view=actors.views.of(agent_id),
                now_ms=runtime.clock(),
            )

        async def due() -> CompactionReason | None:
            # This caller's earlier commands are applied (each was answered); others' may
            # still be queued, and the builder, behind them, sees them anyway.
            return due_on(await runtime._actors(self.session_id))

        async def run() -> CompactionResult | None:
            # Checked again when the compactor comes to it if the session went on meanwhile
            # (the compactions queued before it, a manual one say, may have made room), on
            # the actors that run it: never through the runtime, which may be retiring them.
            actors = await runtime._actors(self.session_id)
            command = CompactIfDue(
                due=partial(due_on, actors), seq=actors.session.history.seq, agent_id=agent_id
            )
            result: CompactionResult | None = await runtime.ask(
                self.session_id, "compactor", command
            )
            return result

        await compact_while_due(due, run, max_attempts=runtime.config.compaction.max_attempts)
        built: BuiltRequest = await runtime.ask(self.session_id, "builder", command)
        return built

    async def compact(
        self, *, trigger: CompactionTrigger = "manual", agent_id: str = MAIN_AGENT
    ) -> CompactionResult:
        """Compact the agent's slice now (the session keeps taking commands meanwhile)."""
        command = checked(Compact(trigger=trigger, agent_id=agent_id))
        result: CompactionResult = await self.runtime.ask(self.session_id, "compactor", command)
        return result

    async def prune(self, *, agent_id: str = MAIN_AGENT) -> list[Plan]:
        """Prune the agent's slice now, by the configured mode (even if the after-turn prune
        is off)."""
        command = checked(Prune(agent_id=agent_id, force=True))
        plans: list[Plan] = await self.runtime.ask(self.session_id, "pruner", command)
        return plans

    # --- reading --------------------------------------------------------------------------------

    async def history(self) -> History:
        """The projection (read it, do not change it)."""
        return await self.runtime.history(self.session_id)

    async def view(
        self, *, model: ModelRef | None = None, agent_id: str | None = None
    ) -> list[ModelMessage]:
        """What the model is sent: the model view of the session (or one agent's slice).
        Raises ``InvalidCommand`` for a wrongly typed argument."""
        command = checked(ReadView(model=model, agent_id=agent_id))
        history = await self.history()
        options = msgspec.structs.replace(
            ViewOptions.from_config(self.runtime.config, command.model), agent_id=command.agent_id
        )
        return model_view(history, options)

    async def start_subtask(self, session_id: str, *, title: str = "") -> SessionHandle:
        """A child session for a subtask, linked to this one (its ``SessionStarted`` names
        this session as the parent); it has its own log, view and compactions. A child
        started before is taken up again; a session that exists but is no child of this one
        raises ``InvalidCommand``, nothing written."""
        if type(session_id) is str and session_id:
            started = await self.runtime._started(session_id)
            if started is not None and started.parent_session_id != self.session_id:
                reason = f"{session_id!r} exists and is no subtask of {self.session_id!r}"
                raise InvalidCommand("start_subtask", "session_id", reason)
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
