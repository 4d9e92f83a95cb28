"""Summaries in a simulation: a memo shared by replays changes none of their figures."""

from __future__ import annotations

import trio

from contextledger.compaction import SummaryInput
from contextledger.events._parts import ModelRef
from contextledger.policy._compaction import text_tokens
from contextledger.policy._templates import OPENCODE, summary_prompt
from contextledger.simulation import SummaryMemo, simulate_trace
from contextledger.simulation._summaries import PricedSummarizer
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


class _Gated:
    """Answers each task with its transcript once that task's gate opens, noting the order
    it was asked in."""

    max_input_tokens: int | None = None

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.gates: dict[str, trio.Event] = {}

    async def summarize(self, task: SummaryInput) -> str:
        self.asked.append(task.transcript)
        await self.gates.setdefault(task.transcript, trio.Event()).wait()
        return task.transcript


async def test_summary_calls_are_recorded_in_the_order_they_were_asked_for() -> None:
    gated = _Gated()
    priced = PricedSummarizer(gated)
    tasks = [
        SummaryInput(
            session_id="ses_order",
            head=(),
            transcript=text,
            previous_summary=None,
            template=OPENCODE,
            prompt=summary_prompt(OPENCODE, None),
            model=ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5"),
        )
        for text in ("first " * 10, "second " * 300)
    ]
    async with trio.open_nursery() as nursery:
        for task in tasks:
            nursery.start_soon(priced.summarize, task)
        await trio.testing.wait_all_tasks_blocked()
        for text in reversed(gated.asked):  # the last asked is answered first
            gated.gates[text].set()
            await trio.testing.wait_all_tasks_blocked()
    assert [call.output_tokens for call in priced.calls] == [
        text_tokens(len(text)) for text in gated.asked
    ]
