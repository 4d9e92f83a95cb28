"""What to prune after a turn: which old tool outputs to clear or trim, and which old media and
reasoning to strip. Every function is pure; the caller appends the events (``plan_events``).

**The walk** (opencode's, shared by every mode): go through the view's messages newest to
oldest; leave the current and the previous turn alone (everything until the second user
message a person wrote is seen: ``is_real_user``); stop at a summary (never prune across one)
and at an output already cleared (everything older was handled then). Keep the newest
``protect_tokens`` of tool output; the completed outputs beyond that are the candidates.
Outputs of protected tools (``skill``) are never candidates.

**The modes** (``PruneConfig.mode``, for the "normal" prune after each turn, which runs only
when ``PruneConfig.enabled``):

* ``opencode`` (``plan_prune``): clear the candidates if together they free more than
  ``minimum_tokens``.
* ``mimo`` (``plan_tiers``): nothing while the prompt cache may still be warm
  (``cache_cold``) or the context is under no pressure. At pressure level 1, soft-trim each
  candidate longer than ``trim_threshold_chars`` to its first and last ``trim_keep_chars``; at
  level 2 and above, clear the candidates as ``opencode`` does (reason ``pressure``) and strip
  media and reasoning older than the last ``strip_protected_turns`` turns (``plan_strip``).
* ``cost`` (``plan_cost``): clear the candidates when that is cheaper over the expected rest of
  the session than keeping the cached prefix (``prune_pays``).
* ``batch`` (``plan_batch``): after every step, a tool loop's included, soft-trim every old
  output at once (one cache break for the whole batch) when the next prompt nears the window,
  in place of an early compaction the trim makes unnecessary, or when the trim pays over the
  calls to come (``prune_pays``). The walk protects no turn, only the newest tool output
  (``protect_tokens``), and stops at an output already trimmed.

The post-compaction and payload-limit prunes call ``plan_prune`` with their reason and are not
gated by ``enabled``. Nothing is ever deleted: a cleared, trimmed or stripped part stays in
the log, and only the view changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypedDict

import msgspec

from contextledger.config import PruneConfig
from contextledger.events._catalogue import (
    MAIN_AGENT,
    PartsStripped,
    PruneReason,
    ToolOutputCleared,
    ToolOutputTrimmed,
)
from contextledger.events._parts import (
    FilePart,
    Part,
    ReasoningPart,
    ToolCompleted,
    ToolPart,
    is_media,
)
from contextledger.history._estimate import estimate_part_tokens
from contextledger.history._projection import Message
from contextledger.history._view import is_real_user, soft_trimmed
from contextledger.prices._multipliers import DEFAULT_PRICE, Price
from contextledger.vocabulary._defaults import (
    CHARS_PER_TOKEN,
    PRUNE_MINIMUM_TOKENS,
    PRUNE_PROTECT_TOKENS,
    PRUNE_PROTECTED_TOOLS,
    STRIP_PROTECTED_TURNS,
)

#: How many turns, counted in user messages a person wrote (``is_real_user``) from the newest,
#: are never pruned.
PROTECTED_TURNS: Final = 2


class PrunePlan(msgspec.Struct, frozen=True):
    """Part ids whose outputs to clear, the tokens that frees, and why."""

    part_ids: tuple[str, ...]
    tokens: int
    reason: PruneReason


class TrimPlan(msgspec.Struct, frozen=True):
    """A tool output to soft-trim to its first ``head_chars`` and last ``tail_chars``."""

    part_id: str
    head_chars: int
    tail_chars: int


class StripPlan(msgspec.Struct, frozen=True):
    """File and reasoning parts to strip from the view, and why."""

    part_ids: tuple[str, ...]
    reason: PruneReason


Plan = PrunePlan | TrimPlan | StripPlan
PruneEvent = ToolOutputCleared | ToolOutputTrimmed | PartsStripped


class Candidates(msgspec.Struct, frozen=True):
    """The outputs the walk may clear, oldest first, the tokens they hold, and the index (in
    the messages walked) of the oldest one's message: the first message a prune changes, -1
    when there are none."""

    parts: tuple[ToolPart, ...]
    tokens: int
    first_message: int

    @property
    def part_ids(self) -> tuple[str, ...]:
        """The candidates' part ids, oldest first."""
        return tuple(part.id for part in self.parts)


class CostComparison(msgspec.Struct, frozen=True):
    """What the rest of the session costs in cached input (USD) if the prefix is kept and if
    it is pruned, and whether pruning is cheaper."""

    pays: bool
    keep: float
    prune: float


