from __future__ import annotations

import msgspec
import pytest

from contextledger.cachesim import lower_bound, simulate
from contextledger.cachesim._blocks import Ttl
from contextledger.prices._tables import price_for
from tests.cachesim.conftest import blocks, names, req

SONNET = price_for("claude-sonnet-4-20250514")


def last_mark(n: int, ttl: str = "5m") -> dict[int, str]:
    return {n - 1: ttl}


def test_growing_conversation_first_writes_then_reads_prefix_and_writes_the_rest() -> None:
    r1 = req(blocks(names(10), 200, {9: "5m"}), at=0)
    r2 = req(blocks(names(12), 200, {11: "5m"}), at=60)
    result = simulate([r1, r2], SONNET)
    first, second = result.requests
    assert (first.cache_read, first.cache_write, first.uncached) == (0, 2000, 0)
    assert (second.cache_read, second.cache_write, second.uncached) == (2000, 400, 0)
    assert first.input_cost == pytest.approx(2000 * 3.75 / 1e6)
    assert second.input_cost == pytest.approx((2000 * 0.3 + 400 * 3.75) / 1e6)
    assert result.total.cost == pytest.approx(first.cost + second.cost)


def test_tokens_after_the_last_breakpoint_are_uncached() -> None:
    r1 = req(blocks(names(12), 200, {9: "5m"}), at=0)
    cost = simulate([r1], SONNET).requests[0]
    assert (cost.cache_write, cost.uncached) == (2000, 400)


def test_earlier_entry_within_20_blocks_of_the_breakpoint_hits() -> None:
    r1 = req(blocks(names(10), 200, {9: "5m"}), at=0)
    r2 = req(blocks(names(30), 200, {29: "5m"}), at=10)
    second = simulate([r1, r2], SONNET).requests[1]
    assert (second.cache_read, second.cache_write) == (2000, 4000)


def test_earlier_entry_more_than_20_blocks_before_the_only_breakpoint_misses() -> None:
    r1 = req(blocks(names(10), 200, {9: "5m"}), at=0)
    r2 = req(blocks(names(31), 200, {30: "5m"}), at=10)
    second = simulate([r1, r2], SONNET).requests[1]
    assert (second.cache_read, second.cache_write) == (0, 6200)


def test_change_more_than_20_blocks_before_the_only_breakpoint_misses() -> None:
    original = names(30)
    changed = [*original[:5], "edited", *original[6:]]
    r1 = req(blocks(original, 200, {29: "5m"}), at=0)
    r2 = req(blocks(changed, 200, {29: "5m"}), at=10)
    second = simulate([r1, r2], SONNET).requests[1]
    assert (second.cache_read, second.cache_write) == (0, 6000)


def test_change_is_read_up_to_a_closer_second_breakpoint() -> None:
    original = names(30)
    changed = [*original[:25], "edited", *original[26:]]
    marks = {4: "5m", 29: "5m"}
    r1 = req(blocks(original, 300, marks), at=0)
    r2 = req(blocks(changed, 300, marks), at=10)
    second = simulate([r1, r2], SONNET).requests[1]
    assert (second.cache_read, second.cache_write) == (1500, 7500)


def test_below_the_model_minimum_nothing_is_cached() -> None:
    r = blocks(names(3), 300, {2: "5m"})
    result = simulate([req(r, 0), req(r, 10)], SONNET)
    for cost in result.requests:
        assert (cost.cache_read, cost.cache_write, cost.uncached) == (0, 0, 900)


def test_haiku_minimum_is_4096_tokens() -> None:
    r = blocks(names(3), 1000, {2: "5m"})
    result = simulate([req(r, 0), req(r, 10)], price_for("claude-haiku-4-5"))
    assert result.total.cache_read == result.total.cache_write == 0


def test_entry_expires_after_five_minutes_without_use() -> None:
    r = blocks(names(10), 200, {9: "5m"})
    result = simulate([req(r, 0), req(r, 300)], SONNET)
    assert [c.cache_read for c in result.requests] == [0, 0]
    assert [c.cache_write for c in result.requests] == [2000, 2000]


def test_read_refreshes_the_five_minute_ttl() -> None:
    r = blocks(names(10), 200, {9: "5m"})
    result = simulate([req(r, 0), req(r, 299), req(r, 598), req(r, 898)], SONNET)
    assert [c.cache_read for c in result.requests] == [0, 2000, 2000, 0]


def test_one_hour_mark_costs_twice_input_to_write_and_outlives_five_minutes() -> None:
    r = blocks(names(10), 200, {9: "1h"})
    first, second = simulate([req(r, 0), req(r, 3000)], SONNET).requests
    assert (first.cache_write, first.cache_write_1h) == (2000, 2000)
    assert first.input_cost == pytest.approx(2000 * 6.0 / 1e6)
    assert second.cache_read == 2000


def test_mixed_ttls_charge_each_segment_at_its_breakpoint_ttl() -> None:
    r = blocks(names(10), 200, {5: "1h", 9: "5m"})
    cost = simulate([req(r, 0)], SONNET).requests[0]
    assert (cost.cache_write, cost.cache_write_1h) == (2000, 1200)
    assert cost.input_cost == pytest.approx((1200 * 6.0 + 800 * 3.75) / 1e6)


def test_at_most_four_breakpoints_are_honoured() -> None:
    r = blocks(names(6), 1100, {i: "5m" for i in range(6)})
    first, second = simulate([req(r, 0), req(r, 10)], SONNET).requests
    assert (first.cache_write, first.uncached) == (4400, 2200)
    assert (second.cache_read, second.cache_write, second.uncached) == (4400, 0, 2200)


def test_output_tokens_cost_the_output_price() -> None:
    r = blocks(names(2), 100)
    cost = simulate([req(r, 0, output=1000)], SONNET).requests[0]
    assert cost.output == 1000
    assert cost.output_cost == pytest.approx(1000 * 15.0 / 1e6)


def test_bedrock_model_ids_use_the_anthropic_rules() -> None:
    price = price_for("anthropic.claude-sonnet-4-20250514-v1:0")
    assert (price.family, price.min_prefix) == ("anthropic", 1024)


def test_a_tool_choice_change_reads_the_tools_and_system_not_the_messages() -> None:
    # 4 tool and system blocks (breakpoint on the last), then 6 message blocks (breakpoint
    # on the last), 300 tokens each: the session's requests set no tool choice.
    marks: dict[int, Ttl] = {3: "5m", 9: "5m"}
    session = msgspec.structs.replace(req(blocks(names(10), 300, marks), at=0), prefix_blocks=4)
    summary = msgspec.structs.replace(session, at=10, tool_choice="none")
    again = msgspec.structs.replace(session, at=20)
    first, other, same = simulate([session, summary, again], SONNET).requests
    assert (first.cache_read, first.cache_write) == (0, 3000)
    # Only the tools and system blocks are read; the messages are written again, under "none".
    assert (other.cache_read, other.cache_write) == (1200, 1800)
    # The session's own entry is still there: a request with its tool choice reads it all.
    assert (same.cache_read, same.cache_write) == (3000, 0)
    kept = msgspec.structs.replace(summary, tool_choice=None)
    assert simulate([session, kept], SONNET).requests[1].cache_read == 3000
    # The bound keeps the rule: no request could read the other's messages.
    with_change = lower_bound([session, summary], SONNET)
    assert with_change > lower_bound([session, kept], SONNET)
    assert with_change <= simulate([session, summary], SONNET).total.cost
