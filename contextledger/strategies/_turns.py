"""Strategies: which view transform a session sends through, and when it compacts.

A ``Strategy`` has a name, an optional view ``Transform`` (applied to every request), the
settings it fixes on top of the caller's ``Config`` (``configure``, so its rules hold whatever
else is configured) and ``compaction_due``: why the slice must be compacted before the next
request. The policy strategies (``opencode``, ``mimo-tiers``, ``default``) differ only in their
settings and decide through ``policy._decisions.compaction_due``, the function the runtime
calls; pi's compact-at-N strategies have their own trigger. Every strategy prunes after a
turn through ``policy._decisions.prune_plans`` with its configured settings (nothing unless
``prune.enabled``). ``simulation.LocalSession`` runs a session under a strategy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

from contextledger.config import Config
from contextledger.events._catalogue import MAIN_AGENT
from contextledger.events._parts import ToolSchema
from contextledger.history._live_view import LiveView
from contextledger.history._projection import History
from contextledger.history._view import is_real_user
from contextledger.policy._cadence import estimate_view_tokens
from contextledger.policy._compaction import MIN_TAIL_TOKENS
from contextledger.policy._decisions import CompactionReason, compaction_due, slice_view
from contextledger.policy._overflow import usable
from contextledger.policy._transform import (
    Transform,
    TransformContext,
    apply_transform,
)
from contextledger.vocabulary._defaults import BATCH_TRIM_KEEP_CHARS, ECONOMIC_OUTPUT_RESERVE
from contextledger.vocabulary._messages import ModelMessage
from contextledger.vocabulary._models import Model

_json = msgspec.json.Encoder()


class Strategy(Protocol):
    """A context strategy: a name, an optional view transform, its settings and its
    compaction trigger."""

    @property
    def name(self) -> str: ...

    @property
    def transform(self) -> Transform | None: ...

    def configure(self, config: Config) -> Config: ...

    def compaction_due(
        self,
        history: History,
        model: Model,
        config: Config,
        *,
        agent_id: str,
        system: Sequence[str] = (),
        tools: Sequence[ToolSchema] = (),
        view: LiveView | None = None,
        now_ms: int | None = None,
    ) -> CompactionReason | None:
        """Why ``agent_id``'s slice must be compacted before its next request (``config``
        is already ``configure``d), or None; ``view``, when given, is the caller's
        ``policy._decisions.DecisionViews`` view of the slice; ``now_ms`` the caller's clock
        (None: the prompt cache is taken as warm)."""
        ...


def pi_overflow(config: Config) -> Config:
    """pi's answer to a context overflow (``_checkCompaction``): one compaction with its
    structured summary (the continuation template) and one retry; a second overflow before a
    step succeeds is an error. So at most one compaction attempt per step."""
    return _replace_section(
        config, "compaction", template="continuation", max_attempts=1, attempts_per="step"
    )


def _replace_section(config: Config, section: str, **changes: object) -> Config:
    current = getattr(config, section)
    return msgspec.structs.replace(config, **{section: msgspec.structs.replace(current, **changes)})


# --- strategies ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransformStrategy:
    """A view transform, run as pi's agent runs it: it never compacts on its own; a request
    the provider refuses as over the window is answered as pi answers it (``pi_overflow``)."""

    name: str
    transform: Transform | None

    def configure(self, config: Config) -> Config:
        """``pi_overflow``."""
        return pi_overflow(config)

    def compaction_due(
        self,
        history: History,
        model: Model,
        config: Config,
        *,
        agent_id: str,
        system: Sequence[str] = (),
        tools: Sequence[ToolSchema] = (),
        view: LiveView | None = None,
        now_ms: int | None = None,
    ) -> CompactionReason | None:
        """Never: a transform only shapes the view."""
        return None


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

    def compaction_due(
        self,
        history: History,
        model: Model,
        config: Config,
        *,
        agent_id: str,
        system: Sequence[str] = (),
        tools: Sequence[ToolSchema] = (),
        view: LiveView | None = None,
        now_ms: int | None = None,
    ) -> CompactionReason | None:
        """``strategy`` when the model view's estimate exceeds ``tokens``."""
        if estimate_view_tokens(slice_view(history, config, agent_id, view)) <= self.tokens:
            return None
        return "strategy"


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
        """``pi_overflow`` (the continuation template)."""
        return pi_overflow(config)

    def compaction_due(
        self,
        history: History,
        model: Model,
        config: Config,
        *,
        agent_id: str,
        system: Sequence[str] = (),
        tools: Sequence[ToolSchema] = (),
        view: LiveView | None = None,
        now_ms: int | None = None,
    ) -> CompactionReason | None:
        """``strategy`` when no compaction of the slice has completed yet and its view's
        JSON passes ``chars`` characters."""
        if any(
            c.status == "completed" and history.message(c.request_message_id).agent_id == agent_id
            for c in history.state.compactions.values()
        ):
            return None
        if len(_json.encode(slice_view(history, config, agent_id, view))) <= self.chars:
            return None
        return "strategy"


