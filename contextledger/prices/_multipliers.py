"""What prompt-cache reads and writes cost, as multiples of the input price, for the policies
that weigh a prefix change against the cache (the cost-aware prune, the default strategy).

The figures are those of the bundled price tables (``contextledger/prices/*.json``,
each entry with its source, date and confidence tag); this module only restates an entry as
multipliers. ``price_for(provider_id, model_id)`` takes the first table entry whose glob the
model id matches, then the provider's family (``PROVIDER_FAMILIES`` and ``FAMILY_DEFAULTS``),
then ``DEFAULT_PRICE``: Anthropic's Claude Sonnet 4 figures, the dearest write (1.25x) and the
shortest lifetime (five minutes) in the tables, so that an unknown model keeps a warm cache
unless changing the prefix clearly pays.

A write multiplier of 1.0 means no write fee: tokens not read from the cache cost the input
price whether or not the provider stores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Final

import msgspec

from contextledger.prices._tables import Confidence, Family, ModelPrice
from contextledger.prices._tables import price_for as table_price


class Price(msgspec.Struct, frozen=True, kw_only=True):
    """The cache economics of one table entry. ``cache_read``, ``cache_write`` and ``output``
    multiply ``input_per_mtok``; ``ttl_s`` is how long an unused cached prefix lives;
    ``family`` is the entry's model glob (``"default"`` for ``DEFAULT_PRICE``)."""

    family: str
    input_per_mtok: float
    cache_read: float
    cache_write: float
    output: float
    ttl_s: int
    date: str
    source: str
    confidence: Confidence

    @property
    def input_per_token(self) -> float:
        """USD per uncached input token."""
        return self.input_per_mtok / 1_000_000


def from_table(entry: ModelPrice, family: str | None = None) -> Price:
    """``entry`` of a price table as multipliers of its input price."""
    write = entry.cache_write if entry.cache_write is not None else entry.input
    return Price(
        family=family or entry.model,
        input_per_mtok=entry.input,
        cache_read=entry.cache_read / entry.input,
        cache_write=write / entry.input,
        output=entry.output / entry.input,
        ttl_s=entry.ttl_s,
        date=entry.date,
        source=entry.source,
        confidence=entry.confidence,
    )


#: The price family of a provider id (lowercase), for a model no table entry matches.
PROVIDER_FAMILIES: Final[Mapping[str, Family]] = {
    "anthropic": "anthropic",
    "amazon-bedrock": "anthropic",
    "bedrock": "anthropic",
    "google-vertex-anthropic": "anthropic",
    "openai": "openai",
    "azure": "openai",
    "google": "gemini",
    "gemini": "gemini",
    "google-vertex": "gemini",
    "deepseek": "deepseek",
}

#: The model whose entry stands for its family when the model id matches none.
FAMILY_DEFAULTS: Final[Mapping[Family, str]] = {
    "anthropic": "claude-sonnet-4",
    "openai": "gpt-5",
    "gemini": "gemini-2.5-pro",
    "deepseek": "deepseek-chat",
}

#: For an unknown provider and model: Claude Sonnet 4's figures (see the module docstring).
DEFAULT_PRICE: Final = from_table(table_price(FAMILY_DEFAULTS["anthropic"]), "default")


@cache
def price_for(provider_id: str | None, model_id: str | None) -> Price:
    """The price of ``model_id`` served by ``provider_id``: the first table entry the model id
    matches, else the provider's family default, else ``DEFAULT_PRICE``."""
    if model_id:
        try:
            return from_table(table_price(model_id))
        except KeyError:
            pass
    family = PROVIDER_FAMILIES.get((provider_id or "").lower())
    if family is None:
        return DEFAULT_PRICE
    return from_table(table_price(FAMILY_DEFAULTS[family], family))
