"""``contextledger.policy._cadence``: the economic compaction threshold."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.config import CompactionConfig, Config
from contextledger.events._catalogue import MAIN_AGENT, CompactionCompleted, CompactionProjection
from contextledger.policy._cadence import (
    NEVER,
    SUMMARY_TOKENS,
    Economics,
    cold_compaction_pays,
    compact_early,
    compaction_cost,
    compaction_pays,
    early_compaction,
    early_compaction_due,
    early_compaction_refused,
    economic_threshold,
    estimate_view_tokens,
    step_growth,
)
from contextledger.policy._compaction import MIN_TAIL_TOKENS
from contextledger.policy._decisions import compaction_due, last_finished_ms
from contextledger.prices._multipliers import DEFAULT_PRICE, Price, price_for
from contextledger.testing._builder import SessionBuilder
from tests.strategies._sessions import MODEL, history, session, view_of

SONNET = price_for("anthropic", "claude-sonnet-4")


def _economics(
    *, tail: int = 2_000, summary: int = SUMMARY_TOKENS, price: Price = SONNET
) -> Economics:
    return Economics(tail_tokens=tail, summary_tokens=summary, price=price)


def _per_call(x: float, *, growth: float, economics: Economics) -> float:
    """The cost per call (input-price units) of compacting every ``x`` tokens of growth."""
    kept = economics.kept_tokens
    # F grows by ``a`` a token past the kept size, so it is exact between whole tokens too
    cycle = compaction_cost(kept, economics) + economics.price.cache_read * x
    return economics.price.cache_read * (kept + x / 2) + cycle * growth / x


def test_a_worked_example() -> None:
    # K = 2,000 + 2,048; F(K) = 0.1 x 2,048 + 5 x 2,048 + 1.25 x 4,048 = 15,504.8
    # sqrt(2 x 15,504.8 x 600 / 0.1) = 13,640.2
    economics = _economics()
    assert (SONNET.cache_read, SONNET.cache_write, SONNET.output) == (
        pytest.approx(0.1),
        pytest.approx(1.25),
        pytest.approx(5.0),
    )
    assert compaction_cost(4_048, economics) == pytest.approx(15_504.8)
    assert economic_threshold(growth_per_call=600, economics=economics) == 4_048 + 13_641


def test_a_compaction_counts_the_summary_calls_input_and_output_and_the_rewrite() -> None:
    economics = _economics()
    # 20,000 - 2,000 head tokens read from the cache at 0.1, 2,048 out at 5, 4,048 at 1.25
    assert compaction_cost(20_000, economics) == pytest.approx(1_800 + 10_240 + 5_060)
    longer = _economics(summary=6_000)
    assert compaction_cost(20_000, longer) > compaction_cost(20_000, economics)


@given(
    tail=st.integers(100, 20_000),
    summary=st.integers(100, 20_000),
    growth=st.floats(1, 20_000),
    read=st.floats(0.01, 0.9),
    write=st.floats(1.0, 2.0),
    output=st.floats(1.0, 10.0),
    step=st.floats(0.05, 0.9),
)
def test_the_threshold_minimises_the_cost_per_call(
    tail: int,
    summary: int,
    growth: float,
    read: float,
    write: float,
    output: float,
    step: float,
) -> None:
    price = msgspec.structs.replace(
        DEFAULT_PRICE, cache_read=read, cache_write=write, output=output
    )
    economics = _economics(tail=tail, summary=summary, price=price)
    x = economic_threshold(growth_per_call=growth, economics=economics) - economics.kept_tokens
    best = _per_call(x, growth=growth, economics=economics)
    # the threshold rounds the optimum up to a whole token: it lies between x - 1 and x
    below = min(best, _per_call(x - 1, growth=growth, economics=economics))
    assert best <= _per_call(x * (1 + step), growth=growth, economics=economics) * (1 + 1e-6)
    assert below <= _per_call(x * (1 - step), growth=growth, economics=economics) * (1 + 1e-6)


def test_dearer_rewrites_longer_summaries_and_faster_growth_let_the_view_grow_further() -> None:
    base = economic_threshold(growth_per_call=600, economics=_economics())
    dear = _economics(price=msgspec.structs.replace(SONNET, cache_write=2.0))
    assert economic_threshold(growth_per_call=600, economics=dear) > base
    assert economic_threshold(growth_per_call=600, economics=_economics(summary=6_000)) > base
    assert economic_threshold(growth_per_call=2_400, economics=_economics()) > base


def test_without_growth_or_a_cache_discount_it_never_pays() -> None:
    free_reads = _economics(price=msgspec.structs.replace(SONNET, cache_read=0.0))
    assert economic_threshold(growth_per_call=0, economics=_economics()) == NEVER
    assert economic_threshold(growth_per_call=600, economics=free_reads) == NEVER


def test_a_compaction_pays_only_when_the_reads_saved_over_the_calls_to_come_exceed_it() -> None:
    economics = _economics()
    view = 30_000
    # F(30,000) = 0.1 x 28,000 + 10,240 + 5,060 = 18,100; a call saves 0.1 x 25,952 = 2,595.2
    assert not compaction_pays(view, calls_to_come=6, economics=economics)
    assert compaction_pays(view, calls_to_come=7, economics=economics)
    assert not compaction_pays(view, calls_to_come=0, economics=economics)


def test_compact_early_needs_the_threshold_passed_and_the_compaction_to_pay() -> None:
    economics = _economics()
    threshold = economic_threshold(growth_per_call=600, economics=economics)  # 17,689
    assert compact_early(threshold + 1, 600, calls_to_come=100, economics=economics)
    assert not compact_early(threshold, 600, calls_to_come=100, economics=economics)
    # a short session: past the threshold, but three calls do not earn the compaction back
    assert not compact_early(threshold + 1, 600, calls_to_come=3, economics=economics)
    # ... and without growth it is never reached.
    assert not compact_early(1_000_000, 0, calls_to_come=100, economics=economics)
    assert not compact_early(economics.kept_tokens, 600, calls_to_come=100, economics=economics)


def test_the_calls_to_come_are_counted_only_once_the_threshold_is_passed() -> None:
    economics, counted = _economics(), []

    def calls() -> int:
        counted.append(1)
        return 100

    threshold = economic_threshold(growth_per_call=600, economics=economics)
    assert not compact_early(threshold, 600, calls_to_come=calls, economics=economics)
    assert counted == []
    assert compact_early(threshold + 1, 600, calls_to_come=calls, economics=economics)
    assert counted == [1]


def test_on_a_cold_cache_the_reads_saved_after_the_next_call_pay_for_the_summary_twice() -> None:
    economics = _economics()
    # (w + o)·S = 6.25 x 2,048 = 12,800; a later call saves 0.1 x (20,000 - 4,048) = 1,595.2
    # (without growth there is no cycle: only the calls to come count)
    assert not cold_compaction_pays(20_000, 0, calls_to_come=9, economics=economics)
    assert cold_compaction_pays(20_000, 0, calls_to_come=10, economics=economics)
    # keeping writes the whole view again; compacting writes the head and the kept view
    keep = SONNET.cache_write * 20_000 + 9 * SONNET.cache_read * 20_000
    compact = (
        SONNET.cache_write * (20_000 - 2_000)
        + SONNET.output * SUMMARY_TOKENS
        + SONNET.cache_write * economics.kept_tokens
        + 9 * SONNET.cache_read * economics.kept_tokens
    )
    assert keep - compact == pytest.approx(9 * 1_595.2 - 12_800)
    assert not cold_compaction_pays(
        economics.kept_tokens, 0, calls_to_come=1_000, economics=economics
    )
    assert not cold_compaction_pays(1_000_000, 0, calls_to_come=1, economics=economics)


def test_a_cold_cache_compacts_below_the_growth_threshold_when_it_pays() -> None:
    economics = _economics()
    threshold = economic_threshold(growth_per_call=600, economics=economics)  # 17,689
    assert threshold == 17_689
    # the rest of the cycle: 0.1 x 8,452 x (5,189 + 13,641) / 1,200 = 13,262.9 > 12,800
    assert not compact_early(12_500, 600, calls_to_come=100, economics=economics)
    assert compact_early(12_500, 600, calls_to_come=100, economics=economics, cold=True)
    # ... but not over three calls to come
    assert not compact_early(12_500, 600, calls_to_come=3, economics=economics, cold=True)
    # 0.1 x 6,952 x (6,689 + 13,641) / 1,200 = 11,777.9: too early in the cycle, whatever
    # the calls to come (99 later calls would save 68,824.8)
    assert not compact_early(11_000, 600, calls_to_come=100, economics=economics, cold=True)
    assert cold_compaction_pays(11_000, 0, calls_to_come=100, economics=economics)
    assert not compact_early(
        economics.kept_tokens, 600, calls_to_come=100, economics=economics, cold=True
    )


_prices = st.builds(
    lambda read, write, output: msgspec.structs.replace(
        DEFAULT_PRICE, cache_read=read, cache_write=write, output=output
    ),
    read=st.floats(0.01, 0.9),
    write=st.floats(1.0, 2.0),
    output=st.floats(0.0, 10.0),
)


#: A view, what a compaction keeps of it, the calls to come and the prices.
_cold_cases = {
    "view": st.integers(0, 400_000),
    "tail": st.integers(0, 50_000),
    "summary": st.integers(0, 20_000),
    "calls": st.integers(0, 500),
    "price": _prices,
}


@given(growth=st.floats(0, 20_000), **_cold_cases)
def test_a_cold_cache_never_makes_compacting_less_attractive(
    view: int, tail: int, summary: int, growth: float, calls: int, price: Price
) -> None:
    economics = _economics(tail=tail, summary=summary, price=price)
    if compact_early(view, growth, calls_to_come=calls, economics=economics):
        assert compact_early(view, growth, calls_to_come=calls, economics=economics, cold=True)


@given(more=st.integers(0, 400_000), growth=st.floats(0, 20_000), **_cold_cases)
def test_on_a_cold_cache_a_larger_view_pays_at_least_as_well(
    view: int, more: int, growth: float, tail: int, summary: int, calls: int, price: Price
) -> None:
    economics = _economics(tail=tail, summary=summary, price=price)
    if cold_compaction_pays(view, growth, calls_to_come=calls, economics=economics):
        assert cold_compaction_pays(view + more, growth, calls_to_come=calls, economics=economics)
    if summary == 0 and calls > 1:  # a free summary: any view larger than the tail pays
        pays = cold_compaction_pays(view, growth, calls_to_come=calls, economics=economics)
        assert pays == (view > tail)


@given(**_cold_cases)
def test_cold_compaction_pays_exactly_when_compacting_costs_less_than_keeping(
    view: int, tail: int, summary: int, calls: int, price: Price
) -> None:
    economics = _economics(tail=tail, summary=summary, price=price)
    kept, later = economics.kept_tokens, calls - 1
    keep = price.cache_write * view + later * price.cache_read * view
    compact = (
        price.cache_write * max(0, view - tail)
        + price.output * summary
        + price.cache_write * kept
        + later * price.cache_read * kept
    )
    if calls > 0 and view >= tail and abs(keep - compact) > 1e-6 * max(keep, compact, 1):
        assert cold_compaction_pays(view, 0, calls_to_come=calls, economics=economics) == (
            keep > compact
        )


def test_steps_are_an_answer_and_what_follows_it_and_the_pace_is_their_median() -> None:
    view = view_of(session(6, output=lambda turn, tool: "z" * (400 if turn != 3 else 80_000)))
    steps = step_growth(view)
    assert len(steps) == 6  # one per assistant message; the opening request is no step
    assert sum(steps) < estimate_view_tokens(view)
    assert max(steps) > 10_000 > sorted(steps)[2] * 10  # the jump is one step, not the pace
    assert step_growth(view[:1]) == []


def _economic() -> Config:
    return Config(
        compaction=CompactionConfig(
            cadence="economic", attempts_per="step", preserve_recent_tokens=MIN_TAIL_TOKENS
        )
    )


def _due(b: SessionBuilder, config: Config, *, steps: int | None = None) -> bool:
    h = history(b.events)
    view = view_of(b)
    return early_compaction_due(
        h, view[:steps] if steps else view, MODEL, config, agent_id=MAIN_AGENT
    )


def test_early_compaction_is_due_only_under_the_economic_cadence() -> None:
    b = session(12, output=lambda turn, tool: "z" * 40_000)
    assert estimate_view_tokens(view_of(b)) > 100_000
    assert _due(b, _economic())
    assert not _due(b, Config())


def test_a_view_made_smaller_by_enough_is_no_longer_due() -> None:
    b = session(12, output=lambda turn, tool: "z" * 40_000)
    early = early_compaction(history(b.events), view_of(b), MODEL, _economic(), agent_id=MAIN_AGENT)
    assert early is not None and early.due() and early.due(0) == _due(b, _economic())
    assert not early.due(early.view_tokens - early.economics.kept_tokens)
    assert (
        early_compaction(history(b.events), view_of(b), MODEL, Config(), agent_id=MAIN_AGENT)
        is None
    )


def test_a_view_below_its_threshold_is_compacted_once_the_cache_has_expired() -> None:
    b = session(30, output=lambda turn, tool: "z" * 800)
    h, config = history(b.events), _economic()
    early = early_compaction(h, view_of(b), MODEL, config, agent_id=MAIN_AGENT)
    assert early is not None and not early.due()
    finished = last_finished_ms(h, MAIN_AGENT)
    assert finished is not None and finished == b.clock_ms
    ttl_ms = price_for(MODEL.provider_id, MODEL.model_id).ttl_s * 1000

    def due(now_ms: int | None) -> str | None:
        return compaction_due(h, MODEL, config, agent_id=MAIN_AGENT, now_ms=now_ms)

    assert due(None) is None
    assert due(finished + ttl_ms) is None
    assert due(finished + ttl_ms + 1) == "economic"
    assert (
        compaction_due(h, MODEL, Config(), agent_id=MAIN_AGENT, now_ms=finished + ttl_ms + 1)
        is None
    )
    # a short session does not earn even a cold compaction back
    short = session(4, output=lambda turn, tool: "z" * 6_000)
    assert (
        compaction_due(history(short.events), MODEL, config, agent_id=MAIN_AGENT, now_ms=10**13)
        is None
    )


def test_a_small_view_is_not_compacted_early() -> None:
    assert not _due(session(4), _economic())
    assert not _due(session(12, output=lambda turn, tool: "z" * 40_000), _economic(), steps=1)


def _compaction(b: SessionBuilder, outcome: str) -> None:
    request = b.request_compaction()
    if outcome == "rolled_back":
        b.roll_back(request, "empty")
    else:
        summary = b.summary(request, "## Goal\nthe summary")
        b.add(
            CompactionCompleted,
            request_message_id=request,
            summary_message_id=summary,
            tail_start_id=None,
            projection=CompactionProjection(summary="## Goal\nthe summary"),
        )


def test_an_early_compaction_is_not_retried_until_a_step_has_finished() -> None:
    b = session(3)
    assert not early_compaction_refused(history(b.events), MAIN_AGENT)
    _compaction(b, "rolled_back")
    assert early_compaction_refused(history(b.events), MAIN_AGENT)
    assert not early_compaction_refused(history(b.events), "explore")  # another agent's
    user = b.user("Go on.")
    answer = b.assistant(user)
    b.text(answer, "Done.")
    b.finish(answer)
    assert not early_compaction_refused(history(b.events), MAIN_AGENT)
    _compaction(b, "completed")
    assert not early_compaction_refused(history(b.events), MAIN_AGENT)
