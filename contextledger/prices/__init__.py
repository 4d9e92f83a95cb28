"""The price tables, as data: what each provider charges for input, output and the prompt cache.

One table per provider family (``anthropic.json``, ``openai.json``, ``gemini.json``,
``deepseek.json``), each entry with its date, source and confidence tag. ``tables`` loads them
(``ModelPrice``, ``load_prices``, ``table_price`` by model id); an entry restated as multiples
of its input price is what the policies that weigh a prefix change against the cache read
(``Price``, ``price_for`` by provider and model, ``DEFAULT_PRICE``). The cache simulator and
the policy read the same tables.
"""

from contextledger.prices._multipliers import (
    DEFAULT_PRICE,
    FAMILY_DEFAULTS,
    PROVIDER_FAMILIES,
    Price,
    from_table,
    price_for,
)
from contextledger.prices._tables import FAMILIES, Confidence, Family, ModelPrice, load_prices
from contextledger.prices._tables import price_for as table_price

__all__ = [
    "DEFAULT_PRICE",
    "FAMILIES",
    "FAMILY_DEFAULTS",
    "PROVIDER_FAMILIES",
    "Confidence",
    "Family",
    "ModelPrice",
    "Price",
    "from_table",
    "load_prices",
    "price_for",
    "table_price",
]
