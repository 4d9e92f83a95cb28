"""One typed configuration for every knob of the context policy.

``Config`` is a tree of frozen msgspec Structs, loaded from TOML or JSON (``Config.load``,
``from_toml``, ``from_json``, ``from_dict``) or built in Python. Every default below names its
reason and precedent; a default that a policy function shares is defined once, in
``contextledger.vocabulary._defaults``, and referenced both here and there. Validation happens
once, when a config is made: types, ranges and unknown keys by msgspec, then the rules msgspec
cannot express (quantity strings, ratios, cross-field rules). Any bad value raises
``ConfigError`` naming its dotted key::

    compaction.trigger_ratio: must be in (0, 1] or a percentage in (0%, 100%], got 1.5

Sections built directly in Python are checked the same way (ranges, literals, rules), so a
``Config`` that exists is valid.

Example TOML::

    [compaction]
    overflow_variant = "mimo"
    trigger_ratio = "85%"
    [compaction.max_context]
    "anthropic/claude-*" = "150K"
    "openai/gpt-5*" = "50%"

    [output]
    max_tokens = 16_000
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Final, Literal

import msgspec
import structlog
from msgspec import Meta
from msgspec import inspect as mi

from contextledger.events._errors import LedgerError
from contextledger.vocabulary._defaults import (
    CHARS_PER_TOKEN,
    COMPLETION_MARGIN,
    DEFAULT_TRIGGER_RATIO,
    MEDIA_OUTPUT_RESERVE,
    MIN_OUTPUT,
    OUTPUT_RESERVE_CAP,
    OUTPUT_SAFETY,
    OUTPUT_TOKEN_MAX,
    PREFLIGHT_FACTOR,
    PRESSURE_PERCENTS,
    PRUNE_MINIMUM_TOKENS,
    PRUNE_PROTECT_TOKENS,
    PRUNE_PROTECTED_TOOLS,
    SOFT_TRIM_KEEP_CHARS,
    STRIP_PROTECTED_TURNS,
    SUMMARY_TOOL_OUTPUT_CHARS,
    TOOL_OUTPUT_MAX_BYTES,
    TOOL_OUTPUT_MAX_LINES,
)
from contextledger.vocabulary._options import (
    OutputBudgetRule,
    OverflowVariant,
    TemplateName,
    TokenCountRule,
)
from contextledger.vocabulary._quantities import (
    Quantity,
    is_reset_budget,
    parse_quantity,
    parse_trigger_ratio,
)
from contextledger.vocabulary._requests import CacheMode, CachePolicy, CacheTTL, MessageTarget

__all__ = [
    "CompactionConfig",
    "Config",
    "ConfigError",
    "OutputConfig",
    "PruneConfig",
    "TokensConfig",
    "ToolOutputConfig",
    "WarnOnce",
]

NonNegative = Annotated[int, Meta(ge=0)]
Positive = Annotated[int, Meta(gt=0)]
#: A multiplier on token estimates: positive and finite (10x is already absurd).
Factor = Annotated[float, Meta(gt=0, le=10)]
Percent = Annotated[float, Meta(gt=0, le=100)]
Ratio = Annotated[float, Meta(gt=0, le=1)]
MaxContext = Quantity | dict[str, Quantity]
TokenCounter = Literal["estimate", "calibrated", "tiktoken"]
TruncateDirection = Literal["head", "tail"]
PagingTool = Literal["truncated", "always", "never"]
EnvironmentMode = Literal["each", "latest", "none"]
HistoricalMedia = Literal["compaction", "latest-user", "keep"]
PruneMode = Literal["opencode", "mimo", "cost", "batch"]

#: How a percentage is checked for syntax when the window it applies to is not known yet.
_ANY_BASE: Final = 1_000_000


class ConfigError(LedgerError):
    """A configuration value is missing its type, out of range, unknown or inconsistent.

    ``key`` is the dotted path of the value (``compaction.trigger_ratio``,
    ``prune.protected_tools[0]``), or None when the whole document is at fault (bad TOML).
    """

    def __init__(self, key: str | None, reason: str) -> None:
        super().__init__(f"{key}: {reason}" if key else reason)
        self.key = key
        self.reason = reason


# --- validation internals ------------------------------------------------------------------


def _check_quantity(section: _Section, key: str, value: Quantity) -> None:
    if is_reset_budget(value) or parse_quantity(value, base=_ANY_BASE) is not None:
        return
    raise section._error(
        key,
        "must be a token quantity (300000, '300K', '1.5M', a percentage in (0%, 100%]) "
        f"or 0 for the model window, got {value!r}",
    )


@functools.cache
def _field_types(cls: type[msgspec.Struct]) -> tuple[tuple[str, mi.Type], ...]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return tuple((field.name, field.type) for field in info.fields)


def _constraint_problem(kind: mi.Type, value: object) -> str | None:
    """What is wrong with ``value`` against ``kind``'s range or literal values, if anything
    (types themselves are msgspec's and mypy's business)."""
    if isinstance(kind, mi.UnionType):
        for member in kind.types:
            if _member_accepts(member, value):
                return _constraint_problem(member, value)
        return None
    if isinstance(kind, mi.LiteralType):
        if value not in kind.values:
            return f"must be one of {', '.join(repr(v) for v in kind.values)}"
        return None
    if isinstance(kind, mi.IntType | mi.FloatType) and _is_number(value):
        assert isinstance(value, int | float)
        bounds = (("<", kind.lt), ("<=", kind.le), (">", kind.gt), (">=", kind.ge))
        for op, bound in bounds:
            if bound is not None and not _holds(value, op, bound):
                return f"must be {op} {_number(bound)}"
    return None


def _member_accepts(member: mi.Type, value: object) -> bool:
    if isinstance(member, mi.IntType):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(member, mi.FloatType):
        return _is_number(value)
    if isinstance(member, mi.LiteralType):
        return isinstance(value, str)
    return False


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: float) -> str:
    """A bound as written in a message: ``0``, not ``0.0``."""
    return str(int(value)) if float(value).is_integer() else str(value)


def _holds(value: float, op: str, bound: float) -> bool:
    match op:
        case "<":
            return value < bound
        case "<=":
            return value <= bound
        case ">":
            return value > bound
        case _:
            return value >= bound


_AT = re.compile(r"(?P<reason>.*?)(?: - at `\$(?P<path>[^`]*)`)?", re.DOTALL)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<name>[^`]*)`")
_BOUND = re.compile(r"Expected `[^`]+` (?P<op>>=|>|<=|<) (?P<bound>\S+)")
_ENUM = re.compile(r"Invalid enum value ")
_MISSING: Final = object()


def _translate(message: str, data: Mapping[str, Any]) -> ConfigError:
    """A ``ConfigError`` naming the dotted key of msgspec's ``message`` (``... - at
    `$.compaction.trigger_ratio```), with the offending value when it can be found."""
    match = _AT.fullmatch(message)
    assert match is not None
    reason = match["reason"]
    steps: list[str | int | None] = []
    for name, index in _STEP.findall(match["path"] or ""):
        steps.append(name if name else (None if index == "..." else int(index)))
    unknown = _UNKNOWN.fullmatch(reason)
    if unknown is not None:
        steps.append(unknown["name"])
        known = _known_keys(steps[:-1])
        return ConfigError(_dotted(steps), f"unknown key (known: {', '.join(known)})")
    value = _value_at(data, steps)
    got = "" if value is _MISSING else f", got {value!r}"
    bound = _BOUND.fullmatch(reason)
    if bound is not None:
        limit = _number(float(bound["bound"]))
        return ConfigError(_dotted(steps), f"must be {bound['op']} {limit}{got}")
    kind = _type_at(steps)
    if _ENUM.match(reason) and isinstance(kind, mi.LiteralType):
        allowed = ", ".join(repr(v) for v in kind.values)
        return ConfigError(_dotted(steps), f"must be one of {allowed}{got}")
    return ConfigError(_dotted(steps) or None, reason[:1].lower() + reason[1:])


def _dotted(steps: list[str | int | None]) -> str:
    out = ""
    for step in steps:
        if isinstance(step, str):
            out += f".{step}" if out else step
        else:
            out += "[...]" if step is None else f"[{step}]"
    return out


def _value_at(data: Any, steps: list[str | int | None]) -> Any:
    for step in steps:
        if step is None:
            return _MISSING
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return data


def _type_at(steps: list[str | int | None]) -> mi.Type | None:
    kind: mi.Type | None = mi.type_info(Config)
    for step in steps:
        if isinstance(kind, mi.UnionType):
            kind = next((t for t in kind.types if not isinstance(t, mi.NoneType)), None)
        if isinstance(kind, mi.StructType) and isinstance(step, str):
            kind = next((f.type for f in kind.fields if f.name == step), None)
        elif isinstance(kind, mi.DictType):
            kind = kind.value_type
        elif isinstance(kind, mi.ListType | mi.VarTupleType):
            kind = kind.item_type
        else:
            return None
    return kind


def _known_keys(steps: list[str | int | None]) -> list[str]:
    kind = _type_at(steps)
    if isinstance(kind, mi.StructType):
        return [field.name for field in kind.fields]
    return []


# --- sections ----------------------------------------------------------------------------


class _Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A config section: checks its ranges and literals on construction, then ``_check``."""

    _name: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for field, kind in _field_types(type(self)):
            value = getattr(self, field)
            problem = _constraint_problem(kind, value)
            if problem is not None:
                raise ConfigError(f"{self._name}.{field}", f"{problem}, got {value!r}")
        self._check()

    def _check(self) -> None:
        """Rules msgspec's types cannot express; raise ``ConfigError``."""

    def _error(self, field: str, reason: str) -> ConfigError:
        return ConfigError(f"{self._name}.{field}", reason)


