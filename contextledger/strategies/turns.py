"""Event-level strategies: what runs after each turn and appends prune or compaction events.

A ``Strategy`` has a name, an optional view ``Transform`` (applied to every request) and an
``after_turn`` hook. The hook goes through the library: ``policy.prune.plan_after_turn`` and
``plan_events`` for prunes, ``compaction.compactor.compact`` for compactions (which runs the
post-compaction prune itself). Each strategy fixes the settings that define it on top of the
caller's ``Config`` (``configure``), so its rules hold whatever else is configured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from contextledger.compaction.compactor import CompactionResult, compact
from contextledger.compaction.summarizers import ExtractiveSummarizer, Summarizer
from contextledger.config import Config
from contextledger.events.catalogue import MAIN_AGENT
from contextledger.events.parts import Usage
from contextledger.history.messages import ModelMessage
from contextledger.history.projection import History, Message
from contextledger.history.view import ViewOptions, model_view, view_messages
from contextledger.ledger import EventLog
from contextledger.policy.cadence import (
    early_compaction_due,
    early_compaction_refused,
    estimate_view_tokens,
)
from contextledger.policy.compaction import MIN_TAIL_TOKENS, is_real_user
from contextledger.policy.overflow import Model, is_overflow, pressure_level, usable
from contextledger.policy.prices import price_for
from contextledger.policy.prune import (
    Plan,
    PrunePlan,
    StripPlan,
    TrimPlan,
    plan_after_turn,
    plan_events,
)
from contextledger.policy.transform import (
    Transform,
    TransformContext,
    apply_transform,
)

Clock = Callable[[], int]

_json = msgspec.json.Encoder()


@dataclass(frozen=True, kw_only=True)
class TurnEnv:
    """What an ``after_turn`` hook works with: the model, the caller's config, the clock, the
    summarizer for compactions (extractive by default) and the agent whose slice it handles."""

    model: Model
    config: Config
    clock: Clock
    summarizer: Summarizer = field(default_factory=ExtractiveSummarizer)
    agent_id: str = MAIN_AGENT


@dataclass(frozen=True, kw_only=True)
class TurnReport:
    """What ``after_turn`` did: the prune plans it appended and the compaction it ran."""

    pruned: tuple[Plan, ...] = ()
    compaction: CompactionResult | None = None

    def describe(self) -> str:
        """One line for tables: ``"compacted; cleared 3 outputs (12,400 tokens)"``, or ``""``
        when nothing was done."""
        said: list[str] = []
        if self.compaction is not None:
            if self.compaction.outcome == "completed":
                said.append("compacted")
            else:
                said.append(f"compaction rolled back ({self.compaction.reason})")
        cleared = [p for p in self.pruned if isinstance(p, PrunePlan)]
        if cleared:
            outputs = sum(len(p.part_ids) for p in cleared)
            tokens = sum(p.tokens for p in cleared)
            said.append(f"cleared {outputs} outputs ({tokens:,} tokens)")
        trimmed = sum(1 for p in self.pruned if isinstance(p, TrimPlan))
        if trimmed:
            said.append(f"trimmed {trimmed} outputs")
        stripped = sum(len(p.part_ids) for p in self.pruned if isinstance(p, StripPlan))
        if stripped:
            said.append(f"stripped {stripped} parts")
        return "; ".join(said)


class Strategy(Protocol):
    """A context strategy: a name, an optional view transform and an after-turn hook."""

    @property
    def name(self) -> str: ...

    @property
    def transform(self) -> Transform | None: ...

    def configure(self, config: Config) -> Config: ...

    async def after_turn(self, log: EventLog, env: TurnEnv) -> TurnReport: ...


# --- helpers ---------------------------------------------------------------------------------


def _options(config: Config, agent_id: str) -> ViewOptions:
    agent = None if agent_id == MAIN_AGENT else agent_id
    return msgspec.structs.replace(ViewOptions.from_config(config), agent_id=agent)


def _last_answer(messages: Sequence[Message]) -> Message | None:
    for message in reversed(messages):
        if message.role == "assistant" and not message.summary and message.usage is not None:
            return message
    return None


def _last_finished(messages: Sequence[Message]) -> int | None:
    for message in reversed(messages):
        if message.role == "assistant" and message.finish is not None:
            return int(message.created_ms)
    return None


def _compacted_after(history: History, message_id: str, agent_id: str) -> bool:
    return any(
        c.status == "completed"
        and c.request_message_id > message_id
        and history.message(c.request_message_id).agent_id == agent_id
        for c in history.state.compactions.values()
    )


def overflowed(history: History, model: Model, config: Config, agent_id: str) -> bool:
    """The last answer's reported usage reaches the compaction limit (``is_overflow``) and no
    compaction has completed since it."""
    answer = _last_answer(view_messages(history, _options(config, agent_id)))
    if answer is None or answer.usage is None:
        return False
    if _compacted_after(history, answer.id, agent_id):
        return False
    return is_overflow(model, answer.usage, config)


async def _prune(log: EventLog, env: TurnEnv, config: Config) -> tuple[Plan, ...]:
    if not config.prune.enabled:
        return ()
    history = log.history
    messages = view_messages(history, _options(config, env.agent_id))
    answer = _last_answer(messages)
    usage = answer.usage if answer is not None and answer.usage is not None else Usage()
    prompt = usage.prompt or estimate_view_tokens(
        model_view(history, _options(config, env.agent_id))
    )
    now = env.clock()
    plans = plan_after_turn(
        messages,
        config=config.prune,
        level=pressure_level(env.model, usage, config) if answer is not None else 0,
        now_ms=now,
        last_finished_ms=_last_finished(messages),
        prompt_tokens=prompt,
        price=price_for(env.model.provider_id, env.model.model_id),
        part_tokens={p.id: history.part_tokens(p.id) for m in messages for p in m.parts},
    )
    if plans:
        events = plan_events(plans, session_id=log.session_id, time_ms=now, agent_id=env.agent_id)
        await log.append(events)
    return tuple(plans)


async def _compact(log: EventLog, env: TurnEnv, config: Config) -> CompactionResult:
    return await compact(
        log,
        env.summarizer,
        model=env.model,
        config=config,
        clock=env.clock,
        trigger="auto",
        agent_id=env.agent_id,
    )


def _replace_section(config: Config, section: str, **changes: object) -> Config:
    current = getattr(config, section)
    return msgspec.structs.replace(config, **{section: msgspec.structs.replace(current, **changes)})


# --- strategies ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransformStrategy:
    """A view transform only; ``after_turn`` appends nothing."""

    name: str
    transform: Transform | None

    def configure(self, config: Config) -> Config:
        """The config unchanged."""
        return config

    async def after_turn(self, log: EventLog, env: TurnEnv) -> TurnReport:
        """Nothing to do: the log is left as it is."""
        return TurnReport()


@dataclass(frozen=True)
class CompactAt:
    """``compact-at-N``: compact (structured summary, kept tail) once the estimated view
    passes ``tokens``; again whenever it passes it later."""

    tokens: int
    transform: Transform | None = None

    @property
    def name(self) -> str:
        """``compact-at-N``."""
        return f"compact-at-{self.tokens}"

    def configure(self, config: Config) -> Config:
        """The config unchanged."""
        return config

    async def after_turn(self, log: EventLog, env: TurnEnv) -> TurnReport:
        """Compact when the model view's estimate exceeds ``tokens``."""
        config = self.configure(env.config)
        view = model_view(log.history, _options(config, env.agent_id))
        if estimate_view_tokens(view) <= self.tokens:
            return TurnReport()
        return TurnReport(compaction=await _compact(log, env, config))