class PolicyStrategy:
    """A strategy that decides as the runtime does: ``compaction_due`` is
    ``policy._decisions.compaction_due`` under the strategy's settings."""

    def compaction_due(
        self,
        history: History,
        model: Model,
        config: Config,
        *,
        agent_id: str,
        system: Sequence[str] = (),
        tools: Sequence[ToolSchema] = (),
        view: LiveView | None = None,
        now_ms: int | None = None,
    ) -> CompactionReason | None:
        """``policy._decisions.compaction_due``."""
        return compaction_due(
            history,
            model,
            config,
            agent_id=agent_id,
            system=system,
            tools=tools,
            view=view,
            now_ms=now_ms,
        )


@dataclass(frozen=True)
class RuntimePolicy(PolicyStrategy):
    """``runtime``: the runtime's own decisions under the caller's configuration, unchanged
    (with the default ``Config``: compaction at the usable window, no after-turn prune)."""

    name: str = "runtime"
    transform: Transform | None = None

    def configure(self, config: Config) -> Config:
        """The config unchanged."""
        return config


@dataclass(frozen=True)
class OpencodeDefault(PolicyStrategy):
    """Kilo Code / opencode: compact when the last reported usage reaches the usable window
    (``kilo`` variant), with the post-compaction prune; the after-turn prune is Kilo's opt-in
    ``opencode`` mode (off unless ``prune.enabled``)."""

    name: str = "opencode"
    transform: Transform | None = None

    def configure(self, config: Config) -> Config:
        """``overflow_variant = "kilo"``, ``prune.mode = "opencode"``, opencode template, no
        step guard, attempts counted per turn."""
        config = _replace_section(
            config,
            "compaction",
            overflow_variant="kilo",
            template="opencode",
            step_guard=False,
            attempts_per="turn",
        )
        return _replace_section(config, "prune", mode="opencode")


@dataclass(frozen=True)
class MimoTiers(PolicyStrategy):
    """MiMo Code: prune tiers by pressure once the cache is cold (level 1 soft-trims, level 2
    clears and strips), compaction at the 0.9 trigger, the continuation summary."""

    name: str = "mimo-tiers"
    transform: Transform | None = None

    def configure(self, config: Config) -> Config:
        """``overflow_variant = "mimo"``, ``prune`` on in ``mimo`` mode, continuation
        template, no step guard, attempts counted per turn."""
        config = _replace_section(
            config,
            "compaction",
            overflow_variant="mimo",
            template="continuation",
            step_guard=False,
            attempts_per="turn",
        )
        return _replace_section(config, "prune", enabled=True, mode="mimo")


@dataclass(frozen=True)
class DefaultStrategy(PolicyStrategy):
    """Ours, cache-aware. With a prompt cache every call reads the whole prefix and every
    change to it costs a rewrite of everything after it, so the prefix changes only when that
    pays: compaction comes at the economic threshold (``cadence = "economic"``: once the
    view's extra reads cost more than compacting; never later than the usable window, ``mimo``
    variant), keeps the verbatim tail and writes the continuation summary so the agent resumes
    where it stopped; between compactions the prune runs in ``batch`` mode after every step
    (old outputs soft-trimmed all at once, one cache break, when the next prompt nears the
    window, in place of an early compaction the trim makes unnecessary, or when the saving
    over the expected remaining calls beats the rewrite).
    Compactions come often, so the verbatim tail kept after each is opencode's smallest
    (``MIN_TAIL_TOKENS``, 2,000 tokens): it is written again at every compaction, and a
    larger one raises the threshold and the reads with it. The window keeps
    ``ECONOMIC_OUTPUT_RESERVE`` for the answer, not MiMo's full output limit, so a compaction
    forced by the window comes no earlier than it must. The compaction guard counts
    attempts per step, so early compactions in a long tool loop are not taken for an
    overflow loop."""

    name: str = "default"
    transform: Transform | None = None

    def configure(self, config: Config) -> Config:
        """``economic`` cadence, attempts per step, a 2,000-token tail, ``mimo`` window with
        an ``ECONOMIC_OUTPUT_RESERVE`` output reserve, continuation template, autocontinue;
        ``prune`` on in ``batch`` mode, trimming to ``BATCH_TRIM_KEEP_CHARS``."""
        config = _replace_section(
            config,
            "compaction",
            overflow_variant="mimo",
            template="continuation",
            autocontinue=True,
            cadence="economic",
            attempts_per="step",
            preserve_recent_tokens=MIN_TAIL_TOKENS,
            output_reserve_cap=ECONOMIC_OUTPUT_RESERVE,
        )
        return _replace_section(
            config, "prune", enabled=True, mode="batch", trim_keep_chars=BATCH_TRIM_KEEP_CHARS
        )


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
    view = list(slice_view(history, config, agent_id))
    if strategy.transform is None:
        return view
    context = transform_context(history, model, config)
    return apply_transform(strategy.transform, view, context, name=strategy.name)
