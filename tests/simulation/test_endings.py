"""Two strategies compared at every call a session could have ended after: the running costs
count each summary call at the call it was written for, and ``compare_endings`` sums them up."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.cachesim import PromptCache, sim_request
from contextledger.cachesim._blocks import SimRequest
from contextledger.events._parts import ModelRef
from contextledger.prices._tables import price_for
from contextledger.simulation import EndingComparison, compare_endings, simulate_trace, trace_result
from contextledger.simulation._synthetic import synthetic_session
from contextledger.vocabulary._messages import ModelMessage, ModelText
from contextledger.vocabulary._requests import Request

MODEL = "claude-sonnet-4-5"


def _sim(text: str, output: int = 50) -> SimRequest:
    request = Request(
        model=ModelRef(provider_id="anthropic", model_id=MODEL),
        session_id="s",
        system=(),
        tools=(),
        messages=(ModelMessage(role="user", content=(ModelText(text=text),), source_id="m"),),
        marks=(),
        max_output_tokens=100,
    )
    return sim_request(request, 10.0, output)


def test_running_costs_count_a_summary_at_the_call_it_was_written_for() -> None:
    calls = [_sim("a" * 8_000), _sim("b" * 8_000), _sim("c" * 8_000)]
    summary = _sim("a" * 8_000 + " summarise", output=400)
    result = trace_result(
        "s", "anthropic", MODEL, calls, ["", "compacted", ""], summaries=[(1, summary)]
    )
    cache = PromptCache(price_for(MODEL, "anthropic"))
    first, written, second, third = (cache.charge(r) for r in (calls[0], summary, *calls[1:]))
    assert result.summary_call_costs == ((1, pytest.approx(written.cost)),)
    assert result.running_costs == pytest.approx(
        (
            first.input_cost,
            first.input_cost + written.cost + second.input_cost,
            first.input_cost + written.cost + second.input_cost + third.input_cost,
        )
    )
    assert result.running_costs[-1] == pytest.approx(result.cost)


def test_a_summary_for_the_call_that_failed_is_in_the_cost_only() -> None:
    call, summary = _sim("a" * 8_000), _sim("a" * 8_000 + " summarise", output=400)
    result = trace_result(
        "s", "anthropic", MODEL, [call], [""], failed_at=2, summaries=[(1, summary)]
    )
    assert result.running_costs == pytest.approx((result.billed_input_cost,))
    assert result.cost > result.running_costs[-1]


def test_the_running_costs_of_a_replay_end_at_its_cost() -> None:
    events = synthetic_session("ses_endings", seed=3, turns=8)
    result = simulate_trace(events, strategy_name="baseline", window=32_000, summarizer="model")
    assert result.summary_calls > 0  # a summary call is among the running costs
    running = result.running_costs
    assert len(running) == result.calls
    assert all(b >= a for a, b in pairwise(running))
    assert running[-1] == pytest.approx(result.cost)


def test_endings_compare_cost_by_cost() -> None:
    # Acting at the second call costs more then and saves after: above at one ending of three.
    found = compare_endings([1.0, 3.0, 3.5], [1.0, 2.0, 4.0])
    assert found == EndingComparison(
        endings=3, above=1, max_ratio=pytest.approx(1.5), mean_ratio=pytest.approx(7.5 / 7.0)
    )


@pytest.mark.parametrize(
    ("ours", "theirs"), [([], []), ([1.0], [1.0, 2.0]), ([1.0, 2.0], [0.0, 2.0])]
)
def test_endings_are_not_compared_without_the_same_calls_or_a_cost(
    ours: list[float], theirs: list[float]
) -> None:
    assert compare_endings(ours, theirs) is None


_costs = st.lists(st.floats(0.001, 100.0), min_size=1, max_size=30).map(
    lambda steps: [sum(steps[: i + 1]) for i in range(len(steps))]
)


@given(_costs, st.floats(0.1, 10.0))
def test_a_strategy_cheaper_at_every_ending_is_above_at_none(
    theirs: list[float], share: float
) -> None:
    ours = [cost * min(share, 1.0) for cost in theirs]
    found = compare_endings(ours, theirs)
    assert found is not None
    assert found.above == 0 and found.max_ratio <= 1.0 and found.mean_ratio <= 1.0


@given(st.data())
def test_the_mean_ratio_lies_between_the_least_and_the_largest(data: st.DataObject) -> None:
    theirs = data.draw(_costs)
    ours = data.draw(st.lists(st.floats(0.0, 100.0), min_size=len(theirs), max_size=len(theirs)))
    found = compare_endings(ours, theirs)
    assert found is not None
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    assert min(ratios) - 1e-9 <= found.mean_ratio <= found.max_ratio + 1e-9
    assert found.above == sum(a > b for a, b in zip(ours, theirs, strict=True))
    assert 0 <= found.above <= found.endings == len(theirs)


def test_costs_are_floats_even_without_a_summary_call() -> None:
    result = trace_result("s", "anthropic", MODEL, [], [])
    assert isinstance(result.summary_cost, float) and isinstance(result.billed_input_cost, float)
    assert '"summary_cost":0.0' in json.dumps(result.summary(), separators=(",", ":"))