@dataclass(frozen=True)
class CompactOnce:
    """pi's ``compact-at-N-structured``: once the view passes ``chars`` characters (of its
    JSON), compact it once with the five-section continuation summary, keeping the tail;
    after that the summary is frozen and the conversation grows after it."""

    chars: int
    transform: Transform | None = None

    @property
    def name(self) -> str:
        """``compact-at-N-structured``."""
        return f"compact-at-{self.chars}-structured"

    def configure(self, config: Config) -> Config:
        """The continuation template."""
        return _replace_section(config, "compaction", template="continuation")

    async def after_turn(self, log: EventLog, env: TurnEnv) -> TurnReport:
        """Compact when no compaction has completed yet and the view passes ``chars``."""
        history = log.history
        if any(
            c.status == "completed"
            and history.message(c.request_message_id).agent_id == env.agent_id
            for c in history.state.compactions.values()
        ):
            return TurnReport()
        config = self.configure(env.config)
        view = model_view(history, _options(config, env.agent_id))
        if len(_json.encode(view)) <= self.chars:
            return TurnReport()
        return TurnReport(compaction=await _compact(log, env, config))


@dataclass(frozen=True)
class OpencodeDefault:
    """Kilo Code / opencode: compact when the last reported usage reaches the usable window
    (``kilo`` variant), with the post-compaction prune; the after-turn prune is Kilo's opt-in
    ``opencode`` mode (off unless ``prune.enabled``)."""

    name: str = "opencode"
    transform: Transform | None = None

    def configure(self, config: Config) -> Config:
        """``overflow_variant = "kilo"``, ``prune.mode = "opencode"``, opencode template."""
        config = _replace_section(
            config, "compaction", overflow_variant="kilo", template="opencode"
        )
        return _replace_section(config, "prune", mode="opencode")

    async def after_turn(self, log: EventLog, env: TurnEnv) -> TurnReport:
        """Compact on overflow, else run the configured prune."""
        config = self.configure(env.config)
        if overflowed(log.history, env.model, config, env.agent_id):
            return TurnReport(compaction=await _compact(log, env, config))
        return TurnReport(pruned=await _prune(log, env, config))


