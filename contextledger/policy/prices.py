"""What prompt-cache reads and writes cost, per provider family, for the cost-aware prune.

A ``Price`` gives the list price of uncached input (USD per million tokens), what a cache read
and a cache write cost as multiples of it, and how long a cached prefix lives. Every figure
names its source, the date of that source and how sure it is, as recorded in
``shared/reference/caching.md``: ``"O"`` read in the provider's own documentation, ``"S"`` a
secondary source quoting it, ``"M"`` not re-verified (check before billing with it).

``price_for(provider_id, model_id)`` matches the model id against ``MODEL_PRICES`` (first match
wins), then falls back to the provider's family (``PROVIDER_PRICES``), then to
``DEFAULT_PRICE``: Anthropic's Claude Sonnet 4 figures, the dearest write (1.25x) and the
shortest lifetime (five minutes) in the table, so that an unknown model keeps a warm cache
unless pruning clearly pays.

A write multiplier of 1.0 means no write fee: tokens not read from the cache cost the input
price whether or not the provider stores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Final, Literal

import msgspec

Confidence = Literal["O", "S", "M"]


class Source(msgspec.Struct, frozen=True):
    """Where a figure comes from: the document, its date (``"undated"`` when the stored copy
    shows none) and the confidence tag of ``caching.md``."""

    document: str
    date: str
    confidence: Confidence


class Sources(msgspec.Struct, frozen=True, kw_only=True):
    """The source of each figure of a ``Price``."""

    input: Source
    cache_read: Source
    cache_write: Source
    ttl: Source


class Price(msgspec.Struct, frozen=True, kw_only=True):
    """The cache economics of one model family. ``cache_read`` and ``cache_write`` multiply
    ``input_per_mtok``; ``ttl_s`` is how long an unused cached prefix lives."""

    family: str
    input_per_mtok: float
    cache_read: float
    cache_write: float
    ttl_s: int
    sources: Sources

    @property
    def input_per_token(self) -> float:
        """USD per uncached input token."""
        return self.input_per_mtok / 1_000_000


_ANTHROPIC_PRICING: Final = Source(
    "platform.claude.com/docs/en/about-claude/pricing (stored copy)", "undated", "O"
)
_ANTHROPIC_MODELS: Final = Source("platform.claude.com model pages (stored copy)", "undated", "O")
_ANTHROPIC_CACHING: Final = Source(
    "platform.claude.com/docs/en/build-with-claude/prompt-caching (stored copy)", "undated", "O"
)
_SONNET_5_5_READ: Final = Source("secondary report of the Sonnet 5.5 price cut", "2026-10-07", "S")
_OPENAI_CACHING: Final = Source(
    "developers.openai.com/api/docs/guides/prompt-caching (stored copy)", "undated", "O"
)
_OPENAI_RETENTION: Final = Source(
    "Azure copy of the OpenAI prompt-caching guide; openai-agents PR #2095", "undated", "O"
)
_OPENAI_FAMILY_READ: Final = Source("adk-model and api-evangelist docs", "undated", "S")
_OPENAI_GPT5: Final = Source("openai-cost crate, Expensify script", "undated", "S")
_OPENAI_GPT5_4: Final = Source("adk-model docs", "2026-03", "S")
_UNVERIFIED: Final = Source("not re-verified (caching.md)", "undated", "M")
_GEMINI_CACHING: Final = Source(
    "ai.google.dev/gemini-api/docs/caching; Vertex context-cache overview", "undated", "O"
)
_GEMINI_PRICES: Final = Source(
    "caching.md; verify on ai.google.dev/gemini-api/docs/pricing", "undated", "M"
)
_DEEPSEEK_PRICING: Final = Source(
    "api-docs.deepseek.com/quick_start/pricing-details-usd (stored copy)", "undated", "O"
)
_DEEPSEEK_CACHING: Final = Source(
    "api-docs.deepseek.com/guides/kv_cache (stored copy)", "undated", "O"
)
_DEEPSEEK_V4: Final = Source("Reasonix benchmark README", "2026", "S")


def _anthropic(
    family: str,
    input_per_mtok: float,
    input_source: Source = _ANTHROPIC_MODELS,
    *,
    read: float = 0.1,
    read_source: Source = _ANTHROPIC_PRICING,
) -> Price:
    return Price(
        family=family,
        input_per_mtok=input_per_mtok,
        cache_read=read,
        cache_write=1.25,
        ttl_s=300,
        sources=Sources(
            input=input_source,
            cache_read=read_source,
            cache_write=_ANTHROPIC_PRICING,
            ttl=_ANTHROPIC_CACHING,
        ),
    )


def _openai(
    family: str, input_per_mtok: float, input_source: Source, read: float, read_source: Source
) -> Price:
    return Price(
        family=family,
        input_per_mtok=input_per_mtok,
        cache_read=read,
        cache_write=1.0,
        ttl_s=300,
        sources=Sources(
            input=input_source,
            cache_read=read_source,
            cache_write=_OPENAI_CACHING,
            ttl=_OPENAI_RETENTION,
        ),
    )


def _gemini(family: str, input_per_mtok: float) -> Price:
    return Price(
        family=family,
        input_per_mtok=input_per_mtok,
        cache_read=0.1,
        cache_write=1.0,
        ttl_s=300,
        sources=Sources(
            input=_GEMINI_PRICES,
            cache_read=_GEMINI_CACHING,
            cache_write=_GEMINI_CACHING,
            ttl=_UNVERIFIED,
        ),
    )


def _deepseek(family: str, miss: float, hit: float, source: Source) -> Price:
    return Price(
        family=family,
        input_per_mtok=miss,
        cache_read=hit / miss,
        cache_write=1.0,
        ttl_s=3_600,
        sources=Sources(
            input=source, cache_read=source, cache_write=_DEEPSEEK_CACHING, ttl=_UNVERIFIED
        ),
    )


_SONNET_4: Final = _anthropic("claude-sonnet-4", 3.00)
_GPT_5: Final = _openai("gpt-5", 1.25, _OPENAI_GPT5, 0.1, _OPENAI_CACHING)
_GEMINI_2_5_PRO: Final = _gemini("gemini-2.5-pro", 1.25)
_DEEPSEEK_CHAT: Final = _deepseek("deepseek-chat", 0.27, 0.07, _DEEPSEEK_PRICING)

#: Model-id globs (case-insensitive, matched against the whole id, so Bedrock's
#: ``anthropic.claude-...`` and OpenRouter's ``anthropic/claude-...`` match too) and their
#: prices; the first match wins, so narrower globs come first. ``[.-]`` accepts both spellings
#: of a version (``claude-opus-4-5``, ``claude-opus-4.5``).
MODEL_PRICES: Final[tuple[tuple[str, Price], ...]] = (
    ("*claude-opus-4[.-][5678]*", _anthropic("claude-opus-4.5+", 5.00, _ANTHROPIC_PRICING)),
    ("*claude-opus-5*", _anthropic("claude-opus-5", 5.00, _ANTHROPIC_PRICING)),
    ("*claude-opus-4*", _anthropic("claude-opus-4", 15.00, _ANTHROPIC_PRICING)),
    (
        "*claude-sonnet-5[.-]5*",
        _anthropic("claude-sonnet-5.5", 2.00, read=0.05, read_source=_SONNET_5_5_READ),
    ),
    ("*claude-sonnet-5*", _anthropic("claude-sonnet-5", 2.00)),
    ("*claude-sonnet-4*", _SONNET_4),
    ("*claude-haiku-4*", _anthropic("claude-haiku-4", 1.00)),
    ("*gpt-5[.-]4-mini*", _openai("gpt-5.4-mini", 0.75, _OPENAI_GPT5_4, 0.1, _OPENAI_CACHING)),
    ("*gpt-5[.-]4*", _openai("gpt-5.4", 2.50, _OPENAI_GPT5_4, 0.1, _OPENAI_CACHING)),
    ("*gpt-5-mini*", _openai("gpt-5-mini", 0.25, _UNVERIFIED, 0.1, _OPENAI_CACHING)),
    ("*gpt-5*", _GPT_5),
    ("*gpt-4[.-]1*", _openai("gpt-4.1", 2.00, _UNVERIFIED, 0.25, _OPENAI_FAMILY_READ)),
    ("*gpt-4o*", _openai("gpt-4o", 2.50, _OPENAI_FAMILY_READ, 0.5, _OPENAI_FAMILY_READ)),
    ("*gemini-2[.-]5-pro*", _GEMINI_2_5_PRO),
    ("*gemini-2[.-]5-flash*", _gemini("gemini-2.5-flash", 0.30)),
    ("*deepseek-chat*", _DEEPSEEK_CHAT),
    ("*deepseek-reasoner*", _deepseek("deepseek-reasoner", 0.55, 0.14, _DEEPSEEK_PRICING)),
    ("*deepseek-v4-flash*", _deepseek("deepseek-v4-flash", 0.139, 0.028, _DEEPSEEK_V4)),
    ("*deepseek-v4-pro*", _deepseek("deepseek-v4-pro", 1.667, 0.139, _DEEPSEEK_V4)),
)

#: The family assumed for a model no glob matches, by provider id (lowercase).
PROVIDER_PRICES: Final[Mapping[str, Price]] = {
    "anthropic": _SONNET_4,
    "amazon-bedrock": _SONNET_4,
    "bedrock": _SONNET_4,
    "google-vertex-anthropic": _SONNET_4,
    "openai": _GPT_5,
    "azure": _GPT_5,
    "google": _GEMINI_2_5_PRO,
    "gemini": _GEMINI_2_5_PRO,
    "google-vertex": _GEMINI_2_5_PRO,
    "deepseek": _DEEPSEEK_CHAT,
}

#: For an unknown provider and model: Claude Sonnet 4's figures (see the module docstring).
DEFAULT_PRICE: Final = msgspec.structs.replace(_SONNET_4, family="default")


def price_for(provider_id: str | None, model_id: str | None) -> Price:
    """The price of ``model_id`` served by ``provider_id``: the first ``MODEL_PRICES`` glob
    the model id matches, else the provider's family, else ``DEFAULT_PRICE``."""
    model = (model_id or "").lower()
    for pattern, price in MODEL_PRICES:
        if model and fnmatchcase(model, pattern):
            return price
    return PROVIDER_PRICES.get((provider_id or "").lower(), DEFAULT_PRICE)