class CompactionConfig(_Section, frozen=True):
    """When the context counts as full, and what compaction keeps (opencode ``compaction``)."""

    _name: ClassVar[str] = "compaction"

    #: opencode / Kilo: automatic compaction is on unless turned off; off also turns off
    #: preflight and pressure levels.
    auto: bool = True
    #: opencode: tokens kept free for the compaction request; None means
    #: min(20,000, max output) (``COMPACTION_BUFFER``). Under ``mimo`` it only decides
    #: whether a ``max_context`` budget leaves room.
    reserved: NonNegative | None = None
    #: Kilo: compact by ``threshold_percent`` % of the context at the latest (earlier than the
    #: usable window, never later); setting it also turns preflight on. None: off (Kilo's
    #: default: preflight is opt-in).
    threshold_percent: Percent | None = None
    #: MiMo: a token budget below the model window: a quantity (300000, "300K", "50%") or a map
    #: of "provider/model" patterns with ``*`` (the longest matching pattern wins); 0, "0" or
    #: "" means the model window. Applies to ``overflow_variant = "mimo"`` only.
    max_context: MaxContext | None = None
    #: MiMo: compact at this share of the effective window: a decimal in (0, 1] or "75%".
    #: 0.9 leaves 10 % for the next turn's growth. Used by the ``mimo`` variant.
    trigger_ratio: float | str = DEFAULT_TRIGGER_RATIO
    #: Which usable-window rule decides overflow (see ``policy._overflow``). "mimo": it is
    #: symmetric for models with and without an input limit and never collapses to 0 on small
    #: windows; "kilo" and "opencode" reproduce those projects exactly.
    overflow_variant: OverflowVariant = "mimo"
    #: How a reported turn is counted. "full" (Kilo): input + output + reasoning + cache read
    #: and write, which never under-counts; "upstream" (opencode): the provider total, else
    #: input + output + cache.
    count: TokenCountRule = "full"
    #: opencode ``DEFAULT_TAIL_TURNS``: the last 2 user turns stay verbatim after a compaction
    #: (the current task and the one before it); 0 keeps no tail.
    tail_turns: NonNegative = 2
    #: opencode: the token budget of that verbatim tail; None means
    #: clamp(usable x 0.25, 2,000, 8,000).
    preserve_recent_tokens: NonNegative | None = None
    #: MiMo: pressure levels 1, 2 and 3 start at these percentages of the usable window
    #: (prune tiers act from level 1; level 3 is about to compact at the 0.9 trigger).
    pressure_percents: tuple[int, int, int] = PRESSURE_PERCENTS
    #: MiMo ``OUTPUT_CAP``: at most this many output tokens are set aside from the window
    #: (models advertising 128K outputs would otherwise lose most of it).
    output_reserve_cap: NonNegative = OUTPUT_RESERVE_CAP
    #: The summary's structure: "opencode" (Goal ... Relevant Files) or "continuation" (the
    #: five-section continuation summary of pi and MiMo Code).
    template: TemplateName = "opencode"
    #: Kilo ``MAX_COMPACTION_ATTEMPTS``: a turn that still overflows after 3 compactions stops
    #: with an error instead of looping.
    max_attempts: Positive = 3
    #: What ``max_attempts`` counts compactions within: "step" (since the last assistant step
    #: that finished without an error and under the window, so that the compactions a long
    #: tool loop needs on a small window, one every few steps, are not mistaken for an
    #: overflow loop) or "turn" (Kilo: since the last real user message, which stops such a
    #: loop after its third compaction).
    attempts_per: Literal["turn", "step"] = "step"
    #: When to compact: "window" (opencode, Kilo, MiMo: when the usable window is reached) or
    #: "economic" (also earlier, once the view passes the size at which compacting costs less
    #: per call than reading the grown prefix from the cache; ``policy._cadence``).
    cadence: Literal["window", "economic"] = "window"
    #: Ours: before each request, also compact when the latest reported usage plus what was
    #: written since (a tool step's results) would reach the compaction limit, so a tool loop
    #: never sends a step past it. False reproduces opencode, Kilo and MiMo, which compact
    #: only once a reported usage has reached it.
    step_guard: bool = True
    #: Kilo compaction chunks: when the head does not fit one summary request, it is cut into
    #: chunks of this share of the usable window (at least 1,000 tokens) ...
    chunk_ratio: Ratio = 0.6
    #: ... summarised at most this many at a time, then merged.
    chunk_concurrency: Positive = 3
    #: opencode: after an automatic compaction with nothing to replay, a synthetic "continue"
    #: user message lets the model carry on.
    autocontinue: bool = True
    #: MiMo: rounds that arrive while the summary is written stay verbatim after it, up to
    #: 40,000 tokens ...
    arrived_tail_tokens: NonNegative = 40_000
    #: ... with any single tool result over 8,000 tokens replaced by a placeholder.
    arrived_result_tokens: Positive = 8_000
    #: MiMo: the summary lists the last 5 files read or written, with their line ranges.
    manifest_files: NonNegative = 5

    def _check(self) -> None:
        if self.cadence == "economic" and self.attempts_per == "turn":
            raise self._error(
                "attempts_per",
                'must be "step" with cadence = "economic": early compactions in a long tool '
                "loop would use up a turn's attempts",
            )
        percents = self.pressure_percents
        if not 0 < percents[0] < percents[1] < percents[2] <= 100:
            raise self._error(
                "pressure_percents", f"must increase strictly within (0, 100], got {percents!r}"
            )
        ratio = self.trigger_ratio
        if parse_trigger_ratio(ratio) is None:
            raise self._error(
                "trigger_ratio",
                f"must be in (0, 1] or a percentage in (0%, 100%], got {ratio!r}",
            )
        budget = self.max_context
        if budget is None:
            return
        if self.overflow_variant != "mimo":
            raise self._error(
                "max_context",
                'applies only with overflow_variant = "mimo", '
                f"got overflow_variant = {self.overflow_variant!r}",
            )
        if isinstance(budget, dict):
            for pattern, value in budget.items():
                key = f"max_context[{pattern!r}]"
                if "/" not in pattern and "*" not in pattern:
                    raise self._error(
                        key, "pattern must look like 'provider/model' ('*' matches any text)"
                    )
                _check_quantity(self, key, value)
        else:
            _check_quantity(self, "max_context", budget)