@dataclass(frozen=True)
class MimoTiers:
    """MiMo Code: prune tiers by pressure once the cache is cold (level 1 soft-trims, level 2
    clears and strips), compaction at the 0.9 trigger, the continuation summary."""

    name: str = "mimo-tiers"
    transform: Transform | None = None

    def configure(self, config: Config) -> Config:
        """``overflow_variant = "mimo"``, ``prune`` on in ``mimo`` mode, continuation template."""
        config = _replace_section(
            config, "compaction", overflow_variant="mimo", template="continuation"
        )
        return _replace_section(config, "prune", enabled=True, mode="mimo")

    async def after_turn(self, log: EventLog, env: TurnEnv) -> TurnReport:
        """Compact on overflow, else prune by the pressure tier."""
        config = self.configure(env.config)
        if overflowed(log.history, env.model, config, env.agent_id):
            return TurnReport(compaction=await _compact(log, env, config))
        return TurnReport(pruned=await _prune(log, env, config))


@dataclass(frozen=True)
class DefaultStrategy:
    """Ours, cache-aware. With a prompt cache every call reads the whole prefix and every
    change to it costs a rewrite of everything after it, so the prefix changes only when that
    pays: compaction comes at the economic threshold (``cadence = "economic"``: once the
    view's extra reads cost more than compacting; never later than the usable window, ``mimo``
    variant), keeps the verbatim tail and writes the continuation summary so the agent resumes
    where it stopped; between compactions the after-turn prune runs in ``cost`` mode (clear
    old outputs only when the saving over the expected remaining turns beats the rewrite).
    Compactions come often, so the verbatim tail kept after each is opencode's smallest
    (``MIN_TAIL_TOKENS``, 2,000 tokens): it is written again at every compaction, and a
    larger one raises the threshold and the reads with it. The compaction guard counts
    attempts per step, so early compactions in a long tool loop are not taken for an
    overflow loop."""

    name: str = "default"
    transform: Transform | None = None

    def configure(self, config: Config) -> Config:
        """``economic`` cadence, attempts per step, a 2,000-token tail, ``mimo`` window,
        continuation template, autocontinue; ``prune`` on in ``cost`` mode."""
        config = _replace_section(
            config,
            "compaction",
            overflow_variant="mimo",
            template="continuation",
            autocontinue=True,
            cadence="economic",
            attempts_per="step",
            preserve_recent_tokens=MIN_TAIL_TOKENS,
        )
        return _replace_section(config, "prune", enabled=True, mode="cost")

    async def after_turn(self, log: EventLog, env: TurnEnv) -> TurnReport:
        """Compact on overflow or past the economic threshold, else prune when it pays."""
        config = self.configure(env.config)
        history = log.history
        view = model_view(history, _options(config, env.agent_id))
        early = early_compaction_due(view, env.model, config) and not early_compaction_refused(
            history, env.agent_id
        )
        if early or overflowed(history, env.model, config, env.agent_id):
            return TurnReport(compaction=await _compact(log, env, config))
        return TurnReport(pruned=await _prune(log, env, config))


# --- the view a strategy sends ---------------------------------------------------------------


def transform_context(history: History, model: Model, config: Config) -> TransformContext:
    """The context for a transform of ``history``'s view: the usable window and the turn
    index (real user messages so far)."""
    return TransformContext(
        usable_tokens=usable(model, config),
        turn=sum(1 for m in history.messages if is_real_user(m)),
    )


def strategy_view(
    strategy: Strategy,
    history: History,
    *,
    model: Model,
    config: Config,
    agent_id: str = MAIN_AGENT,
) -> list[ModelMessage]:
    """The model view under ``strategy``: ``model_view`` with its configuration, then its
    transform (checked by ``apply_transform``)."""
    config = strategy.configure(config)
    view = model_view(history, _options(config, agent_id))
    if strategy.transform is None:
        return view
    context = transform_context(history, model, config)
    return apply_transform(strategy.transform, view, context, name=strategy.name)
