"""When a session's context is full: the usable window, overflow, preflight and output caps.

Every function here is pure (no I/O, no clock, no logging): model limits, a ``Config``, reported
usage and the outgoing messages come in; numbers and decisions come out. Three checks share
one window:

* **Looking back** (``is_overflow``, opencode / Kilo "line A"): the usage the provider reported
  for the last finished turn, against the compaction limit.
* **Looking ahead** (``should_compact_preflight``, Kilo "line B"): an inflated estimate of the
  request about to be sent, so a turn that would overflow compacts before it is sent.
* **Output** (``cap_output_tokens``, ``completion_budget``): the completion is cut from the same
  window, so its budget shrinks when the prompt grows.

The projects disagree on the usable window; ``compaction.overflow_variant`` picks one:

=========  ====================================================  =========  =========
variant    usable (no input limit; with ``limit.input``)         200K/32K   8K/8K
=========  ====================================================  =========  =========
opencode   context − max output;  input − reserved               168,000    0
kilo       context − max output − reserved;  input − reserved    148,000    0
mimo       min(⌊effective × ratio⌋, effective − reserve);        180,000    4,096
           ⌊effective × ratio⌋
=========  ====================================================  =========  =========

``mimo`` is the default. It is the newest of the three and fixes both known faults of the
others: a model with an input limit triggers at the same point as the same model without one
(opencode issues #10634, #8089, #11086, #12621), and a small window keeps a proportional trigger
instead of collapsing to 0 (where every turn would overflow and compact, forever). It also
takes a per-model budget (``compaction.max_context``). Among the opencode rules ``kilo`` is the
better one: it leaves the compaction prompt room even when the model has no input limit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Final, Literal

import msgspec

from contextledger.config import Config
from contextledger.events._parts import ToolSchema, Usage
from contextledger.vocabulary._defaults import (
    DEFAULT_TRIGGER_RATIO,
    OUTPUT_TOKEN_MAX,
    PREFLIGHT_FACTOR,
    PRESSURE_PERCENTS,
)
from contextledger.vocabulary._messages import (
    ModelContent,
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._models import Model, ModelLimits
from contextledger.vocabulary._quantities import (
    Quantity,
    is_reset_budget,
    parse_quantity,
    parse_trigger_ratio,
)

# --- constants -----------------------------------------------------------------------------

#: opencode ``COMPACTION_BUFFER``: what is kept free for the compaction request itself (its
#: prompt and the summary) when ``compaction.reserved`` is unset; never more than the model
#: can emit, so ``reserved = min(20,000, max output)``.
COMPACTION_BUFFER: Final = 20_000
#: Kilo: what a media payload is replaced by in the normalized count. Its bytes say little
#: about its token cost (a provider bills an image by its pixels), so the decision to compact
#: counts the marker and the raw count keeps the bytes.
MEDIA_MARKER: Final = "[encoded media]"
#: Kilo: what encrypted reasoning is replaced by; it replays as an opaque value whose length
#: is not a token count.
OPAQUE_MARKER: Final = "[opaque reasoning state]"
#: Provider-metadata keys holding encrypted reasoning: the AI SDK's (Kilo's rule) and the
#: OpenAI Responses API's.
OPAQUE_KEYS: Final = frozenset({"reasoningEncryptedContent", "encrypted_content"})

WindowSource = Literal["model", "config"]
#: ``compaction.max_context``: one quantity, or ``provider/model`` patterns to quantities.
MaxContext = Quantity | Mapping[str, Quantity]

_JSON = msgspec.json.Encoder()

# --- results -------------------------------------------------------------------------------


class Window(msgspec.Struct, frozen=True, kw_only=True):
    """MiMo's context window.

    ``hard`` is the provider's limit (the input limit if there is one, else the context);
    ``effective`` the configured budget within it; ``usable`` the compaction trigger. ``source``
    is ``"config"`` only when a budget was applied. ``ignored_budget`` says why a configured
    budget could not apply, for the shell to log once; it is None otherwise.
    """

    hard: int
    effective: int
    usable: int
    source: WindowSource
    ignored_budget: str | None = None


class PreflightMeasure(msgspec.Struct, frozen=True, kw_only=True):
    """Kilo's inflated estimate of an outgoing request, in tokens.

    ``normalized`` counts media and encrypted reasoning as their markers; ``raw`` counts their
    payloads; ``tail`` is the messages after the last assistant message (what a reported usage
    does not cover yet); ``overhead`` the tool schemas and system text (re-sent every request);
    ``continuation`` is true mid tool round; ``media`` the number of media payloads.
    """

    normalized: int
    raw: int
    tail: int
    overhead: int
    continuation: bool
    media: int


class ReportedTurn(msgspec.Struct, frozen=True, kw_only=True):
    """The last finished assistant message and the usage its provider reported.

    ``total`` is the provider's own total when it sent one (0 otherwise).
    """

    message_id: str
    usage: Usage
    summary: bool = False
    total: int = 0


PreflightReason = Literal["disabled", "mid-tool-round", "under-limit", "limit-reached"]


class PreflightDecision(msgspec.Struct, frozen=True, kw_only=True):
    """Whether to compact before sending, and the numbers behind it.

    ``projected`` is ``reported + tail + overhead`` when a report was usable (``source`` is
    ``"reported"``), else the normalized estimate (``"estimate"``); ``limit`` is the compaction
    limit it was compared with. ``reason`` says why ``compact`` is what it is.
    """

    compact: bool
    reason: PreflightReason
    projected: int
    limit: int
    source: Literal["reported", "estimate"]


# --- output caps ---------------------------------------------------------------------------


def max_output_tokens(limits: ModelLimits, cap: int = OUTPUT_TOKEN_MAX) -> int:
    """The output a request asks for by default: the model's output limit, at most ``cap``;
    ``cap`` when the limit is unknown (opencode ``maxOutputTokens``)."""
    return min(limits.output, cap) or cap


def cap_output_tokens(
    model: Model,
    configured: int | None,
    measure: PreflightMeasure,
    cfg: Config,
    *,
    reported: int | None = None,
) -> int | None:
    """Kilo ``capOutputTokens``: ``configured`` lowered so prompt plus output fit the window.

    The prompt is the larger of ``reported`` (the last turn's provider count, which sees media
    the client cannot) and the normalized estimate plus ``output.media_reserve`` per media item,
    so it never under-counts. Returns None for None or a non-positive ``configured``, and
    ``configured`` unchanged when the window is unknown, when it already fits, or when the
    prompt alone fills the window: the provider's real overflow error then triggers compaction
    (bounded by the attempt cap) instead of a guess. Otherwise the room left after
    ``output.safety``, never below ``output.min`` and never above ``configured`` (Kilo would
    raise a configured value below ``output.min`` up to it).
    """
    if configured is None or configured <= 0:
        return None
    context = model.limits.context
    if context == 0:
        return configured
    out = cfg.output
    estimated = measure.normalized + measure.media * out.media_reserve
    available = context - max(reported or 0, estimated) - out.safety
    if available <= 0 or available >= configured:
        return configured
    return min(configured, max(out.min, available))


def completion_budget(
    model: Model, requested: int | None, input_tokens: Callable[[], int], cfg: Config
) -> int | None:
    """MiMo ``completionBudget``: ``requested`` trimmed to what the window leaves.

    None stays None. A model with an input limit budgets output separately, and a model with
    an unknown window has nothing to trim against: both get ``requested`` unchanged and
    ``input_tokens`` is never called (the estimate serialises the whole request). Otherwise
    ``min(requested, max(output.min, context - prompt - output.completion_margin))``.
    """
    limits = model.limits
    if requested is None:
        return None
    if limits.input or limits.context == 0:
        return requested
    room = limits.context - input_tokens() - cfg.output.completion_margin
    return min(requested, max(cfg.output.min, room))


def output_budget(
    model: Model,
    configured: int | None,
    measure: PreflightMeasure,
    cfg: Config,
    *,
    reported: int | None = None,
) -> int | None:
    """The output to request, by ``output.budget_rule``: ``"kilo"`` (default) is
    ``cap_output_tokens``; ``"mimo"`` is ``completion_budget`` with the prompt taken as the
    larger of ``reported`` and the normalized estimate."""
    if cfg.output.budget_rule == "mimo":
        return completion_budget(
            model, configured, lambda: max(reported or 0, measure.normalized), cfg
        )
    return cap_output_tokens(model, configured, measure, cfg, reported=reported)


# --- counting reported usage ---------------------------------------------------------------


def upstream_count(usage: Usage, total: int = 0) -> int:
    """opencode's overflow count: the provider's ``total`` if it sent one, else input + output
    + cache read + cache write (reasoning not counted separately)."""
    return total or usage.input + usage.output + usage.cache_read + usage.cache_write


def full_count(usage: Usage, total: int = 0) -> int:
    """Kilo's overflow count: input + output + reasoning + cache read + cache write, falling
    back to the provider's ``total`` when every component is 0."""
    return usage.total or total