class OutputConfig(_Section, frozen=True):
    """How many output tokens a request asks for (opencode ``maxOutputTokens``, Kilo
    ``capOutputTokens``, MiMo ``completionBudget``)."""

    _name: ClassVar[str] = "output"

    #: opencode ``OUTPUT_TOKEN_MAX``: 32,000, the cap on any model's output limit.
    max_tokens: Positive = OUTPUT_TOKEN_MAX
    #: Kilo ``SAFETY``: 2,048 tokens between the estimated prompt and the capped output.
    safety: NonNegative = OUTPUT_SAFETY
    #: Kilo ``MIN_OUTPUT`` / MiMo floor: a cap never goes below 1,024 tokens.
    min: Positive = MIN_OUTPUT
    #: Kilo ``MEDIA_OUTPUT_RESERVE``: 2,048 tokens assumed per attached media item.
    media_reserve: NonNegative = MEDIA_OUTPUT_RESERVE
    #: MiMo ``completionBudget``: 1,024 tokens between prompt and completion.
    completion_margin: NonNegative = COMPLETION_MARGIN
    #: Which rule trims the output: "kilo" (default: counts media and the provider's report,
    #: and keeps the configured value when the prompt alone overflows, so the provider's real
    #: error triggers compaction) or "mimo" (``completionBudget``).
    budget_rule: OutputBudgetRule = "kilo"

    def _check(self) -> None:
        if self.min > self.max_tokens:
            raise self._error(
                "min", f"must be <= output.max_tokens ({self.max_tokens}), got {self.min}"
            )


