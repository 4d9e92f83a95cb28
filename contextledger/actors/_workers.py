"""The actors that work for a session: ``RequestBuilder``, ``Compactor`` and ``Pruner``.

Each has its own bounded mailbox and task and writes through the session's
``SessionWriter``, so the session stays the only writer and keeps serving commands while they
work: a compaction waiting for its summary does not stop user messages or tool results from
being recorded (they become the kept tail).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import structlog

from contextledger.actors._mailbox import Mailbox
from contextledger.actors._session import SessionWriter
from contextledger.compaction._compactor import CompactionResult, compact
from contextledger.compaction._pruning import prune
from contextledger.compaction._summarizers import Summarizer
from contextledger.config import Config
from contextledger.events._catalogue import MAIN_AGENT
from contextledger.events._parts import CompactionTrigger
from contextledger.policy._decisions import CompactionReason
from contextledger.policy._overflow import usable
from contextledger.policy._prune import Plan
from contextledger.providers._base import WireFormat
from contextledger.request._builder import BuiltRequest, RequestBuilder, RequestInputs
from contextledger.request._instructions import InstructionFile
from contextledger.request._prepare import prepare_request
from contextledger.vocabulary._models import Model

Clock = Callable[[], int]


class Build(msgspec.Struct, frozen=True, kw_only=True):
    """Build the next request (``prepare_request``). Reply: the ``BuiltRequest``."""

    inputs: RequestInputs
    memory: str | None = None
    instructions: tuple[InstructionFile, ...] = ()
    agent_id: str = MAIN_AGENT


class Compact(msgspec.Struct, frozen=True, kw_only=True):
    """Compact the agent's slice. Reply: the ``CompactionResult``."""

    trigger: CompactionTrigger = "manual"
    agent_id: str = MAIN_AGENT


class CompactIfDue(msgspec.Struct, frozen=True, kw_only=True):
    """Compact the agent's slice automatically before a request, which ``due`` (the request's
    check) found due at the session's ``seq``; when the compactor comes to it, the session has
    gone on (the compactions queued before it may have made room) and ``due`` no longer gives
    a reason, nothing is done. Reply: the ``CompactionResult``, or None (nothing written)."""

    due: Callable[[], CompactionReason | None]
    seq: int
    agent_id: str = MAIN_AGENT


class Prune(msgspec.Struct, frozen=True, kw_only=True):
    """Run the after-turn prune of the agent's slice. Reply: the plans carried out."""

    agent_id: str = MAIN_AGENT
    force: bool = False


class RequestBuilderActor:
    """Builds a session's requests; keeps one ``RequestBuilder`` (live view and encoded
    fragments) per agent slice."""

    def __init__(
        self,
        writer: SessionWriter,
        wire: Callable[[], WireFormat],
        model: Model,
        config: Config,
        clock: Clock,
    ) -> None:
        self.mailbox: Mailbox[Build] = Mailbox()
        self._writer = writer
        self._wire = wire
        self._model = model
        self._config = config
        self._clock = clock
        self._builders: dict[str, RequestBuilder] = {}
        self._logger = structlog.get_logger(__name__).bind(
            actor="request_builder", session_id=writer.session_id
        )

    async def run(self) -> None:
        await self.mailbox.serve(self._build)

    async def _build(self, command: Build) -> BuiltRequest:
        builder = self._builders.get(command.agent_id)
        if builder is None:
            builder = self._builders[command.agent_id] = RequestBuilder(
                self._wire(),
                self._config,
                agent_id=command.agent_id,
                usable_tokens=usable(self._model, self._config),
                model=self._model,
            )
        built = await prepare_request(
            self._writer,
            builder,
            command.inputs,
            time_ms=self._clock(),
            memory=command.memory,
            instructions=command.instructions,
        )
        self._logger.debug(
            "request built",
            agent_id=command.agent_id,
            seq=self._writer.history.seq,
            body_bytes=len(built.encoded.body),
            prefix=built.prefix.action,
        )
        return built


class CompactorActor:
    """Runs a session's compactions, one at a time."""

    def __init__(
        self,
        writer: SessionWriter,
        summarizer: Summarizer,
        model: Model,
        config: Config,
        clock: Clock,
    ) -> None:
        self.mailbox: Mailbox[Compact | CompactIfDue] = Mailbox()
        self._writer = writer
        self._summarizer = summarizer
        self._model = model
        self._config = config
        self._clock = clock
        self._logger = structlog.get_logger(__name__).bind(
            actor="compactor", session_id=writer.session_id
        )

    async def run(self) -> None:
        await self.mailbox.serve(self._compact)

    async def _compact(self, command: Compact | CompactIfDue) -> CompactionResult | None:
        trigger: CompactionTrigger = "auto"
        if isinstance(command, Compact):
            trigger = command.trigger
        elif self._writer.history.seq != command.seq and command.due() is None:
            self._logger.info("compaction no longer due", agent_id=command.agent_id)
            return None
        result = await compact(
            self._writer,
            self._summarizer,
            model=self._model,
            config=self._config,
            clock=self._clock,
            trigger=trigger,
            agent_id=command.agent_id,
        )
        self._logger.info(
            "compaction",
            agent_id=command.agent_id,
            seq=self._writer.history.seq,
            outcome=result.outcome,
            reason=result.reason,
        )
        return result


class PrunerActor:
    """Plans and carries out a session's after-turn prunes."""

    def __init__(self, writer: SessionWriter, model: Model, config: Config, clock: Clock) -> None:
        self.mailbox: Mailbox[Prune] = Mailbox()
        self._writer = writer
        self._model = model
        self._config = config
        self._clock = clock
        self._logger = structlog.get_logger(__name__).bind(
            actor="pruner", session_id=writer.session_id
        )

    async def run(self) -> None:
        await self.mailbox.serve(self._prune)

    async def _prune(self, command: Prune) -> list[Plan]:
        plans = await prune(
            self._writer,
            self._model,
            self._config,
            clock=self._clock,
            agent_id=command.agent_id,
            force=command.force,
        )
        if plans:
            self._logger.info(
                "pruned", agent_id=command.agent_id, seq=self._writer.history.seq, plans=len(plans)
            )
        return plans
