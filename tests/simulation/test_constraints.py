"""Every strategy replays under the constraints a provider enforces, with every cost counted:
a request over the window is refused (not priced) and answered by an overflow compaction, a
strategy that cannot get under the window fails at that call, and a model summarizer's calls
are priced like any other."""

from __future__ import annotations

import pytest

from contextledger.cachesim import PromptCache, lower_bound, sim_request
from contextledger.events._parts import ModelRef
from contextledger.prices._tables import price_for
from contextledger.simulation import simulate_trace, trace_result
from contextledger.simulation._replay import over_window
from contextledger.simulation._synthetic import synthetic_session
from contextledger.vocabulary._messages import ModelMessage, ModelText
from contextledger.vocabulary._requests import CacheMark, Request

EVENTS = synthetic_session("ses_limits", seed=7, turns=8)
MODEL = "claude-sonnet-4-5"
REF = ModelRef(provider_id="anthropic", model_id=MODEL)


def _request(*texts: str, max_output: int | None = None, marked: int | None = None) -> Request:
    messages = tuple(
        ModelMessage(role="user", content=(ModelText(text=t),), source_id=f"msg_{i}")
        for i, t in enumerate(texts)
    )
    return Request(
        model=REF,
        session_id="s",
        system=(),
        tools=(),
        messages=messages,
        marks=() if marked is None else (CacheMark(target="message", index=marked),),
        max_output_tokens=max_output,
    )


def test_a_request_is_over_the_window_when_prompt_and_output_do_not_fit() -> None:
    request = _request("x" * 4_000, max_output=500)
    sim = sim_request(request, 0.0)
    assert not over_window(sim, request, sim.prompt_tokens + 500)
    assert over_window(sim, request, sim.prompt_tokens + 499)
    assert not over_window(sim, request, 0)  # an unknown window refuses nothing


def test_without_compaction_of_its_own_a_strategy_meets_the_window_through_overflows() -> None:
    baseline = simulate_trace(EVENTS, strategy_name="baseline", window=32_000)
    assert baseline.over_window_calls > 0  # refused, answered by an overflow compaction
    assert baseline.compactions >= baseline.over_window_calls - 1
    assert baseline.failed_at is None
    assert baseline.peak_prompt <= 32_000
    roomy = simulate_trace(EVENTS, strategy_name="baseline", window=1_000_000)
    assert roomy.over_window_calls == 0 and roomy.compactions == 0


def test_default_never_sends_over_the_window() -> None:
    ours = simulate_trace(EVENTS, strategy_name="default", window=32_000)
    assert ours.over_window_calls == 0 and ours.failed_at is None
    assert ours.compactions > 0


def test_a_strategy_that_cannot_get_under_the_window_fails_at_that_call() -> None:
    # At 12k, Kilo's window (context - output - 20,000 reserved) leaves nothing usable.
    failed = simulate_trace(EVENTS, strategy_name="opencode", window=12_000)
    assert failed.failed_at is not None
    assert failed.calls == failed.failed_at - 1


@pytest.mark.parametrize("name", ["compact-at-12000-structured", "default"])
def test_model_summaries_are_priced_like_any_call(name: str) -> None:
    free = simulate_trace(EVENTS, strategy_name=name, window=32_000)
    paid = simulate_trace(EVENTS, strategy_name=name, window=32_000, summarizer="model")
    assert (
        free.summary_calls == 0 and free.summary_cost == 0 and free.cost == free.billed_input_cost
    )
    assert paid.compactions == free.compactions > 0
    assert paid.summary_calls >= paid.compactions
    assert paid.summary_input_tokens > 0 and paid.summary_output_tokens > 0
    assert paid.summary_cost > 0
    assert paid.cost == pytest.approx(paid.billed_input_cost + paid.summary_cost)
    # The bound covers the same requests as the cost: the paid run's adds its summary calls,
    # still below what they cost; without a summary call the two bounds are one.
    assert free.calls_lower_bound == free.lower_bound
    assert paid.calls_lower_bound < paid.lower_bound <= paid.cost
    assert paid.cost_vs_calls_lower_bound is not None and free.cost_vs_lower_bound is not None
    assert paid.cost_vs_calls_lower_bound > free.cost_vs_lower_bound


def test_a_summary_is_priced_before_the_call_that_waited_for_it() -> None:
    shared = "y" * 20_000
    call = sim_request(_request(shared + " and the question", max_output=100), 10.0, 50)
    summary = sim_request(_request(shared, max_output=100), 10.0, 500)
    alone = trace_result("s", "anthropic", "claude-sonnet-4-5", [call], [""])
    both = trace_result(
        "s", "anthropic", "claude-sonnet-4-5", [call], [""], summaries=[(0, summary)]
    )
    assert both.summary_calls == 1 and both.summary_output_tokens == 500
    assert both.summary_cost > 0
    assert both.calls_lower_bound == pytest.approx(alone.lower_bound)
    summary_output = 500 * price_for("claude-sonnet-4-5", "anthropic").output / 1e6
    assert both.lower_bound >= both.calls_lower_bound + summary_output
    assert both.lower_bound <= both.cost
    assert both.prompt_tokens == alone.prompt_tokens


def test_a_summary_is_priced_after_the_calls_before_the_one_it_was_written_for() -> None:
    # Two calls sent in the same second, the summary written for the second: it reads what
    # the first wrote (the prompt of the first, marked as the session's requests mark it).
    first = sim_request(_request("y" * 20_000, marked=0), 10.0, 50)
    summary = sim_request(_request("y" * 20_000, "summarise", marked=0), 10.0, 500)
    second = sim_request(_request("z" * 20_000, marked=0), 10.0, 50)
    result = trace_result(
        "s", "anthropic", MODEL, [first, second], ["", "compacted"], summaries=[(1, summary)]
    )
    price = price_for(MODEL, "anthropic")
    cache = PromptCache(price)
    costs = [cache.charge(r) for r in (first, summary, second)]
    assert costs[1].cache_read == first.prompt_tokens  # the summary read the first call's
    assert result.input_cost == (costs[0].input_cost, costs[2].input_cost)
    assert result.summary_cost == pytest.approx(costs[1].cost)
    expected = lower_bound([first, summary, second], price, output=False)
    assert result.lower_bound == pytest.approx(expected + 500 * price.output / 1e6)
    # Written for the first call, the summary goes before it: it writes that prompt, which
    # the first then reads.
    early = trace_result(
        "s", "anthropic", MODEL, [first, second], ["compacted", ""], summaries=[(0, summary)]
    )
    assert early.summary_cost > result.summary_cost
    assert early.input_cost[0] < result.input_cost[0]