def token_count(usage: Usage, cfg: Config, total: int = 0) -> int:
    """The context a reported turn occupies, by ``compaction.count`` (``"full"`` by default)."""
    if cfg.compaction.count == "upstream":
        return upstream_count(usage, total)
    return full_count(usage, total)


# --- the usable window ---------------------------------------------------------------------


def compaction_reserve(model: Model, cfg: Config) -> int:
    """The tokens kept free for the compaction request: ``compaction.reserved``, or
    ``min(COMPACTION_BUFFER, max output)`` when unset (opencode)."""
    reserved = cfg.compaction.reserved
    if reserved is not None:
        return reserved
    return min(COMPACTION_BUFFER, max_output_tokens(model.limits, cfg.output.max_tokens))


def usable(model: Model, cfg: Config) -> int:
    """The tokens a session may fill before it must compact, by ``compaction.overflow_variant``
    (see the module docstring). 0 when the context window is unknown; never negative."""
    limits = model.limits
    if limits.context == 0:
        return 0
    variant = cfg.compaction.overflow_variant
    if variant == "mimo":
        return context_window(model, cfg).usable
    reserved = compaction_reserve(model, cfg)
    if limits.input:
        return max(0, limits.input - reserved)
    room = limits.context - max_output_tokens(limits, cfg.output.max_tokens)
    if variant == "kilo":
        room -= reserved
    return max(0, room)


