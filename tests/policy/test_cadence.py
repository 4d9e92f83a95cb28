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
    compact_early,
    early_compaction_due,
    early_compaction_refused,
    economic_threshold,
    estimate_view_tokens,
    step_growth,
)
from contextledger.policy._compaction import MIN_TAIL_TOKENS
from contextledger.prices._multipliers import DEFAULT_PRICE, Price, price_for
from contextledger.testing._builder import SessionBuilder
from tests.strategies._sessions import MODEL, history, session, view_of

SONNET = price_for("anthropic", "claude-sonnet-4")


def _per_call(x: float, *, kept: int, growth: float, price: Price) -> float:
    """The cost per call (input-price units) of compacting every ``x`` tokens of growth."""
    fixed = price.cache_write * kept + price.output * SUMMARY_TOKENS
    return price.cache_read * (kept + x / 2) + fixed * growth / x


def test_a_worked_example() -> None:
    # F = 1.25 x 4,000 + 5 x 2,048 = 15,240; sqrt(2 x 15,240 x 600 / 0.1) = 13,523.3
    threshold = economic_threshold(kept_tokens=4_000, growth_per_call=600, price=SONNET)
    assert (SONNET.cache_read, SONNET.cache_write, SONNET.output) == (
        pytest.approx(0.1),
        pytest.approx(1.25),
        pytest.approx(5.0),
    )
    assert threshold == 4_000 + 13_524


@given(
    kept=st.integers(100, 50_000),
    growth=st.floats(1, 20_000),
    read=st.floats(0.01, 0.9),
    write=st.floats(1.0, 2.0),
    output=st.floats(1.0, 10.0),
    step=st.floats(0.05, 0.9),
)
def test_the_threshold_minimises_the_cost_per_call(
    kept: int, growth: float, read: float, write: float, output: float, step: float
) -> None:
    price = msgspec.structs.replace(
        DEFAULT_PRICE, cache_read=read, cache_write=write, output=output
    )
    x = economic_threshold(kept_tokens=kept, growth_per_call=growth, price=price) - kept
    best = _per_call(x, kept=kept, growth=growth, price=price)
    for other in (x * (1 - step), x * (1 + step)):
        assert best <= _per_call(other, kept=kept, growth=growth, price=price) * (1 + 1e-9)


def test_dearer_rewrites_and_faster_growth_let_the_view_grow_further() -> None:
    base = economic_threshold(kept_tokens=4_000, growth_per_call=600, price=SONNET)
    dear = msgspec.structs.replace(SONNET, cache_write=2.0)
    assert economic_threshold(kept_tokens=4_000, growth_per_call=600, price=dear) > base
    assert economic_threshold(kept_tokens=4_000, growth_per_call=2_400, price=SONNET) > base


def test_without_growth_or_a_cache_discount_it_never_pays() -> None:
    free_reads = msgspec.structs.replace(SONNET, cache_read=0.0)
    assert economic_threshold(kept_tokens=4_000, growth_per_call=0, price=SONNET) == NEVER
    assert economic_threshold(kept_tokens=4_000, growth_per_call=600, price=free_reads) == NEVER


def test_compact_early_compares_the_view_with_its_own_threshold() -> None:
    kept = 4_000
    assert not compact_early(kept, 600, kept_tokens=kept, price=SONNET)
    # 600 tokens a call: the threshold is 17,524 ...
    assert compact_early(17_525, 600, kept_tokens=kept, price=SONNET)
    assert not compact_early(17_524, 600, kept_tokens=kept, price=SONNET)
    # ... and without growth it is never reached.
    assert not compact_early(1_000_000, 0, kept_tokens=kept, price=SONNET)


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


def test_early_compaction_is_due_only_under_the_economic_cadence() -> None:
    view = view_of(session(12, output=lambda turn, tool: "z" * 40_000))
    assert estimate_view_tokens(view) > 100_000
    assert early_compaction_due(view, MODEL, _economic())
    assert not early_compaction_due(view, MODEL, Config())


def test_a_small_view_is_not_compacted_early() -> None:
    view = view_of(session(4))
    assert not early_compaction_due(view, MODEL, _economic())
    assert not early_compaction_due(view[:1], MODEL, _economic())  # no step yet


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