def output_tokens(output: str) -> int:
    """opencode's estimate of a tool output: four characters per token, halves rounded up
    (JavaScript's ``Math.round``)."""
    return (len(output) + CHARS_PER_TOKEN // 2) // CHARS_PER_TOKEN


def cache_cold(now_ms: int, last_finished_ms: int | None, ttl_ms: int) -> bool:
    """MiMo's gate: the prompt cache has expired when no assistant message has finished yet,
    or the last one finished more than ``ttl_ms`` before ``now_ms``."""
    return last_finished_ms is None or now_ms - last_finished_ms > ttl_ms


# --- the walk --------------------------------------------------------------------------------


def _old_outputs(
    messages: Sequence[Message],
    protected_tools: Sequence[str],
    *,
    protected_turns: int = PROTECTED_TURNS,
    trimmed_to: int | None = None,
) -> Iterator[tuple[int, ToolPart, ToolCompleted]]:
    """Completed outputs of unprotected tools before the ``protected_turns`` newest turns,
    newest first, with their message's index; the walk ends at a summary or at an output
    already cleared (or, with ``trimmed_to``, trimmed to at most that many characters at
    each end)."""
    users = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if is_real_user(message):
            users += 1
        if users < protected_turns:
            continue
        if message.role == "assistant" and message.summary:
            return
        for part in reversed(message.parts):
            if not isinstance(part, ToolPart) or not isinstance(part.state, ToolCompleted):
                continue
            if part.tool in protected_tools:
                continue
            trimmed = part.state.trimmed
            if part.state.compacted_ms is not None or (
                trimmed_to is not None and trimmed is not None and max(trimmed) <= trimmed_to
            ):
                return
            yield index, part, part.state


def prune_candidates(
    messages: Sequence[Message],
    *,
    protect_tokens: int = PRUNE_PROTECT_TOKENS,
    protected_tools: Sequence[str] = PRUNE_PROTECTED_TOOLS,
) -> Candidates:
    """The walk over ``messages`` (a view's history messages, in view order): the outputs
    beyond the newest ``protect_tokens`` of tool output."""
    kept = 0
    chosen: list[ToolPart] = []
    freed = 0
    first = -1
    for index, part, state in _old_outputs(messages, protected_tools):
        tokens = output_tokens(state.output)
        kept += tokens
        if kept > protect_tokens:
            chosen.append(part)
            freed += tokens
            first = index
    return Candidates(tuple(reversed(chosen)), freed, first)


# --- opencode --------------------------------------------------------------------------------


def plan_prune(
    messages: Sequence[Message],
    *,
    reason: PruneReason = "normal",
    protect_tokens: int = PRUNE_PROTECT_TOKENS,
    minimum_tokens: int = PRUNE_MINIMUM_TOKENS,
    protected_tools: Sequence[str] = PRUNE_PROTECTED_TOOLS,
) -> PrunePlan | None:
    """The outputs of ``messages`` (a view's history messages, oldest first) to clear, or
    None when clearing would free ``minimum_tokens`` or less."""
    candidates = prune_candidates(
        messages, protect_tokens=protect_tokens, protected_tools=protected_tools
    )
    if candidates.tokens <= minimum_tokens:
        return None
    return PrunePlan(candidates.part_ids, candidates.tokens, reason)


def clear_plan(
    messages: Sequence[Message], config: PruneConfig, reason: PruneReason
) -> PrunePlan | None:
    """``plan_prune`` of ``messages`` with ``config``'s protection, minimum and protected tools,
    for ``reason``; not gated by ``config.enabled``."""
    return plan_prune(
        messages,
        reason=reason,
        protect_tokens=config.protect_tokens,
        minimum_tokens=config.minimum_tokens,
        protected_tools=config.protected_tools,
    )


def _clear(messages: Sequence[Message], config: PruneConfig, reason: PruneReason) -> list[Plan]:
    plan = clear_plan(messages, config, reason)
    return [] if plan is None else [plan]


# --- MiMo's tiers ----------------------------------------------------------------------------


def plan_trims(messages: Sequence[Message], config: PruneConfig) -> list[TrimPlan]:
    """Level 1: each candidate longer than ``trim_threshold_chars`` trimmed to its first and
    last ``trim_keep_chars``, unless trimming would send no less than is sent already (the
    output is no longer than both ends, or an earlier trim kept as much or less)."""
    keep = config.trim_keep_chars
    candidates = prune_candidates(
        messages, protect_tokens=config.protect_tokens, protected_tools=config.protected_tools
    )
    return [
        TrimPlan(part.id, keep, keep)
        for part in candidates.parts
        if _trims(part, keep, config.trim_threshold_chars)
    ]


def _trims(part: ToolPart, keep: int, threshold: int) -> bool:
    state = part.state
    assert isinstance(state, ToolCompleted)
    size = len(state.output)
    if size <= threshold or size <= 2 * keep:
        return False
    return state.trimmed is None or sum(state.trimmed) > 2 * keep


def plan_strip(
    messages: Sequence[Message],
    *,
    protected_turns: int = STRIP_PROTECTED_TURNS,
    reason: PruneReason = "pressure",
) -> StripPlan | None:
    """MiMo's ``stripNonEssential``: the media file parts of user messages and the reasoning
    parts before the last ``protected_turns`` turns (from the ``protected_turns``-th newest
    user message on, nothing is touched), not stripped already; None when there are none.
    Like every prune it never touches the last ``PROTECTED_TURNS`` turns, whatever
    ``protected_turns`` says."""
    turns = max(protected_turns, PROTECTED_TURNS)
    part_ids = tuple(
        part.id
        for message in messages[: _turn_start(messages, turns)]
        for part in message.parts
        if part.id not in message.stripped and _strippable(message, part)
    )
    return StripPlan(part_ids, reason) if part_ids else None


def _turn_start(messages: Sequence[Message], turns: int) -> int:
    """The index of the ``turns``-th newest user message a person wrote (``is_real_user``);
    0 when there are fewer."""
    users = 0
    for index in range(len(messages) - 1, -1, -1):
        if is_real_user(messages[index]):
            users += 1
            if users == turns:
                return index
    return 0


def _strippable(message: Message, part: Part) -> bool:
    if isinstance(part, ReasoningPart):
        return True
    return message.role == "user" and isinstance(part, FilePart) and is_media(part.mime)


def plan_tiers(
    messages: Sequence[Message],
    *,
    level: int,
    now_ms: int,
    last_finished_ms: int | None,
    config: PruneConfig,
) -> list[Plan]:
    """MiMo's pressure tiers (``mode = "mimo"``): nothing unless the cache is cold
    (``config.cache_ttl_ms``) and ``level`` (``policy._overflow.pressure_level``) is at least
    1; level 1 soft-trims (``plan_trims``); level 2 and above clear the candidates when they
    free more than ``minimum_tokens`` and strip old media and reasoning (``plan_strip``)."""
    if level < 1 or not cache_cold(now_ms, last_finished_ms, config.cache_ttl_ms):
        return []
    if level == 1:
        return list(plan_trims(messages, config))
    strip = plan_strip(messages, protected_turns=config.strip_protected_turns)
    return _clear(messages, config, "pressure") + ([] if strip is None else [strip])


# --- cost ------------------------------------------------------------------------------------


def prune_pays(
    *,
    prompt_tokens: int,
    cut_tokens: int,
    freed_tokens: int,
    warm: bool,
    turns: int,
    price: Price,
) -> CostComparison:
    """Whether clearing ``freed_tokens`` after the first ``cut_tokens`` of a
    ``prompt_tokens`` prompt costs less input over the next ``turns`` requests than keeping
    the prompt as it is.

    With P = ``prompt_tokens``, c = ``cut_tokens`` (at most P), A = P − c (the tokens after
    the cut), F = ``freed_tokens`` (at most A), n = ``turns``, r and w the price's cache read
    and write multipliers and p its input price per token::

        keep  = p · (first_keep  + (n − 1) · r · P)
        prune = p · (first_prune + (n − 1) · r · (P − F))

        warm cache:  first_keep = r · P    first_prune = r · c + w · (A − F)
        cold cache:  first_keep = w · P    first_prune = w · (P − F)

    Keeping, the whole prefix is read from the cache on every request. Pruning, the next
    request reads the prefix up to the cut and writes everything after it again, smaller by
    F; later requests read the smaller prefix. A cold cache writes the whole prompt either
    way, so any saving pays. Tokens the session adds from now on cost the same either way
    and are left out. Pruning pays when F > 0 and prune < keep.
    """
    total = prompt_tokens
    cut = min(cut_tokens, total)
    freed = min(freed_tokens, total - cut)
    read, write, later = price.cache_read, price.cache_write, turns - 1
    if warm:
        first_keep = read * total
        first_prune = read * cut + write * (total - cut - freed)
    else:
        first_keep = write * total
        first_prune = write * (total - freed)
    keep = price.input_per_token * (first_keep + later * read * total)
    prune = price.input_per_token * (first_prune + later * read * (total - freed))
    return CostComparison(freed > 0 and prune < keep, keep, prune)


def plan_cost(
    messages: Sequence[Message],
    *,
    config: PruneConfig,
    prompt_tokens: int,
    warm: bool,
    price: Price = DEFAULT_PRICE,
    part_tokens: Mapping[str, int] | None = None,
) -> PrunePlan | None:
    """The candidates of the walk (reason ``cost``) when clearing them pays over
    ``config.expected_turns`` requests (``prune_pays``), else None.

    ``prompt_tokens`` is the size of the next prompt (the last reported prompt, or an
    estimate); the cut is that size less the estimated tokens of the messages from the first
    one the prune changes to the end. ``part_tokens`` (``History.state.part_tokens``) gives
    each part's estimate; without it they are estimated here.
    """
    candidates = prune_candidates(
        messages, protect_tokens=config.protect_tokens, protected_tools=config.protected_tools
    )
    if not candidates.parts:
        return None
    after = sum(
        _part_tokens(part, part_tokens)
        for message in messages[candidates.first_message :]
        for part in message.parts
    )
    comparison = prune_pays(
        prompt_tokens=prompt_tokens,
        cut_tokens=max(0, prompt_tokens - after),
        freed_tokens=candidates.tokens,
        warm=warm,
        turns=config.expected_turns,
        price=price,
    )
    if not comparison.pays:
        return None
    return PrunePlan(candidates.part_ids, candidates.tokens, "cost")


def _part_tokens(part: Part, known: Mapping[str, int] | None) -> int:
    if known is not None and part.id in known:
        return known[part.id]
    return estimate_part_tokens(part)


# --- batch ---------------------------------------------------------------------------------


#: A pressure no prompt reaches: ``batch`` then trims only when the trim pays.
NO_PRESSURE: Final = 2**62


@dataclass(frozen=True, kw_only=True)
class BatchBudget:
    """What the ``batch`` mode weighs beyond the prune settings: the newest tool output it
    keeps (``protect_tokens``), the prompt at which it trims whether or not that pays
    (``pressure_tokens``) if that brings it down to ``relief_tokens``, the calls to come it
    counts the saving over (``turns``) and whether an early compaction is due once a trim
    frees so many tokens (``compaction_due``, None without the economic cadence)."""

    protect_tokens: int
    pressure_tokens: int
    relief_tokens: int
    turns: int
    compaction_due: Callable[[int], bool] | None = None


def trimmed_tokens(output: str, keep: int) -> int:
    """The tokens (``output_tokens``) a soft trim to the first and last ``keep`` characters
    takes off ``output``; 0 when it would not shorten it."""
    return max(0, output_tokens(output) - output_tokens(soft_trimmed(output, (keep, keep))))


def plan_batch(
    messages: Sequence[Message],
    *,
    config: PruneConfig,
    protect_tokens: int,
    prompt_tokens: int,
    pressure_tokens: int,
    relief_tokens: int,
    warm: bool,
    turns: int,
    price: Price = DEFAULT_PRICE,
    compaction_due: Callable[[int], bool] | None = None,
) -> list[TrimPlan]:
    """``batch`` mode: every output of the walk (no turn protected, the newest
    ``protect_tokens`` of tool output kept, ending at an output already trimmed) that a trim
    to its first and last ``config.trim_keep_chars`` shortens, all trimmed at once, when the
    next prompt (``prompt_tokens``) reaches ``pressure_tokens`` and the trim brings it down to
    ``relief_tokens`` (else a compaction is due soon whatever is trimmed); below it, when an
    early compaction is due (``compaction_due(0)``, given how many tokens a trim frees) and
    the trim makes it not due; else when the trim pays over ``turns`` calls (``prune_pays``,
    the whole prompt written again). One batch is one cache break, however many outputs it
    trims."""
    keep = config.trim_keep_chars
    kept = 0
    chosen: list[tuple[str, int]] = []
    walk = _old_outputs(messages, config.protected_tools, protected_turns=0, trimmed_to=keep)
    for _, part, state in walk:
        kept += output_tokens(state.output)
        freed = trimmed_tokens(state.output, keep)
        if kept > protect_tokens and freed > 0:
            chosen.append((part.id, freed))
    if not chosen:
        return []
    freed = sum(tokens for _, tokens in chosen)
    if prompt_tokens >= pressure_tokens:
        # Under pressure a trim must leave room for the calls to come, or the compaction
        # that follows soon after would pay for a second rewrite.
        if prompt_tokens - freed > relief_tokens:
            return []
    elif compaction_due is not None and compaction_due(0):
        # An early compaction is due: trimming instead saves its summary call, unless the
        # compaction stays due (then it would write the trimmed prompt again anyway).
        if compaction_due(freed):
            return []
    else:
        # The cut is taken at the start: a provider that reads its cache only at the
        # request's breakpoints (Anthropic's last messages, 20 blocks back) writes everything
        # after the system prompt again when an old output changes.
        comparison = prune_pays(
            prompt_tokens=prompt_tokens,
            cut_tokens=0,
            freed_tokens=freed,
            warm=warm,
            turns=turns,
            price=price,
        )
        if not comparison.pays:
            return []
    return [TrimPlan(part_id, keep, keep) for part_id, _ in reversed(chosen)]


# --- one entry point -------------------------------------------------------------------------


def plan_after_turn(
    messages: Sequence[Message],
    *,
    config: PruneConfig,
    level: int,
    now_ms: int,
    last_finished_ms: int | None,
    prompt_tokens: int = 0,
    price: Price = DEFAULT_PRICE,
    part_tokens: Mapping[str, int] | None = None,
    batch: BatchBudget | None = None,
) -> list[Plan]:
    """The "normal" prune after a turn, by ``config.mode``; nothing unless ``config.enabled``.

    ``messages`` are the view's history messages (``history._view.view_messages``); ``level``
    is the pressure level (``policy._overflow.pressure_level``, used by ``mimo``);
    ``last_finished_ms`` is when the last assistant message finished (None: none has).
    ``cost`` and ``batch`` count the cache warm within ``price.ttl_s`` of it and use
    ``prompt_tokens``, ``price`` (``prices._multipliers.price_for``) and ``part_tokens`` as
    ``plan_cost`` and ``plan_batch`` do; ``batch`` also ``batch`` (without it: the configured
    protection, no pressure, ``expected_turns``).
    """
    if not config.enabled:
        return []
    warm = not cache_cold(now_ms, last_finished_ms, price.ttl_s * 1000)
    match config.mode:
        case "opencode":
            return _clear(messages, config, "normal")
        case "mimo":
            return plan_tiers(
                messages,
                level=level,
                now_ms=now_ms,
                last_finished_ms=last_finished_ms,
                config=config,
            )
        case "cost":
            plan = plan_cost(
                messages,
                config=config,
                prompt_tokens=prompt_tokens,
                warm=warm,
                price=price,
                part_tokens=part_tokens,
            )
            return [] if plan is None else [plan]
        case "batch":
            budget = batch or BatchBudget(
                protect_tokens=config.protect_tokens,
                pressure_tokens=NO_PRESSURE,
                relief_tokens=NO_PRESSURE,
                turns=config.expected_turns,
            )
            return list(
                plan_batch(
                    messages,
                    config=config,
                    protect_tokens=budget.protect_tokens,
                    prompt_tokens=prompt_tokens,
                    pressure_tokens=budget.pressure_tokens,
                    relief_tokens=budget.relief_tokens,
                    warm=warm,
                    turns=budget.turns,
                    price=price,
                    compaction_due=budget.compaction_due,
                )
            )


class _Stamp(TypedDict):
    session_id: str
    agent_id: str
    time_ms: int


def plan_events(
    plans: Sequence[Plan], *, session_id: str, time_ms: int, agent_id: str = MAIN_AGENT
) -> list[PruneEvent]:
    """The events that carry out ``plans``, stamped with the session, agent and time."""
    stamp = _Stamp(session_id=session_id, agent_id=agent_id, time_ms=time_ms)
    events: list[PruneEvent] = []
    for plan in plans:
        match plan:
            case PrunePlan():
                events.append(
                    ToolOutputCleared(**stamp, part_ids=plan.part_ids, reason=plan.reason)
                )
            case TrimPlan():
                events.append(
                    ToolOutputTrimmed(
                        **stamp,
                        part_id=plan.part_id,
                        head_chars=plan.head_chars,
                        tail_chars=plan.tail_chars,
                    )
                )
            case StripPlan():
                events.append(PartsStripped(**stamp, part_ids=plan.part_ids, reason=plan.reason))
    return events