def compaction_limit(model: Model, cfg: Config) -> int:
    """Kilo ``limit``: ``usable``, lowered to ``⌊context × threshold_percent / 100⌋`` when
    ``compaction.threshold_percent`` is set (an earlier trigger, never a later one)."""
    window = usable(model, cfg)
    percent = cfg.compaction.threshold_percent
    context = model.limits.context
    if percent is None or context == 0:
        return window
    return min(window, math.floor(context * _exact(percent) / 100))


def is_overflow(model: Model, usage: Usage, cfg: Config, *, total: int = 0) -> bool:
    """True when a finished turn's reported usage reaches the compaction limit.

    Always False with ``compaction.auto`` off or an unknown context window.
    """
    if not cfg.compaction.auto or model.limits.context == 0:
        return False
    return token_count(usage, cfg, total) >= compaction_limit(model, cfg)


def step_overflows(model: Model, reported: Usage, written_tokens: int, cfg: Config) -> bool:
    """True when the request about to be sent reaches the compaction limit: what the provider
    counted for the latest answer (``reported``, by ``compaction.count``) plus what was
    written since (``written_tokens``, estimated, inflated by ``tokens.preflight_factor`` as
    Kilo's preflight tail is). Inside a tool loop this is the step whose results would carry
    the next request past the limit. Always False with ``compaction.auto`` or
    ``compaction.step_guard`` off, or an unknown context window.
    """
    if not (cfg.compaction.auto and cfg.compaction.step_guard) or model.limits.context == 0:
        return False
    written = inflated(written_tokens, cfg.tokens.preflight_factor)
    return token_count(reported, cfg) + written >= compaction_limit(model, cfg)


# --- MiMo: budget, trigger ratio, pressure -------------------------------------------------


def effective_trigger_ratio(value: float | str | None) -> float:
    """MiMo's lenient reading of a trigger ratio (as from an environment variable): the ratio
    when ``parse_trigger_ratio`` accepts it, else the 0.9 default."""
    return parse_trigger_ratio(value) or DEFAULT_TRIGGER_RATIO