class TokensConfig(_Section, frozen=True):
    """How tokens are counted before a provider reports them."""

    _name: ClassVar[str] = "tokens"

    #: "estimate" (characters / 4, opencode ``Token.estimate``: needs nothing and is what the
    #: reference agents use); "calibrated" (fitted to the usage a provider reports, about 10 %
    #: median error on real traces against 44 % for the estimate); "tiktoken" (exact for
    #: OpenAI encodings; needs the ``tokens`` extra). See ``policy._tokens.counter_for``.
    counter: TokenCounter = "estimate"
    #: opencode / Kilo / pi: about 4 characters per token.
    chars_per_token: Positive = CHARS_PER_TOKEN
    #: Kilo ``FACTOR``: preflight inflates estimates by 1.3 (chars/4 under-counts by 15-30 %).
    preflight_factor: Factor = PREFLIGHT_FACTOR


class ViewConfig(_Section, frozen=True):
    """What a request carries of the history (``history._view.ViewOptions``)."""

    _name: ClassVar[str] = "view"

    #: Which user messages carry their captured environment block: "each" (every block stays
    #: where it was first sent, so earlier request bytes never change), "latest" (Kilo Code:
    #: only the newest user message), or "none".
    environment: EnvironmentMode = "each"
    #: Which media becomes placeholders once a summary exists: "compaction" (older than the
    #: newest compaction request; changes only when a compaction completes), "latest-user"
    #: (Kilo Code: before the last real user message, which moves every turn), or "keep".
    historical_media: HistoricalMedia = "compaction"
    #: opencode: tool outputs in a compaction's input are cut to 2,000 characters (the
    #: summary needs what a tool did, not all it printed).
    summary_tool_output_chars: Positive = SUMMARY_TOOL_OUTPUT_CHARS
    #: A view transform (pi's ``transformContext``) named as ``"module.path:function"``: the
    #: request builder applies it to the view before encoding (``policy._transform``). None:
    #: the view is sent as it is.
    transform: str | None = None

    def _check(self) -> None:
        transform = self.transform
        if transform is not None and not re.fullmatch(r"[\w.]+:[\w.]+", transform):
            raise self._error("transform", f'must be "module.path:function", got {transform!r}')


