"""``LocalSession``: a session recorded and managed in-process, under a strategy.

It is what the simulation replays a trace with: the runtime's session without the actors.
It records through the same ``Recorder``, decides through the strategy (whose policy
strategies call ``policy._decisions``, exactly as the runtime does), compacts with
``compaction.compact``, prunes with ``compaction._pruning.prune`` and builds with
``request._prepare.prepare_request``, in the order the runtime's ``SessionHandle`` does. So a
trace replayed through a ``Runtime`` configured as a strategy and through a ``LocalSession``
under that strategy appends the same events and sends the same requests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import trio

from contextledger.actors._api import SessionApi
from contextledger.compaction._compactor import CompactionResult, compact, compact_while_due
from contextledger.compaction._pruning import prune
from contextledger.compaction._summarizers import ExtractiveSummarizer, Summarizer
from contextledger.config import Config
from contextledger.events._catalogue import MAIN_AGENT, Event, RecordedEvent
from contextledger.events._codec import DEFAULT_CODEC
from contextledger.events._parts import CompactionTrigger, ModelRef
from contextledger.history._projection import History
from contextledger.ledger import Compose, EventLog, NewIds
from contextledger.policy._decisions import CompactionReason, DecisionViews
from contextledger.policy._overflow import usable
from contextledger.policy._prune import Plan
from contextledger.providers._base import WireFormat
from contextledger.request._builder import BuiltRequest, RequestBuilder, RequestInputs, system_for
from contextledger.request._instructions import InstructionFile
from contextledger.request._prepare import prepare_request
from contextledger.request._recording import Recorder, RecordingCommand
from contextledger.store._protocol import check_append
from contextledger.strategies._turns import Strategy
from contextledger.vocabulary._models import Model

Clock = Callable[[], int]


class LocalLog:
    """A session's log without a store, for a replay: each batch is checked, validated and
    applied exactly as ``SessionLog.append`` does it (``InvalidEvent``, nothing applied), but
    not kept. A replay reads its session only through the projection, so its memory follows
    the projection rather than the projection plus every event that made it (a tool call's
    first version, each request's record)."""

    __slots__ = ("history",)

    def __init__(self, history: History) -> None:
        self.history = history

    @property
    def session_id(self) -> str:
        """The session this log writes."""
        return self.history.session_id

    async def append(self, events: Sequence[Event]) -> list[RecordedEvent]:
        """Type-check, validate and apply ``events`` as one batch; return them recorded (the
        seq and position a store of this one session would give)."""
        history, session_id = self.history, self.session_id
        check_append(session_id, history.seq, events)
        typed = DEFAULT_CODEC.typed_copies(events)
        history.validate(typed)
        seq = history.seq
        recorded = [RecordedEvent(session_id, seq + i, seq + i, e) for i, e in enumerate(typed, 1)]
        history.apply_all(recorded)
        await trio.lowlevel.checkpoint()
        return recorded

    async def append_new(self, compose: Compose) -> list[RecordedEvent]:
        """``append`` the batch ``compose`` makes now (one task writes a ``LocalLog``)."""
        return await self.append(compose(NewIds(self.history)))


class LocalSession(SessionApi):
    """One session in ``log``, run in-process under ``strategy`` for ``model`` (see the module
    docstring). ``config`` is the caller's; the strategy's settings are applied on top."""

    def __init__(
        self,
        log: EventLog,
        strategy: Strategy,
        *,
        model: Model,
        wire: WireFormat,
        clock: Clock,
        config: Config | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.log = log
        self.strategy = strategy
        self.model = model
        self.config = strategy.configure(config or Config())
        self.wire = wire
        self.clock = clock
        self.summarizer = summarizer or ExtractiveSummarizer()
        ref = ModelRef(provider_id=model.provider_id, model_id=model.model_id)
        self._recorder = Recorder(log, clock, default_model=ref)
        self._builders: dict[str, RequestBuilder] = {}
        self._views = DecisionViews(self.config)

    async def _record(self, command: RecordingCommand) -> Any:
        return await self._recorder.record(command)

    async def _turn_ended(self, agent_id: str) -> list[Plan]:
        return await self.prune(agent_id=agent_id, force=False)

    async def history(self) -> History:
        """The projection (read it, do not change it)."""
        return self.log.history

    async def build_request(
        self,
        inputs: RequestInputs,
        *,
        memory: str | None = None,
        instructions: Sequence[InstructionFile] = (),
        agent_id: str = MAIN_AGENT,
    ) -> BuiltRequest:
        """The next request, compacting first when the strategy says so, as
        ``SessionHandle.build_request`` does (``CompactionExhausted`` past the attempts)."""

        view = self._views.of(agent_id)

        async def due() -> CompactionReason | None:
            history = self.log.history
            return self.strategy.compaction_due(
                history,
                self.model,
                self.config,
                agent_id=agent_id,
                system=system_for(history, inputs.segments),
                tools=inputs.tools,
                view=view,
                now_ms=self.clock(),
            )

        await compact_while_due(
            due,
            lambda: self.compact(trigger="auto", agent_id=agent_id),
            max_attempts=self.config.compaction.max_attempts,
        )
        builder = self._builders.get(agent_id)
        if builder is None:
            builder = self._builders[agent_id] = RequestBuilder(
                self.wire,
                self.config,
                agent_id=agent_id,
                transform=self.strategy.transform,
                usable_tokens=usable(self.model, self.config),
                model=self.model,
            )
        return await prepare_request(
            self.log,
            builder,
            inputs,
            time_ms=self.clock(),
            memory=memory,
            instructions=instructions,
        )

    async def compact(
        self, *, trigger: CompactionTrigger = "manual", agent_id: str = MAIN_AGENT
    ) -> CompactionResult:
        """Compact the agent's slice now."""
        return await compact(
            self.log,
            self.summarizer,
            model=self.model,
            config=self.config,
            clock=self.clock,
            trigger=trigger,
            agent_id=agent_id,
            transform=self.strategy.transform,
        )

    async def prune(self, *, agent_id: str = MAIN_AGENT, force: bool = True) -> list[Plan]:
        """Prune the agent's slice now, by the configured mode (``force``: even if the
        after-turn prune is off)."""
        return await prune(
            self.log, self.model, self.config, clock=self.clock, agent_id=agent_id, force=force
        )
