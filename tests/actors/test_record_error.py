"""A provider's overflow error is answered with a compaction; once the turn has used its
attempts, ``record_error`` raises instead of letting the same request be sent again."""

from __future__ import annotations

import pytest

from contextledger import CompactionExhausted, MemoryStore, SessionLog
from contextledger.events._catalogue import SessionStarted
from contextledger.events._parts import MessageError
from contextledger.providers._anthropic import AnthropicMessages
from contextledger.providers._errors import ProviderError
from contextledger.simulation import LocalSession
from contextledger.strategies import strategy
from contextledger.vocabulary import Model, ModelLimits

MODEL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=32_000, output=8_000),
)
OVERFLOW = ProviderError(
    "anthropic", MessageError(name="ContextOverflowError", message="prompt is too long"), status=400
)


async def test_an_overflow_past_the_attempts_raises_compaction_exhausted() -> None:
    ticks = iter(range(1_767_225_600_000, 1_767_225_600_000 + 10**6, 1_000))
    log = await SessionLog.open(MemoryStore(), "ses_overflow")
    await log.append([SessionStarted(session_id="ses_overflow", time_ms=next(ticks))])
    session = LocalSession(
        log,
        strategy("baseline"),  # pi's answer to an overflow: one compaction per step
        model=MODEL,
        wire=AnthropicMessages(),
        clock=lambda: next(ticks),
    )
    user = await session.add_user("Read the whole repository and summarise it. " * 50)
    await session.record_assistant(
        user, tool_calls=[("read", {"path": "a.py"}, "x = 1\n" * 400)], agent_id="main"
    )
    first = await session.record_error(await session.start_assistant(user), OVERFLOW)
    assert first is not None and first.outcome == "completed"
    with pytest.raises(CompactionExhausted):
        await session.record_error(await session.start_assistant(user), OVERFLOW)