class ToolOutputConfig(_Section, frozen=True):
    """How a long tool output is truncated (opencode ``Truncate.output``)."""

    _name: ClassVar[str] = "tool_output"

    #: opencode ``MAX_LINES``: 2,000 lines, as much as a model reads usefully at once.
    max_lines: Positive = TOOL_OUTPUT_MAX_LINES
    #: opencode ``MAX_BYTES``: 50 KiB (about 12,800 tokens).
    max_bytes: Positive = TOOL_OUTPUT_MAX_BYTES
    #: opencode: keep the head by default; "tail" suits logs whose end matters.
    direction: TruncateDirection = "head"
    #: When requests offer the ``read_tool_output`` tool the truncation hint names:
    #: "truncated" (from the first request whose view shows a truncated output; it is then
    #: pinned, so the prefix rotates once, and a session that never truncates pays nothing),
    #: "always" (in every request: a stable table from the first request on) or "never"
    #: (the host offers its own).
    paging_tool: PagingTool = "truncated"


class PruneConfig(_Section, frozen=True):
    """Clearing old tool outputs (opencode ``prune``); used by the pruner."""

    _name: ClassVar[str] = "prune"

    #: Kilo: the "normal" prune after each turn is opt-in (it breaks the prompt cache);
    #: post-compaction and payload-limit prunes run regardless.
    enabled: bool = False
    #: opencode ``PRUNE_PROTECT``: the newest 40,000 tokens of tool output are never cleared.
    protect_tokens: NonNegative = PRUNE_PROTECT_TOKENS
    #: opencode ``PRUNE_MINIMUM``: prune only when it frees more than 20,000 tokens, or the
    #: cache miss it causes costs more than it saves.
    minimum_tokens: NonNegative = PRUNE_MINIMUM_TOKENS
    #: opencode ``PRUNE_PROTECTED_TOOLS``: skill output is standing instructions, not data.
    protected_tools: tuple[str, ...] = PRUNE_PROTECTED_TOOLS
    #: How the after-turn prune decides: "opencode" (clear past the protected 40,000 tokens
    #: when it frees more than 20,000), "mimo" (only once the prompt cache has expired and
    #: the context is under pressure: level 1 soft-trims, level 2 clears and strips old media
    #: and reasoning), "cost" (only when the saving over the expected remaining turns
    #: exceeds the cost of rebuilding the cache from the cut) or "batch" (after every step:
    #: soft-trim all old outputs at once when the prompt nears the window or the trim pays).
    mode: PruneMode = "opencode"
    #: MiMo ``DEFAULT_CACHE_TTL``: the prompt cache counts as cold 300 s after the last
    #: assistant message finished.
    cache_ttl_ms: Positive = 300_000
    #: MiMo ``SOFT_TRIM_THRESHOLD``: level 1 trims outputs longer than 4,096 characters ...
    trim_threshold_chars: Positive = 4_096
    #: ... to their first and last 1,536 characters (``SOFT_TRIM_KEEP_HEAD/TAIL``).
    trim_keep_chars: Positive = SOFT_TRIM_KEEP_CHARS
    #: MiMo ``stripNonEssential``: media and reasoning older than the last 3 turns go at
    #: level 2.
    strip_protected_turns: Positive = STRIP_PROTECTED_TURNS
    #: Cost mode: how many more turns the session is expected to run (the saving of a prune
    #: is counted over them).
    expected_turns: Positive = 10