def effective_budget(
    max_context: MaxContext | None, model: Model, reserved: int
) -> tuple[int, str | None]:
    """MiMo ``budget``: the effective window for ``model`` under ``max_context``, and why a
    configured budget was ignored (None when none was).

    A map picks its longest pattern matching ``provider/model`` (no match: no budget). The
    model's hard window (input limit, else context) is returned for no budget, a reset
    sentinel, a budget at or above it (a budget never raises the window), an unparseable
    value, and a budget of at most ``reserved`` tokens (it would leave the conversation no
    room); the last two come with a reason. 0 for an unknown window.
    """
    limits = model.limits
    if limits.context == 0:
        return 0, None
    hard = limits.input or limits.context
    if max_context is None:
        return hard, None
    where = "compaction.max_context"
    if isinstance(max_context, Mapping):
        pattern = _longest_match(max_context, model.key)
        if pattern is None:
            return hard, None
        value: Quantity = max_context[pattern]
        where = f"{where}[{pattern!r}]"
    else:
        value = max_context
    if is_reset_budget(value):
        return hard, None
    quantity = parse_quantity(value, base=hard)
    if quantity is None:
        return hard, (
            f"{where} = {value!r} is not a token quantity; "
            f"{model.key} uses its model window ({hard:,})"
        )
    if quantity >= hard:
        return hard, None
    if quantity <= reserved:
        return hard, (
            f"{where} = {value!r} leaves no room for the {reserved:,}-token compaction reserve; "
            f"{model.key} uses its model window ({hard:,})"
        )
    return quantity, None


def budget_pattern_matches(pattern: str, key: str) -> bool:
    """True when ``key`` (``provider/model``) matches ``pattern``, where ``*`` matches any run
    of characters (``/`` included) and everything else matches itself, case-sensitively."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, key) is not None


def context_window(model: Model, cfg: Config) -> Window:
    """MiMo ``contextWindow``: the hard limit, the effective budget and the usable trigger.

    ``effective`` is ``compaction.max_context`` (a quantity, a percentage of ``hard``, or a map
    of ``provider/model`` patterns where the longest match wins) clamped to ``hard``; it falls
    back to ``hard`` when unset, reset (``0``, ``"0"``, ``""``), matching no pattern,
    unparseable, or leaving no room for the compaction reserve (the last two set
    ``ignored_budget``). ``usable = ⌊effective × trigger ratio⌋``, and for a model without an
    input limit also at most ``effective - min(max output, 20,000, ⌊effective / 2⌋)``.
    Guarantees ``0 <= usable <= effective <= hard``; all 0 for an unknown window.
    """
    limits = model.limits
    if limits.context == 0:
        return Window(hard=0, effective=0, usable=0, source="model")
    hard = limits.input or limits.context
    reserved = compaction_reserve(model, cfg)
    effective, ignored = effective_budget(cfg.compaction.max_context, model, reserved)
    ratio = effective_trigger_ratio(cfg.compaction.trigger_ratio)
    trigger = math.floor(effective * _exact(ratio))
    if limits.input:
        window = trigger
    else:
        output = max_output_tokens(limits, cfg.output.max_tokens)
        reserve = min(output, cfg.compaction.output_reserve_cap, effective // 2)
        window = min(trigger, effective - reserve)
    return Window(
        hard=hard,
        effective=effective,
        usable=max(0, window),
        source="model" if effective == hard else "config",
        ignored_budget=ignored,
    )


def pressure_for(
    tokens: int, limit: int, percents: tuple[int, int, int] = PRESSURE_PERCENTS
) -> int:
    """0, 1, 2 or 3 as ``tokens`` reaches each of ``percents`` (50 %, 70 % and 85 %) of
    ``limit`` (exact integer comparisons: exactly 50 % is level 1); 0 when ``limit`` is not
    positive."""
    if limit <= 0:
        return 0
    return sum(1 for percent in percents if tokens * 100 >= limit * percent)


def context_pressure_level(model: Model, usage: Usage, cfg: Config, *, total: int = 0) -> int:
    """How full the context is against the compaction limit (0-3), whether or not automatic
    compaction is on: for displays and checkpoints. 0 for an unknown window."""
    if model.limits.context == 0:
        return 0
    return pressure_for(
        token_count(usage, cfg, total),
        compaction_limit(model, cfg),
        cfg.compaction.pressure_percents,
    )


def pressure_level(model: Model, usage: Usage, cfg: Config, *, total: int = 0) -> int:
    """MiMo ``pressureLevel``: ``context_pressure_level``, but 0 when ``compaction.auto`` is off
    (nothing will act on the pressure)."""
    if not cfg.compaction.auto:
        return 0
    return context_pressure_level(model, usage, cfg, total=total)


# --- Kilo preflight ------------------------------------------------------------------------


def preflight_enabled(model: Model, cfg: Config) -> bool:
    """Kilo: preflight is opt-in. True when ``compaction.auto`` is on, ``threshold_percent`` is
    set and the context window is known."""
    compaction = cfg.compaction
    return compaction.auto and compaction.threshold_percent is not None and model.limits.context > 0


def inflated(tokens: int, factor: float = PREFLIGHT_FACTOR) -> int:
    """Kilo's inflation of an estimate: ``tokens`` times ``factor`` (the configured
    ``tokens.preflight_factor``), rounded up exactly (10 x 1.3 is 13)."""
    return math.ceil(tokens * _exact(factor))


def measure_preflight(
    messages: Sequence[ModelMessage],
    cfg: Config,
    *,
    tools: Sequence[ToolSchema] = (),
    system: Sequence[str] = (),
) -> PreflightMeasure:
    """Kilo ``measure``: the outgoing request in inflated estimated tokens.

    Messages and tools are serialised with msgspec JSON and counted at
    ``tokens.chars_per_token`` characters per token (rounded, like ``Token.estimate``), then
    multiplied by ``tokens.preflight_factor`` and rounded up (exactly: 10 x 1.3 is 13).
    Every file payload (a ``ModelFile.url``, in content or tool-result attachments) counts as
    ``MEDIA_MARKER`` in ``normalized`` and in full in ``raw``; encrypted reasoning likewise
    with ``OPAQUE_MARKER``. ``system`` is the system text sent ahead of the messages.
    """
    per_token, factor = cfg.tokens.chars_per_token, cfg.tokens.preflight_factor
    sizes = [_message_size(message, per_token) for message in messages]
    last_assistant = _last_index(messages, "assistant")
    message_tokens = _estimate(_array_chars([chars for chars, _, _ in sizes]), per_token)
    tail_chars = _array_chars([chars for chars, _, _ in sizes[last_assistant + 1 :]])
    extra = sum(extra for _, extra, _ in sizes)
    tool_tokens = _estimate(len(_JSON.encode(tuple(tools)).decode()), per_token)
    lead = sum(_estimate(len(text), per_token) for text in system)
    return PreflightMeasure(
        normalized=inflated(message_tokens + lead + tool_tokens, factor),
        raw=inflated(message_tokens + extra + lead + tool_tokens, factor),
        tail=preflight_tokens(tail_chars, cfg),
        overhead=inflated(tool_tokens + lead, factor),
        continuation=mid_tool_round(messages),
        media=sum(media for _, _, media in sizes),
    )


def preflight_tokens(chars: int, cfg: Config) -> int:
    """Kilo's inflated estimate of ``chars`` characters of a request: ``chars`` at
    ``tokens.chars_per_token`` a token (rounded half up, as ``Token.estimate``), times
    ``tokens.preflight_factor`` rounded up exactly. ``measure_preflight``'s tail is this of
    the tail's JSON; the request builder's output cap takes the prompt as this of the encoded
    messages' bytes when it counts with the plain estimate."""
    return inflated(_estimate(chars, cfg.tokens.chars_per_token), cfg.tokens.preflight_factor)


