"""The bundled price tables (``prices/*.json``), one per provider family.

Every entry gives USD per million tokens for uncached input, output, cache reads and cache
writes (five-minute and one-hour; None where the provider charges no write fee), the minimum
cacheable prefix, the default cache lifetime, and the ``date`` and ``source`` of its figures
with the confidence tag of ``shared/reference/caching.md`` (``O`` official, ``S`` secondary,
``M`` not re-verified).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from functools import cache
from importlib import resources
from typing import Literal

import msgspec

Family = Literal["anthropic", "openai", "gemini", "deepseek"]
FAMILIES: tuple[Family, ...] = ("anthropic", "openai", "gemini", "deepseek")
#: How far a figure was checked: ``O`` official, ``S`` secondary, ``M`` not re-verified.
Confidence = Literal["O", "S", "M"]


class ModelPrice(msgspec.Struct, frozen=True, kw_only=True):
    """The cache economics of the models matching the glob ``model``."""

    model: str
    input: float
    output: float
    cache_read: float
    cache_write: float | None
    cache_write_1h: float | None
    min_prefix: int
    ttl_s: int
    date: str
    source: str
    confidence: Confidence
    family: Family = "anthropic"


class _Table(msgspec.Struct, frozen=True):
    family: Family
    note: str
    models: tuple[ModelPrice, ...]


@cache
def load_prices(family: Family) -> tuple[ModelPrice, ...]:
    """The entries of ``family``'s table, in match order."""
    raw = resources.files("contextledger.prices").joinpath(f"{family}.json")
    table = msgspec.json.decode(raw.read_bytes(), type=_Table)
    return tuple(msgspec.structs.replace(m, family=table.family) for m in table.models)


def price_for(model_id: str, family: Family | None = None) -> ModelPrice:
    """The first entry whose glob matches ``model_id`` (case-insensitive), searching
    ``family``'s table or all of them. Bedrock model ids match the Anthropic table. Raises
    ``KeyError`` when none does."""
    model = model_id.lower()
    for fam in (family,) if family else FAMILIES:
        for price in load_prices(fam):
            if fnmatchcase(model, price.model):
                return price
    raise KeyError(model_id)