class RequestConfig(_Section, frozen=True):
    """How requests are assembled: the payload guard and the cache breakpoints."""

    _name: ClassVar[str] = "request"

    #: Kilo ``REQUEST_PRUNE_BYTES``: a request body over 1.25 MB has old tool outputs
    #: cleared (reason "payload-limit") and historical media stripped before it is sent.
    payload_limit_bytes: Positive = 1_250_000
    #: Automatic breakpoints: "auto" (last tool, last system block, the message below),
    #: "ai-sdk" (first two system blocks, last two messages) or "none" (hints only).
    cache: CacheMode = "auto"
    #: Under "auto": the messages marked: the last N (default 2: each step of a tool loop
    #: reads what the step before wrote, so the cached prefix grows with the loop; replayed
    #: on the Claude Code traces this halves Anthropic's input cost or better against the
    #: next option), "latest-user-message" (opencode's native policy: it stays put through a
    #: tool loop, so nothing after it is cached), or "latest-assistant".
    cache_messages: MessageTarget | Positive = 2
    #: Lifetime written into automatic marks: None (the provider's default, five minutes),
    #: "5m" or "1h" (Anthropic and Bedrock charge 2x instead of 1.25x to write it).
    cache_ttl: CacheTTL | None = None

    def cache_policy(self) -> CachePolicy:
        """The breakpoint policy these settings describe."""
        return CachePolicy(mode=self.cache, messages=self.cache_messages, ttl=self.cache_ttl)


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every knob of the context policy, by section. ``Config()`` is the documented defaults."""

    compaction: CompactionConfig = CompactionConfig()
    output: OutputConfig = OutputConfig()
    tokens: TokensConfig = TokensConfig()
    tool_output: ToolOutputConfig = ToolOutputConfig()
    view: ViewConfig = ViewConfig()
    prune: PruneConfig = PruneConfig()
    request: RequestConfig = RequestConfig()

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Config:
        """The config in the ``.toml`` or ``.json`` file at ``path``. Raises ``ConfigError``
        for an unreadable file, another suffix, bad syntax or a bad value."""
        suffix = os.path.splitext(os.fspath(path))[1].lower()
        if suffix not in (".toml", ".json"):
            raise ConfigError(None, f"{os.fspath(path)}: config files are .toml or .json")
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError as error:
            raise ConfigError(None, f"cannot read {os.fspath(path)}: {error.strerror}") from error
        if suffix == ".toml":
            try:
                return cls.from_toml(data.decode())
            except UnicodeDecodeError as error:
                raise ConfigError(None, f"invalid TOML: {error}") from error
        return cls.from_json(data)

    @classmethod
    def from_toml(cls, text: str) -> Config:
        """The config in TOML ``text``; raises ``ConfigError``."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(None, f"invalid TOML: {error}") from error
        return cls.from_dict(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> Config:
        """The config in JSON ``text`` (an object); raises ``ConfigError``."""
        try:
            data = msgspec.json.decode(text)
        except msgspec.DecodeError as error:
            raise ConfigError(None, f"invalid JSON: {error}") from error
        if not isinstance(data, dict):
            raise ConfigError(None, f"a config is an object, got {type(data).__name__}")
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Config:
        """The config in ``data`` (decoded TOML or JSON); raises ``ConfigError`` naming the
        dotted key of the first bad or unknown value."""
        data = dict(data)
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as error:
            raise _translate(str(error), data) from error

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data, for ``from_dict`` or a JSON / TOML writer."""
        result: dict[str, Any] = msgspec.to_builtins(self)
        return result


class WarnOnce:
    """A shell helper: logs each warning key once (e.g. ``Window.ignored_budget``, which the
    pure window function returns on every call)."""

    def __init__(self, logger: Any = None) -> None:
        self._seen: set[str] = set()
        self._log = logger if logger is not None else structlog.get_logger(__name__)

    def warn(self, key: str, event: str, **fields: Any) -> bool:
        """Log ``event`` with ``fields`` at warning level unless ``key`` was warned about
        before; True when it logged."""
        if key in self._seen:
            return False
        self._seen.add(key)
        self._log.warning(event, **fields)
        return True
