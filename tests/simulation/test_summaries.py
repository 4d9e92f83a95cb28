"""Summaries in a simulation: a memo shared by replays changes none of their figures."""

from __future__ import annotations

from contextledger.simulation import SummaryMemo, simulate_trace
from contextledger.simulation._synthetic import synthetic_session


def test_simulations_sharing_a_summary_memo_give_what_each_gives_alone() -> None:
    events = synthetic_session("ses_sum", seed=5, turns=12)
    memo = SummaryMemo()
    for summarizer, provider in (
        ("model", "anthropic"),
        ("extractive", "anthropic"),
        ("model", "openai"),
        ("model", "anthropic"),
    ):
        shared, alone = (
            simulate_trace(
                events,
                strategy_name="default",
                window=8_000,
                provider_family=provider,
                summarizer=summarizer,
                summary_memo=memo_or_none,
            )
            for memo_or_none in (memo, None)
        )
        assert shared.compactions > 1
        assert shared.summary() == alone.summary()
