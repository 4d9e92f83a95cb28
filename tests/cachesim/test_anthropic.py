from __future__ import annotations

import msgspec
import pytest

from contextledger.cachesim import Block, SimRequest, drops_earlier_thinking, lower_bound, simulate
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


def _weather_in_paris(model: str) -> list[SimRequest]:
    """Anthropic's example of thinking with tool use (prompt-caching page, "Caching with
    thinking blocks"; extended-thinking page, "Understanding thinking block caching
    behavior"), after a 2,000-token system block so that every prefix passes the minimum:
    the question; then its thinking, tool call and result (a breakpoint on the result); then
    the second thinking, the answer and the user's next text (a breakpoint on it)."""
    system = Block(key="system", tokens=2000)
    question = Block(key="What's the weather in Paris?", tokens=1000, part="user_input")
    thinking_1 = Block(key="thinking_block_1", tokens=1500, part="thinking")
    tool_use_1 = Block(key="tool_use block 1", tokens=100)
    tool_result_1 = Block(key="tool_result_1", tokens=600, breakpoint="5m")
    thinking_2 = Block(key="thinking_block_2", tokens=1200, part="thinking")
    text_2 = Block(key="text block 2", tokens=300)
    text_response = Block(key="Text response", tokens=400, part="user_input", breakpoint="5m")
    turn = (system, question, thinking_1, tool_use_1, tool_result_1)
    return [
        SimRequest(blocks=(system, question), at=0, model=model),
        SimRequest(blocks=turn, at=10, model=model),
        SimRequest(blocks=(*turn, thinking_2, text_2, text_response), at=20, model=model),
    ]


def test_before_opus_4_5_a_user_text_drops_the_earlier_thinking_and_the_cache_after_it() -> None:
    sonnet_4_5 = "claude-sonnet-4-5-20250929"
    requests = _weather_in_paris(sonnet_4_5)
    first, tool_loop, next_turn = simulate(requests, price_for(sonnet_4_5)).requests
    assert (first.cache_read, first.cache_write) == (0, 0)
    # Within the turn the thinking stays: request 2 caches the question, thinking_block_1,
    # the tool call and its result.
    assert (tool_loop.cache_read, tool_loop.cache_write, tool_loop.uncached) == (0, 5200, 0)
    # "Non-tool-result user block causes all thinking blocks to be ignored": request 3 is
    # read as if they were never there (2,700 tokens fewer), and the entry request 2 wrote,
    # which holds thinking_block_1, no longer matches, so everything is written again.
    assert (next_turn.cache_read, next_turn.cache_write, next_turn.uncached) == (0, 4400, 0)


def test_opus_4_5_keeps_the_earlier_thinking_and_reads_the_turn_before_from_the_cache() -> None:
    opus_4_5 = "claude-opus-4-5-20251101"
    costs = simulate(_weather_in_paris(opus_4_5), price_for(opus_4_5)).requests
    assert [(c.cache_read, c.cache_write) for c in costs] == [(0, 0), (0, 5200), (5200, 1900)]


def test_a_request_without_a_model_keeps_its_thinking() -> None:
    requests = [msgspec.structs.replace(r, model="") for r in _weather_in_paris("")]
    assert simulate(requests, SONNET).requests[2].cache_read == 5200


def test_the_lower_bound_reads_no_prefix_past_dropped_thinking() -> None:
    sonnet_4_5 = "claude-sonnet-4-5-20250929"
    price = price_for(sonnet_4_5)  # $3 input, $0.30 read, $0.75 write surcharge
    requests = _weather_in_paris(sonnet_4_5)
    # 1: 3,000 uncached, of which 3,000 are repeated later (surcharged). 2: the 3,000 of
    # request 1 read, 2,200 uncached, none of them in request 3 as it is read. 3: 4,400
    # tokens without the thinking, 3,000 of them read.
    by_hand = (3000 * 3 + 3000 * 0.75) + (3000 * 0.3 + 2200 * 3) + (3000 * 0.3 + 1400 * 3)
    assert lower_bound(requests, price) == pytest.approx(by_hand / 1e6)
    assert lower_bound(requests, price) <= simulate(requests, price).total.cost


@pytest.mark.parametrize(
    ("model", "drops"),
    [
        ("claude-3-7-sonnet-20250219", True),
        ("claude-sonnet-4-20250514", True),
        ("claude-sonnet-4-5-20250929", True),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", True),
        ("claude-sonnet-4-5@20250929", True),
        ("claude-opus-4-20250514", True),
        ("claude-opus-4-1-20250805", True),
        ("claude-haiku-4-5-20251001", True),
        ("claude-3-5-haiku-20241022", True),
        ("claude-opus-4-5-20251101", False),
        ("claude-opus-4-6", False),
        ("claude-opus-4.7", False),
        ("claude-opus-5", False),
        ("claude-sonnet-4-6", False),
        ("claude-sonnet-5", False),
        ("claude-fable-5", False),
        ("gpt-5", False),
        ("", False),
    ],
)
def test_which_models_drop_the_thinking_of_earlier_turns(model: str, drops: bool) -> None:
    assert drops_earlier_thinking(model) is drops
