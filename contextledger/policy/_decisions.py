"""The decisions about a session's context, in one place.

Before each request: must the agent's slice be compacted first, and why
(``compaction_due``); after a compaction: send, check again or give up
(``after_compaction``); how much output the request asks for (``output_cap``). After each
turn: which prune plans to carry out (``prune_plans``); after a compaction, and for a body over
the payload limit: which old outputs to clear (``forced_prune``).

The runtime's actors, the strategies, the simulation, the CLI's ``compact`` and ``prune`` and
the benchmarks all decide through these functions, and every input they need is derived from
the history here (``slice_facts``, ``latest_answer``), so no two callers can see a different
"last usage" or "last finished step". Pure: the clock is an argument, nothing is read or
written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec

from contextledger.config import Config
from contextledger.events._parts import (
    Part,
    StepStartPart,
    ToolCompleted,
    ToolPart,
    ToolSchema,
    Usage,
)
from contextledger.history._live_view import LiveView
from contextledger.history._projection import History, Message
from contextledger.history._view import ViewOptions, in_view, model_view, view_messages
from contextledger.policy._cadence import (
    EarlyCompaction,
    early_compaction,
    early_compaction_refused,
    estimate_view_tokens,
)
from contextledger.policy._compaction import EXHAUSTED_DETAIL
from contextledger.policy._overflow import (
    PreflightMeasure,
    compaction_limit,
    is_overflow,
    max_output_tokens,
    measure_preflight,
    output_budget,
    preflight_enabled,
    pressure_level,
    should_compact_preflight,
    step_overflows,
    usable,
)
from contextledger.policy._prune import (
    NO_PRESSURE,
    BatchBudget,
    Plan,
    PrunePlan,
    cache_cold,
    clear_plan,
    plan_after_turn,
)
from contextledger.prices._multipliers import price_for
from contextledger.vocabulary._defaults import (
    BATCH_PRESSURE_SHARE,
    BATCH_PROTECT_SHARE,
    BATCH_RELIEF_SHARE,
    CHARS_PER_TOKEN,
)
from contextledger.vocabulary._messages import ModelMessage, ModelToolResult
from contextledger.vocabulary._models import Model

#: Why a compaction runs. ``overflow``: the last reported usage reached the compaction limit;
#: ``preflight``: the request about to be sent would; ``economic``: the view passed its
#: economic threshold (``policy._cadence``); ``strategy``: a strategy's own trigger (pi's
#: compact-at-N); ``manual``: asked for by the caller.
CompactionReason = Literal["overflow", "preflight", "economic", "strategy", "manual"]

#: How a rollback past the attempt cap starts (``EXHAUSTED_DETAIL`` without its figures).
_EXHAUSTED = EXHAUSTED_DETAIL.partition("{")[0]


@dataclass(frozen=True)
class SliceFacts:
    """What the decisions read of one agent's slice, derived once.

    ``messages``: the history messages of the slice's view (``view_messages``); ``answer``:
    the agent's latest answer that reported usage (not a summary; an answer whose usage is
    all zeros, as a failed call's is, reported none and does not hide the one before it);
    ``compacted_since``: a compaction of the slice completed after ``answer``;
    ``last_finished_ms``: when the view's latest assistant message finished (its
    ``AssistantFinished`` time; None when none has), the moment the prompt cache was last
    written."""

    agent_id: str
    messages: list[Message]
    answer: Message | None
    compacted_since: bool
    last_finished_ms: int | None

    @property
    def usage(self) -> Usage | None:
        """The usage ``answer`` reported, None without one."""
        return self.answer.usage if self.answer is not None else None


def slice_facts(history: History, config: Config, agent_id: str) -> SliceFacts:
    """The ``SliceFacts`` of ``agent_id``'s slice of ``history`` under ``config``."""
    messages = view_messages(history, ViewOptions.from_config(config, agent_id=agent_id))
    answer = latest_answer(history, agent_id)
    return SliceFacts(
        agent_id,
        messages,
        answer,
        _compacted_since(history, answer, agent_id),
        last_finished_ms(history, agent_id),
    )


def last_finished_ms(history: History, agent_id: str) -> int | None:
    """When the newest assistant message of ``agent_id``'s slice view finished (its
    ``AssistantFinished`` time), the moment the prompt cache was last written; None when
    none has. Reads the history from its newest message back to that one."""
    return next(
        (
            m.finished_ms
            for m in reversed(history.messages)
            if m.role == "assistant" and m.finished_ms is not None and in_view(history, m, agent_id)
        ),
        None,
    )


def latest_answer(history: History, agent_id: str) -> Message | None:
    """The agent's latest answer that reported usage (see ``SliceFacts``)."""
    for message in reversed(history.messages):
        if (
            message.role == "assistant"
            and message.agent_id == agent_id
            and not message.summary
            and message.usage is not None
            and message.usage.total > 0
        ):
            return message
    return None


