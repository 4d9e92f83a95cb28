"""``LocalSession``: a session recorded and managed in-process, under a strategy.

It is what the simulation replays a trace with: the runtime's session without the actors.
It records through the same ``Recorder``, decides through the strategy (whose policy
strategies call ``policy.decisions``, exactly as the runtime does), compacts with
``compaction.compact``, prunes with ``compaction.pruning.prune`` and builds with
``request.prepare.prepare_request``, in the order the runtime's ``SessionHandle`` does. So a
trace replayed through a ``Runtime`` configured as a strategy and through a ``LocalSession``
under that strategy appends the same events and sends the same requests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from contextledger.actors._api import SessionApi
from contextledger.compaction._compactor import CompactionResult, compact, compact_while_due
from contextledger.compaction._pruning import prune
from contextledger.compaction._summarizers import ExtractiveSummarizer, Summarizer
from contextledger.config import Config
from contextledger.events._catalogue import MAIN_AGENT
from contextledger.events._parts import CompactionTrigger, ModelRef
from contextledger.history._projection import History
from contextledger.ledger import SessionLog
from contextledger.policy._decisions import CompactionReason
from contextledger.policy._overflow import usable
from contextledger.policy._prune import Plan
from contextledger.providers._base import WireFormat
from contextledger.request._builder import BuiltRequest, RequestBuilder, RequestInputs, system_for
from contextledger.request._instructions import InstructionFile
from contextledger.request._prepare import prepare_request
from contextledger.request._recording import Recorder, RecordingCommand
from contextledger.strategies._turns import Strategy
from contextledger.vocabulary._models import Model

Clock = Callable[[], int]


class LocalSession(SessionApi):
    """One session in ``log``, run in-process under ``strategy`` for ``model`` (see the module
    docstring). ``config`` is the caller's; the strategy's settings are applied on top."""

    def __init__(
        self,
        log: SessionLog,
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

        async def due() -> CompactionReason | None:
            history = self.log.history
            return self.strategy.compaction_due(
                history,
                self.model,
                self.config,
                agent_id=agent_id,
                system=system_for(history, inputs.segments),
                tools=inputs.tools,
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
        )

    async def prune(self, *, agent_id: str = MAIN_AGENT, force: bool = True) -> list[Plan]:
        """Prune the agent's slice now, by the configured mode (``force``: even if the
        after-turn prune is off)."""
        return await prune(
            self.log, self.model, self.config, clock=self.clock, agent_id=agent_id, force=force
        )