def mid_tool_round(messages: Sequence[ModelMessage]) -> bool:
    """Kilo ``continued``: True when a ``tool`` message follows the last ``user`` message, i.e.
    the model is mid tool round. Preflight never compacts then: it would split tool calls from
    their results."""
    last_user = _last_index(messages, "user")
    return any(message.role == "tool" for message in messages[last_user + 1 :])


def preflight_baseline(
    newest_assistant_id: str | None, finished: ReportedTurn | None, cfg: Config
) -> int | None:
    """Kilo ``baseline``: the reported context to project from, or None when the estimate must
    decide alone: no finished turn, a summary turn, a newer unfinished assistant message
    trailing the finished one, or a report without prompt-side tokens."""
    if finished is None or finished.summary:
        return None
    if newest_assistant_id != finished.message_id:
        return None
    if finished.usage.prompt == 0:
        return None
    return token_count(finished.usage, cfg, finished.total)


def should_compact_preflight(
    model: Model, measure: PreflightMeasure, cfg: Config, *, reported: int | None = None
) -> PreflightDecision:
    """Kilo ``shouldCompact``: compact before sending when the projected request reaches the
    compaction limit.

    The projection is ``reported + tail + overhead`` when ``reported`` (see
    ``preflight_baseline``) is positive (new messages, system text and tools added to what the
    provider counted; unchanged overhead is counted twice, a bounded over-count that never lets
    the threshold be bypassed), else the normalized estimate. Never compacts when preflight is
    disabled or mid tool round.
    """
    limit = compaction_limit(model, cfg)
    if reported is not None and reported > 0:
        projected = reported + measure.tail + measure.overhead
        source: Literal["reported", "estimate"] = "reported"
    else:
        projected = measure.normalized
        source = "estimate"
    reason: PreflightReason
    if not preflight_enabled(model, cfg):
        reason = "disabled"
    elif measure.continuation:
        reason = "mid-tool-round"
    else:
        reason = "limit-reached" if projected >= limit else "under-limit"
    return PreflightDecision(
        compact=reason == "limit-reached",
        reason=reason,
        projected=projected,
        limit=limit,
        source=source,
    )


