"""A summary request asks for no more output than the window leaves beside its head."""

from __future__ import annotations

from contextledger import Config, MemoryStore, SessionLog
from contextledger.compaction._compactor import compact
from contextledger.compaction._summarizers import SUMMARY_OUTPUT_TOKENS
from contextledger.events._catalogue import SessionStarted
from contextledger.providers._anthropic import AnthropicMessages
from contextledger.simulation import LocalSession
from contextledger.simulation._summaries import PricedSummarizer
from contextledger.strategies import strategy
from contextledger.vocabulary import Model, ModelLimits


def _model(context: int) -> Model:
    return Model(
        provider_id="anthropic",
        model_id="claude-sonnet-4-5",
        limits=ModelLimits(context=context, output=context // 4),
    )


async def _summary_request_cap(context: int) -> int:
    """The output the one summary request of a compaction asked for."""
    ticks = iter(range(1_767_225_600_000, 1_767_225_600_000 + 10**7, 1_000))
    log = await SessionLog.open(MemoryStore(), "ses_room")
    await log.append([SessionStarted(session_id="ses_room", time_ms=next(ticks))])
    session = LocalSession(
        log,
        strategy("runtime"),
        model=_model(context),
        wire=AnthropicMessages(),
        clock=lambda: next(ticks),
    )
    for turn in range(6):
        user = await session.add_user(f"Step {turn}: read module {turn} and explain it.")
        await session.record_assistant(
            user, text="Done.", tool_calls=[("read", {"path": f"m{turn}.py"}, "y = 2\n" * 1_400)]
        )
    summarizer = PricedSummarizer()
    result = await compact(
        log, summarizer, model=_model(context), config=Config(), clock=lambda: next(ticks)
    )
    assert result.outcome == "completed"
    (call,) = summarizer.calls
    assert call.request.max_output_tokens is not None
    return call.request.max_output_tokens


async def test_on_a_small_window_the_summary_asks_for_what_fits() -> None:
    cap = await _summary_request_cap(32_000)
    # Never more than the model can write (8,000 here), where 13,107 used to be asked for.
    assert Config().output.min <= cap <= 8_000 < SUMMARY_OUTPUT_TOKENS


async def test_on_a_large_window_the_summary_asks_for_its_full_output() -> None:
    cap = await _summary_request_cap(200_000)
    assert cap == SUMMARY_OUTPUT_TOKENS
