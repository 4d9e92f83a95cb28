"""Hand-built sessions shared by the strategy tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import count

from contextledger.events import Event, ModelRef, RecordedEvent
from contextledger.events._parts import Usage
from contextledger.history._projection import History
from contextledger.history._view import model_view
from contextledger.ledger import SessionLog
from contextledger.store._memory import MemoryStore
from contextledger.testing._builder import DEFAULT_START_MS, SessionBuilder
from contextledger.vocabulary._messages import ModelMessage, ModelToolResult
from contextledger.vocabulary._models import Model, ModelLimits

REF = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
MODEL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=200_000, output=32_000),
)


def session(
    turns: int = 4,
    *,
    tools: Sequence[str] = ("bash",),
    output: Callable[[int, str], str] = lambda turn, tool: f"{tool} output {turn}",
    usage: Callable[[int], Usage] = lambda turn: Usage(),
) -> SessionBuilder:
    """``turns`` user turns; each assistant message calls every tool of ``tools`` once."""
    b = SessionBuilder("ses_test", model=REF)
    for turn in range(turns):
        user = b.user(f"Step {turn}: edit src/mod_{turn}.py")
        assistant = b.assistant(user)
        calls = [b.tool_call(assistant, tool, {"command": f"{tool} {turn}"}) for tool in tools]
        for call, tool in zip(calls, tools, strict=True):
            b.tool_result(call, output(turn, tool))
        b.text(assistant, f"Done with step {turn}.")
        b.finish(assistant, usage=usage(turn))
    return b


def history(events: Sequence[Event]) -> History:
    return History.rebuild(
        "ses_test", [RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, 1)]
    )


def view_of(b: SessionBuilder) -> list[ModelMessage]:
    return model_view(history(b.events))


def results(view: Sequence[ModelMessage]) -> list[ModelToolResult]:
    return [c for m in view for c in m.content if isinstance(c, ModelToolResult)]


async def log_of(events: Sequence[Event]) -> SessionLog:
    log = await SessionLog.open(MemoryStore(), "ses_test")
    await log.append(events)
    return log


def clock(start_ms: int = DEFAULT_START_MS + 3_600_000) -> Callable[[], int]:
    """A clock an hour after the built sessions (their prompt cache is cold)."""
    ticks = count(start_ms, 1000)
    return lambda: next(ticks)