def last_reported_prompt(history: History, agent_id: str) -> int | None:
    """The prompt tokens the provider counted for ``agent_id``'s latest answer
    (``latest_answer``), the least its next request holds as long as nothing left the view
    since; None without one, or when a compaction of the slice completed after it."""
    answer = latest_answer(history, agent_id)
    if answer is None or answer.usage is None or _compacted_since(history, answer, agent_id):
        return None
    return answer.usage.prompt or None


def _compacted_since(history: History, answer: Message | None, agent_id: str) -> bool:
    if answer is None:
        return False
    # Compactions are kept in the order of their request ids: only the newest are read.
    for c in reversed(history.state.compactions.values()):
        if c.request_message_id <= answer.id:
            return False
        if c.status == "completed" and history.message(c.request_message_id).agent_id == agent_id:
            return True
    return False


def compaction_due(
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
    """Why ``agent_id``'s slice must be compacted before its next request, or None.

    ``overflow`` when the latest answer's reported usage reaches the compaction limit and no
    compaction completed since; else ``preflight`` when that usage plus what was written
    since (``written_since``: inside a tool loop, the step's results) would reach it
    (``step_overflows``, on whenever automatic compaction is), or when Kilo's preflight is
    on and the request (the view with ``system`` and ``tools``) would reach it, mid tool
    round too; else, under
    ``compaction.cadence = "economic"``, ``economic`` when the view has passed its threshold,
    or, when the prompt cache has expired by ``now_ms`` (the caller's clock; None: taken as
    warm), when compacting pays on the cold cache (``policy._cadence``), unless the slice's
    last early compaction was rolled back and no step finished since.

    ``view``, when given, is the caller's ``LiveView`` of the slice (``DecisionViews``), kept
    between requests so that the view costs what changed since the last one; without it the
    view is built from scratch. Raises ``ValueError`` when its options are not the slice's."""
    _decision_options(config, agent_id, view)
    answer = latest_answer(history, agent_id)
    if (
        answer is not None
        and answer.usage is not None
        and not _compacted_since(history, answer, agent_id)
    ):
        usage, written = answer.usage, written_since(history, answer, agent_id)
        if is_overflow(model, usage, config) or step_overflows(model, usage, written, config):
            # A prune after the answer (``batch`` mode's, between the steps of a tool loop)
            # shortened what its usage counted.
            messages = slice_view(history, config, agent_id, view)
            pruned = pruned_since(history, answer, messages)
            usage = msgspec.structs.replace(usage, input=max(0, usage.input - pruned))
        if is_overflow(model, usage, config):
            return "overflow"
        if step_overflows(model, usage, written, config):
            return "preflight"
    preflight = preflight_enabled(model, config)
    if not preflight and config.compaction.cadence != "economic":
        return None
    messages = slice_view(history, config, agent_id, view)
    if preflight:
        # A compaction never separates a tool call from its result (its tail starts at a
        # stored message, which holds both), so unlike Kilo's preflight this one also
        # protects a step inside a tool round.
        measure = measure_preflight(messages, config, tools=tools, system=system)
        measure = msgspec.structs.replace(measure, continuation=False)
        if should_compact_preflight(model, measure, config).compact:
            return "preflight"
    cold = (
        config.compaction.cadence == "economic"
        and now_ms is not None
        and cache_cold(
            now_ms,
            last_finished_ms(history, agent_id),
            price_for(model.provider_id, model.model_id).ttl_s * 1000,
        )
    )
    early = early_compaction(history, messages, model, config, agent_id=agent_id, cold=cold)
    if early is not None and early.due() and not early_compaction_refused(history, agent_id):
        return "economic"
    return None


class DecisionViews:
    """The live views of a session's slices as the decisions read them under ``config``,
    one per agent, made on first use: what a shell keeps for the session's life and passes
    to ``compaction_due`` at every request (``of(agent_id)``)."""

    __slots__ = ("_config", "_views")

    def __init__(self, config: Config) -> None:
        self._config = config
        self._views: dict[str, LiveView] = {}

    def of(self, agent_id: str) -> LiveView:
        """The live view of ``agent_id``'s slice."""
        view = self._views.get(agent_id)
        if view is None:
            options = ViewOptions.from_config(self._config, agent_id=agent_id)
            view = self._views[agent_id] = LiveView(options)
        return view


def slice_view(
    history: History, config: Config, agent_id: str, view: LiveView | None = None
) -> Sequence[ModelMessage]:
    """``agent_id``'s model view as the decisions read it under ``config``: ``view`` (a
    ``decision_view``) brought up to date, else built from scratch. Valid until ``view``'s
    next update. Raises ``ValueError`` when ``view`` is another slice's or configuration's."""
    options = _decision_options(config, agent_id, view)
    return model_view(history, options) if view is None else view.update(history)


def _decision_options(config: Config, agent_id: str, view: LiveView | None) -> ViewOptions:
    """The view options the decisions read ``agent_id``'s slice with; ``ValueError`` when
    ``view`` is built with others."""
    options = ViewOptions.from_config(config, agent_id=agent_id)
    if view is not None and view.options != options:
        raise ValueError(f"the live view is not the decision view of {agent_id!r}'s slice")
    return options


def written_since(history: History, answer: Message, agent_id: str) -> int:
    """The estimated tokens the slice's next request holds beyond what ``answer``'s usage
    counted: when it finished calling tools, the calls of its last step with their results;
    and the slice's messages after it (a cleared output counts as nothing). Reads only the
    messages from ``answer`` on."""
    total = 0
    for message in reversed(history.messages):
        if message.id <= answer.id:
            break
        if in_view(history, message, agent_id):
            total += sum(history.part_tokens(p.id) for p in message.parts if not _cleared(p))
    if answer.finish == "tool-calls":
        last_step = max(
            (i for i, p in enumerate(answer.parts) if isinstance(p, StepStartPart)), default=0
        )
        total += sum(
            history.part_tokens(p.id)
            for p in answer.parts[last_step:]
            if isinstance(p, ToolPart) and not _cleared(p)
        )
    return total


def pruned_since(history: History, answer: Message, view: Sequence[ModelMessage]) -> int:
    """The estimated tokens (four characters each) that prunes since ``answer``'s request
    took off the tool outputs that request held: the output characters its ``RequestSent``
    measured less those ``view`` (the slice's model view now) holds before ``answer``. 0
    when the slice's last request is not known or carries no measure."""
    sent = history.last_request(answer.agent_id)
    if sent is None or sent.measure is None:
        return 0
    held = sum(
        len(content.output)
        for message in view
        if message.source_id < answer.id
        for content in message.content
        if isinstance(content, ModelToolResult)
    )
    return max(0, sent.measure.output_chars - held) // CHARS_PER_TOKEN


def _cleared(part: Part) -> bool:
    """A tool output a prune cleared (sent as a placeholder)."""
    return (
        isinstance(part, ToolPart)
        and isinstance(part.state, ToolCompleted)
        and part.state.compacted_ms is not None
    )


def after_compaction(
    reason: CompactionReason, outcome: Literal["completed", "rolled_back"], detail: str
) -> Literal["send", "check", "exhausted"]:
    """What follows a compaction run before a request: ``send`` after an early (economic or
    a strategy's) one, whatever came of it, since it was optional; ``exhausted`` when it was
    rolled back for having used the turn's attempts (``compaction.max_attempts``); else
    ``check`` whether the slice is still full."""
    if reason in ("economic", "strategy"):
        return "send"
    if outcome == "rolled_back" and detail.startswith(_EXHAUSTED):
        return "exhausted"
    return "check"


def reported_prompt(history: History, config: Config, facts: SliceFacts) -> Usage:
    """The prompt the slice last had: the latest answer's reported usage, or (when no answer
    reported a prompt) the view's estimate as uncached input."""
    usage = facts.usage
    if usage is not None and usage.prompt > 0:
        return usage
    view = model_view(history, ViewOptions.from_config(config, agent_id=facts.agent_id))
    return Usage(input=estimate_view_tokens(view))


def slice_pressure(history: History, model: Model, config: Config, *, agent_id: str) -> int:
    """The pressure level of ``agent_id``'s slice (``pressure_level`` of ``reported_prompt``)."""
    facts = slice_facts(history, config, agent_id)
    return pressure_level(model, reported_prompt(history, config, facts), config)


def prune_plans(
    history: History,
    model: Model,
    config: Config,
    *,
    agent_id: str,
    now_ms: int,
    force: bool = False,
    level: int | None = None,
) -> list[Plan]:
    """The prune plans for ``agent_id``'s slice after a step, by ``prune.mode``; none unless
    ``prune.enabled`` or ``force``, and none between the steps of a tool loop (the slice's
    newest message an answer that called tools) unless ``force`` or in ``batch`` mode.

    The prompt the plans weigh is ``reported_prompt`` (in ``batch`` mode plus what was
    written since, ``written_since``: the next request's); the pressure level (``mimo``
    mode) is that prompt's unless ``level`` is given; the cache counts as warm within the
    price's TTL of ``last_finished_ms`` (``cost`` and ``batch`` modes). ``batch`` mode
    keeps the newest ``BATCH_PROTECT_SHARE`` of the usable window of tool output (at most
    ``prune.protect_tokens``), trims whatever it costs once the next prompt reaches
    ``BATCH_PRESSURE_SHARE`` of the compaction limit (if that brings it down to
    ``BATCH_RELIEF_SHARE`` of it), trims in place of an early compaction the trim makes not
    due (``early_compaction``), and counts a saving over ``prune.expected_turns`` calls."""
    settings = config.prune
    if force:
        settings = msgspec.structs.replace(settings, enabled=True)
    if not settings.enabled:
        return []
    batch = settings.mode == "batch"
    if not (force or batch) and _between_steps(history, agent_id):
        return []
    facts = slice_facts(history, config, agent_id)
    usage = reported_prompt(history, config, facts)
    prompt = usage.prompt
    answer = facts.answer
    if batch and answer is not None and usage is facts.usage and not facts.compacted_since:
        prompt += written_since(history, answer, agent_id)
    return plan_after_turn(
        facts.messages,
        config=settings,
        level=pressure_level(model, usage, config) if level is None else level,
        now_ms=now_ms,
        last_finished_ms=facts.last_finished_ms,
        prompt_tokens=prompt,
        price=price_for(model.provider_id, model.model_id),
        part_tokens=(
            {p.id: history.part_tokens(p.id) for m in facts.messages for p in m.parts}
            if settings.mode == "cost"
            else None
        ),
        batch=_batch_budget(history, model, config, agent_id) if batch else None,
    )


def forced_prune(
    history: History,
    config: Config,
    *,
    agent_id: str,
    reason: Literal["post-compaction", "payload-limit"],
) -> PrunePlan | None:
    """The prune a completed compaction (``post-compaction``: the cache is rebuilt anyway) or
    a request body over ``request.payload_limit_bytes`` (``payload-limit``) forces on
    ``agent_id``'s slice: opencode's clear of its view's old outputs with ``config.prune``'s
    protection (``clear_plan``), whatever ``prune.enabled`` and ``prune.mode`` say; None when
    it would free too little."""
    messages = view_messages(history, ViewOptions.from_config(config, agent_id=agent_id))
    return clear_plan(messages, config.prune, reason)


def _between_steps(history: History, agent_id: str) -> bool:
    """Whether ``agent_id``'s newest message is an answer that called tools: its tool loop
    goes on."""
    for message in reversed(history.messages):
        if message.agent_id == agent_id:
            return message.role == "assistant" and message.finish == "tool-calls"
    return False


def _batch_budget(history: History, model: Model, config: Config, agent_id: str) -> BatchBudget:
    """What ``batch`` mode weighs for ``agent_id``'s slice (see ``prune_plans``)."""
    window = usable(model, config)
    turns = config.prune.expected_turns
    if not window:
        return BatchBudget(
            protect_tokens=config.prune.protect_tokens,
            pressure_tokens=NO_PRESSURE,
            relief_tokens=NO_PRESSURE,
            turns=turns,
        )
    limit = compaction_limit(model, config)
    early: list[EarlyCompaction | None] = []

    def due(freed: int) -> bool:
        if not early:  # the view is read only when a trim is weighed
            view = slice_view(history, config, agent_id)
            early.append(early_compaction(history, view, model, config, agent_id=agent_id))
        return early[0] is not None and early[0].due(freed)

    return BatchBudget(
        protect_tokens=min(config.prune.protect_tokens, int(window * BATCH_PROTECT_SHARE)),
        pressure_tokens=int(limit * BATCH_PRESSURE_SHARE),
        relief_tokens=int(limit * BATCH_RELIEF_SHARE),
        turns=turns,
        compaction_due=due if config.compaction.cadence == "economic" else None,
    )


def output_cap(
    model: Model,
    config: Config,
    *,
    requested: int | None,
    prompt_tokens: int,
    reported: int | None = None,
) -> int:
    """The output a request asks for: ``requested`` (else the model's default,
    ``max_output_tokens``), lowered by ``output.budget_rule`` (``output_budget``) so that the
    prompt (``prompt_tokens``, an estimate, or ``reported`` when larger: the prompt the provider
    last counted for the slice, ``last_reported_prompt``, which sees what an estimate misses)
    plus the output fit the window, never below ``output.min``; unchanged when the window is
    unknown. When the prompt leaves no room at all, ``output.min``: asking for the whole output
    then would make a request the provider refuses even if the estimate was high, and a prompt
    that really fills the window is refused either way (its overflow leads to a compaction)."""
    prompt_tokens = max(prompt_tokens, reported or 0)
    wanted = (
        requested
        if requested is not None
        else max_output_tokens(model.limits, config.output.max_tokens)
    )
    context = model.limits.context
    if context and prompt_tokens + config.output.safety >= context:
        return min(wanted, config.output.min)
    # The output budget reads only the normalized size and the media count of the measure.
    measure = PreflightMeasure(
        normalized=prompt_tokens, raw=prompt_tokens, tail=0, overhead=0, continuation=False, media=0
    )
    return output_budget(model, wanted, measure, config) or wanted
