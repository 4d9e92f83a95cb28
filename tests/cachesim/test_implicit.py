from __future__ import annotations

import msgspec
import pytest

from contextledger.cachesim import simulate
from contextledger.prices._tables import price_for
from tests.cachesim.conftest import blocks, req

GPT_4O = price_for("gpt-4o-2024-08-06")


def test_openai_below_1024_tokens_never_hits() -> None:
    r = blocks(["a", "b"], [600, 400])
    result = simulate([req(r, 0), req(r, 10)], GPT_4O)
    assert result.total.cache_read == 0
    assert result.total.uncached == 2000


def test_openai_hit_is_floored_to_1024_plus_128_steps() -> None:
    r1 = req(blocks(["a", "b"], [1000, 300]), at=0)
    r2 = req(blocks(["a", "b", "c"], [1000, 300, 500]), at=10)
    second = simulate([r1, r2], GPT_4O).requests[1]
    assert (second.cache_read, second.uncached, second.cache_write) == (1280, 520, 0)
    assert second.input_cost == pytest.approx((1280 * 1.25 + 520 * 2.5) / 1e6)


def test_openai_in_memory_retention_expires_after_five_minutes() -> None:
    r = blocks(["a"], [2048])
    result = simulate([req(r, 0), req(r, 300)], GPT_4O)
    assert result.requests[1].cache_read == 0


def test_openai_24h_retention_keeps_the_prefix() -> None:
    r = blocks(["a"], [2048])
    result = simulate([req(r, 0), req(r, 3600)], GPT_4O, ttl_s=86_400)
    assert result.requests[1].cache_read == 2048


def test_openai_write_fee_option_charges_the_unread_prompt() -> None:
    gpt_5_6 = msgspec.structs.replace(price_for("gpt-5"), cache_write=1.25 * 1.25)
    r = blocks(["a"], [2048])
    first, second = simulate([req(r, 0), req(r, 10)], gpt_5_6).requests
    assert (first.cache_write, first.uncached) == (2048, 0)
    assert (second.cache_read, second.cache_write) == (2048, 0)


def test_gemini_flash_reads_above_its_minimum_at_ten_percent() -> None:
    flash = price_for("gemini-2.5-flash")
    r = blocks(["a", "b"], [1000, 30])
    second = simulate([req(r, 0), req(r, 10)], flash).requests[1]
    assert second.cache_read == 1030
    assert second.input_cost == pytest.approx(1030 * 0.03 / 1e6)
    assert flash.cache_read == pytest.approx(0.1 * flash.input)


def test_gemini_pro_below_its_4096_minimum_never_hits() -> None:
    r = blocks(["a"], [3000])
    result = simulate([req(r, 0), req(r, 10)], price_for("gemini-2.5-pro"))
    assert result.total.cache_read == 0


def test_deepseek_longer_request_hits_the_earlier_unit() -> None:
    r1 = req(blocks(["A", "B"], [100, 50]), at=0)
    r2 = req(blocks(["A", "B", "C"], [100, 50, 70]), at=10)
    second = simulate([r1, r2], price_for("deepseek-chat")).requests[1]
    assert (second.cache_read, second.uncached, second.cache_write) == (150, 70, 0)
    assert second.input_cost == pytest.approx((150 * 0.07 + 70 * 0.27) / 1e6)


def test_deepseek_diverging_request_misses_but_persists_the_common_prefix() -> None:
    r1 = req(blocks(["A", "B"], [100, 50]), at=0)
    r2 = req(blocks(["A", "C"], [100, 70]), at=10)
    r3 = req(blocks(["A", "D"], [100, 30]), at=20)
    costs = simulate([r1, r2, r3], price_for("deepseek-chat")).requests
    assert [c.cache_read for c in costs] == [0, 0, 100]