# --- internals -----------------------------------------------------------------------------


def _exact(number: float) -> Fraction:
    """``number`` as the decimal it was written as (0.7 is 7/10, not 0.6999...)."""
    return Fraction(repr(number))


def _estimate(chars: int, per_token: int) -> int:
    """``Token.estimate``: characters / ``per_token``, rounded half up; 0 for 0."""
    return (2 * chars + per_token) // (2 * per_token)


def _array_chars(lengths: Sequence[int]) -> int:
    """The length of a JSON array of items of ``lengths`` characters (brackets and commas)."""
    return 2 + sum(lengths) + max(0, len(lengths) - 1)


def _last_index(messages: Sequence[ModelMessage], role: str) -> int:
    return max((i for i, message in enumerate(messages) if message.role == role), default=-1)


def _message_size(message: ModelMessage, per_token: int) -> tuple[int, int, int]:
    """(JSON characters with payloads replaced by markers, surplus tokens of the replaced
    payloads, number of media payloads) of one message."""
    media_tokens = _estimate(len(MEDIA_MARKER), per_token)
    content: list[ModelContent] = []
    extra = media = opaque = 0
    for item in message.content:
        match item:
            case ModelFile(url=url):
                extra += max(0, _estimate(len(url), per_token) - media_tokens)
                media += 1
                item = msgspec.structs.replace(item, url=MEDIA_MARKER)
            case ModelToolResult(attachments=attachments) if attachments:
                for attachment in attachments:
                    extra += max(0, _estimate(len(attachment.url), per_token) - media_tokens)
                media += len(attachments)
                markers = tuple(msgspec.structs.replace(a, url=MEDIA_MARKER) for a in attachments)
                item = msgspec.structs.replace(item, attachments=markers)
            case (
                ModelReasoning(provider_metadata=metadata)
                | ModelToolCall(provider_metadata=metadata)
            ) if metadata:
                redacted, surplus, hits = _redact_opaque(metadata, per_token)
                if hits:
                    extra += surplus
                    opaque += hits
                    item = msgspec.structs.replace(item, provider_metadata=redacted)
            case _:
                pass
        content.append(item)
    if media or opaque:
        message = msgspec.structs.replace(message, content=tuple(content))
    return len(_JSON.encode(message).decode()), extra, media


def _redact_opaque(value: Any, per_token: int) -> tuple[Any, int, int]:
    """``value`` with every string under an ``OPAQUE_KEYS`` key replaced by ``OPAQUE_MARKER``,
    the tokens those strings had beyond the marker's, and how many were replaced."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        surplus = hits = 0
        for key, item in value.items():
            if key in OPAQUE_KEYS and isinstance(item, str):
                marker = _estimate(len(OPAQUE_MARKER), per_token)
                out[key] = OPAQUE_MARKER
                surplus += max(0, _estimate(len(item), per_token) - marker)
                hits += 1
            else:
                out[key], more, found = _redact_opaque(item, per_token)
                surplus += more
                hits += found
        return out, surplus, hits
    if isinstance(value, list | tuple):
        triples = [_redact_opaque(item, per_token) for item in value]
        return (
            [item for item, _, _ in triples],
            sum(more for _, more, _ in triples),
            sum(found for _, _, found in triples),
        )
    return value, 0, 0


def _longest_match(patterns: Mapping[str, Quantity], key: str) -> str | None:
    """The longest pattern matching ``key``; among equally long ones the one with fewer
    wildcards, then the first listed."""
    best: str | None = None
    for pattern in patterns:
        if not budget_pattern_matches(pattern, key):
            continue
        if best is None or (len(pattern), -pattern.count("*")) > (len(best), -best.count("*")):
            best = pattern
    return best
