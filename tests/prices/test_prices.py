"""``contextledger.prices``: the bundled price tables as cache multipliers."""

from __future__ import annotations

import pytest

from contextledger.prices._multipliers import (
    DEFAULT_PRICE,
    FAMILY_DEFAULTS,
    PROVIDER_FAMILIES,
    Price,
    from_table,
    price_for,
)
from contextledger.prices._tables import FAMILIES, load_prices


@pytest.mark.parametrize(
    ("provider", "model", "family", "input_per_mtok", "read", "write"),
    [
        ("anthropic", "claude-sonnet-4-5-20250929", "*claude-sonnet-4*", 3.00, 0.1, 1.25),
        ("anthropic", "claude-opus-4-1-20250805", "*claude-opus-4*", 15.00, 0.1, 1.25),
        ("anthropic", "claude-opus-4-6", "*claude-opus-4[.-]6*", 5.00, 0.1, 1.25),
        ("anthropic", "claude-haiku-4-5", "*claude-haiku-4*", 1.00, 0.1, 1.25),
        ("anthropic", "claude-sonnet-5-5", "*claude-sonnet-5[.-]5*", 2.00, 0.05, 1.25),
        (
            "bedrock",
            "anthropic.claude-opus-4-5-20251101-v1:0",
            "*claude-opus-4[.-]5*",
            5,
            0.1,
            1.25,
        ),
        ("openrouter", "anthropic/claude-opus-4.5", "*claude-opus-4[.-]5*", 5.00, 0.1, 1.25),
        ("openai", "gpt-5", "*gpt-5*", 1.25, 0.1, 1.0),
        ("openai", "gpt-5.1-codex", "*gpt-5*", 1.25, 0.1, 1.0),
        ("openai", "gpt-5.4-mini", "*gpt-5[.-]4-mini*", 0.75, 0.1, 1.0),
        ("openai", "gpt-5-mini", "*gpt-5-mini*", 0.25, 0.1, 1.0),
        ("openai", "gpt-4.1", "*gpt-4[.-]1*", 2.00, 0.25, 1.0),
        ("openai", "gpt-4o-2024-08-06", "*gpt-4o*", 2.50, 0.5, 1.0),
        ("google", "gemini-2.5-flash", "*gemini-2[.-]5-flash*", 0.30, 0.1, 1.0),
        ("google-vertex", "gemini-2.5-pro", "*gemini-2[.-]5-pro*", 1.25, 0.1, 1.0),
        ("deepseek", "deepseek-chat", "*deepseek-chat*", 0.27, 0.07 / 0.27, 1.0),
        ("deepseek", "deepseek-reasoner", "*deepseek-reasoner*", 0.55, 0.14 / 0.55, 1.0),
    ],
)
def test_a_model_is_priced_by_its_table_entry(
    provider: str, model: str, family: str, input_per_mtok: float, read: float, write: float
) -> None:
    price = price_for(provider, model)
    assert (price.family, price.input_per_mtok) == (family, input_per_mtok)
    assert price.cache_read == pytest.approx(read)
    assert price.cache_write == pytest.approx(write)


def test_deepseek_reads_cost_about_a_quarter_of_a_miss() -> None:
    assert price_for("deepseek", "deepseek-chat").cache_read == pytest.approx(0.26, abs=0.005)


def test_lookups_ignore_case() -> None:
    assert price_for("Anthropic", "Claude-Sonnet-4") == price_for("anthropic", "claude-sonnet-4")


def test_an_unknown_model_of_a_known_provider_takes_the_providers_family() -> None:
    assert price_for("anthropic", "claude-3-7-sonnet").family == "*claude-sonnet-4*"
    assert price_for("openai", "o3").family == "*gpt-5*"
    assert price_for("google", "gemini-3-pro").family == "*gemini-2[.-]5-pro*"
    assert price_for("deepseek", "deepseek-v9").family == "*deepseek-chat*"
    assert set(PROVIDER_FAMILIES.values()) == set(FAMILY_DEFAULTS) == set(FAMILIES)


def test_the_default_is_the_cautious_anthropic_figures() -> None:
    for provider, model in (("acme", "model-1"), (None, None), ("", "")):
        assert price_for(provider, model) is DEFAULT_PRICE
    assert DEFAULT_PRICE.family == "default"
    assert (DEFAULT_PRICE.cache_read, DEFAULT_PRICE.cache_write, DEFAULT_PRICE.ttl_s) == (
        pytest.approx(0.1),
        pytest.approx(1.25),
        300,
    )
    everything = _every_price()
    assert DEFAULT_PRICE.cache_write == max(p.cache_write for p in everything)
    assert DEFAULT_PRICE.ttl_s == min(p.ttl_s for p in everything)


def test_cache_lifetimes() -> None:
    assert price_for("anthropic", "claude-sonnet-4").ttl_s == 300
    assert price_for("openai", "gpt-5").ttl_s == 300
    assert price_for("deepseek", "deepseek-chat").ttl_s == 3_600


def test_input_per_token() -> None:
    assert price_for("anthropic", "claude-sonnet-4").input_per_token == pytest.approx(3e-6)


def _every_price() -> list[Price]:
    return [from_table(entry) for family in FAMILIES for entry in load_prices(family)]


@pytest.mark.parametrize("price", _every_price(), ids=lambda p: p.family)
def test_every_figure_is_sane_and_names_its_source_and_date(price: Price) -> None:
    assert price.input_per_mtok > 0 and price.ttl_s > 0
    assert 0 < price.cache_read < 1 <= price.cache_write <= 2
    assert price.output >= 1
    assert price.source and price.date
    assert price.confidence in ("O", "S", "M")
