"""The compactor shell: completion, every rollback reason, cancellation at every await point,
chunks, replay, continue, the post-compaction prune and rounds that arrive meanwhile."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from itertools import count

import msgspec
import pytest
import trio
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from contextledger.compaction.compactor import compact, open_request, request_compaction
from contextledger.compaction.summarizers import SummaryInput
from contextledger.config import CompactionConfig, Config
from contextledger.events import Event, ModelRef, RecordedEvent
from contextledger.events.catalogue import CompactionRolledBack, ToolOutputCleared
from contextledger.events.parts import MessageError, TextPart, ToolCompleted
from contextledger.history.view import model_view
from contextledger.ledger import SessionLog
from contextledger.policy.compaction import EXHAUSTED_DETAIL
from contextledger.policy.overflow import Model, ModelLimits
from contextledger.policy.transcript import CONTINUE_TEXT
from contextledger.providers.errors import ContextOverflowError, ProviderError
from contextledger.store.memory import MemoryStore
from contextledger.testing import check_history, check_tool_pairs, session_events
from contextledger.testing.builder import SessionBuilder

REF = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
MODEL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=200_000, output=32_000),
)
SUMMARY = "## Goal\n- Fix the parser.\n\n## Next Steps\n- Run the tests."


class Fixed:
    """A summarizer that answers with ``text`` (or raises ``error``) after ``before``."""

    def __init__(
        self,
        text: str = SUMMARY,
        *,
        error: Exception | None = None,
        before: Callable[[], Awaitable[None]] | None = None,
        max_input_tokens: int | None = None,
    ) -> None:
        self.text = text
        self.error = error
        self.before = before
        self.max_input_tokens = max_input_tokens
        self.tasks: list[SummaryInput] = []

    async def summarize(self, task: SummaryInput) -> str:
        self.tasks.append(task)
        await trio.lowlevel.checkpoint()
        if self.before is not None:
            await self.before()
        if self.error is not None:
            raise self.error
        return self.text


def _clock() -> Callable[[], int]:
    ticks = count(1_900_000_000_000, 1000)
    return lambda: next(ticks)


def _session(turns: int = 4, output: str = "ok") -> SessionBuilder:
    b = SessionBuilder("ses_test", model=REF)
    for turn in range(turns):
        user = b.user(f"Step {turn}: edit src/mod_{turn}.py")
        assistant = b.assistant(user)
        call = b.tool_call(assistant, "bash", {"command": f"pytest tests/test_{turn}.py"})
        b.tool_result(call, output)
        b.text(assistant, f"Done with step {turn}.")
        b.finish(assistant)
    return b


async def _log(events: Sequence[Event]) -> SessionLog:
    log = await SessionLog.open(MemoryStore(), "ses_test")
    await log.append(events)
    return log


def _view_bytes(log: SessionLog) -> bytes:
    return msgspec.json.encode(model_view(log.history))


async def test_a_compaction_completes_with_the_summary_then_the_kept_tail() -> None:
    log = await _log(_session().events)
    result = await compact(log, Fixed(), model=MODEL, config=Config(), clock=_clock())
    assert result.outcome == "completed" and result.tail_start_id is not None
    view = model_view(log.history)
    assert view[0].content[0].text == "What did we do so far?"  # type: ignore[union-attr]
    assert view[1].role == "assistant" and view[1].content[0].text == SUMMARY  # type: ignore[union-attr]
    assert view[2].source_id == result.tail_start_id
    check_history(log.history)
    check_tool_pairs(view)
    assert open_request(log.history) is None


async def test_the_continue_message_follows_an_automatic_compaction() -> None:
    log = await _log(_session().events)
    result = await compact(log, Fixed(), model=MODEL, config=Config(), clock=_clock())
    message = log.history.message(result.resumed_with or "")
    assert message.role == "user" and message.synthetic
    (part,) = message.parts
    assert isinstance(part, TextPart) and part.text == CONTINUE_TEXT
    assert part.metadata == {"compaction_continue": True}


async def test_a_manual_compaction_does_not_continue() -> None:
    log = await _log(_session().events)
    result = await compact(
        log, Fixed(), model=MODEL, config=Config(), clock=_clock(), trigger="manual"
    )
    assert result.outcome == "completed" and result.resumed_with is None


@pytest.mark.parametrize(
    ("summarizer", "reason"),
    [
        (Fixed(""), "empty"),
        (Fixed("   \n"), "empty"),
        (Fixed("The same line again and again.\n" * 40), "repetitive"),
        (
            Fixed(
                error=ContextOverflowError("anthropic", MessageError(name="ContextOverflowError"))
            ),
            "overflow",
        ),
        (
            Fixed(error=ProviderError("anthropic", MessageError(name="APIError", message="boom"))),
            "error",
        ),
    ],
)
async def test_a_failed_summary_rolls_back_and_leaves_the_view_byte_identical(
    summarizer: Fixed, reason: str
) -> None:
    log = await _log(_session().events)
    before = _view_bytes(log)
    result = await compact(log, summarizer, model=MODEL, config=Config(), clock=_clock())
    assert result.outcome == "rolled_back" and result.reason == reason
    assert _view_bytes(log) == before
    assert open_request(log.history) is None
    check_history(log.history)


async def test_the_fourth_attempt_of_a_turn_is_refused() -> None:
    log = await _log(_session().events)
    for _ in range(3):
        result = await compact(log, Fixed(""), model=MODEL, config=Config(), clock=_clock())
        assert result.reason == "empty"
    summarizer = Fixed()
    result = await compact(log, summarizer, model=MODEL, config=Config(), clock=_clock())
    assert result.outcome == "rolled_back" and result.detail == EXHAUSTED_DETAIL
    assert summarizer.tasks == []


async def test_an_overflow_compaction_replays_the_request_without_media() -> None:
    b = _session()
    b.user("Look at this screenshot.", files=(("image/png", "cat.png"),))
    log = await _log(b.events)
    result = await compact(
        log, Fixed(), model=MODEL, config=Config(), clock=_clock(), trigger="overflow"
    )
    replayed = log.history.message(result.resumed_with or "")
    texts = [p.text for p in replayed.parts if isinstance(p, TextPart)]
    assert texts == ["Look at this screenshot.", "[Attached image/png: cat.png]"]
    assert replayed.synthetic


async def test_the_model_summarizer_gets_the_pinned_prefix_and_the_head_as_sent() -> None:
    from contextledger.events.catalogue import PrefixPinned, PrefixProfile
    from contextledger.events.parts import ToolSchema

    b = _session()
    tools = (ToolSchema(name="bash", description="Run.", input_schema={"type": "object"}),)
    profile = PrefixProfile(
        provider_id="anthropic",
        model_id="claude-sonnet-4-5",
        agent="build",
        system_mode="default",
        system=("You are an engineer.",),
        tools=("bash",),
    )
    b.add(PrefixPinned, key="k" * 64, profile=profile, tool_table=tools)
    log = await _log(b.events)
    summarizer = Fixed()
    await compact(log, summarizer, model=MODEL, config=Config(), clock=_clock())
    (task,) = summarizer.tasks
    assert task.system == ("You are an engineer.",) and task.tools == tools
    assert task.messages and {m.source_id for m in task.messages} <= {m.id for m in task.head}
    assert task.head and task.transcript and "Create a new anchored summary" in task.prompt
    assert {m.target for m in task.marks} == {"tool", "system", "message"}


async def test_a_large_head_is_summarised_in_chunks_a_few_at_a_time() -> None:
    log = await _log(_session(turns=40, output="x" * 6_000).events)
    small = Model(
        provider_id="anthropic", model_id="m", limits=ModelLimits(context=16_000, output=2_000)
    )
    running = 0
    peak = 0

    async def pace() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await trio.sleep(0.01)
        running -= 1

    summarizer = Fixed(before=pace, max_input_tokens=4_000)
    config = Config(compaction=CompactionConfig(chunk_concurrency=2))
    result = await compact(log, summarizer, model=small, config=config, clock=_clock())
    assert result.outcome == "completed"
    chunks, merge = summarizer.tasks[:-1], summarizer.tasks[-1]
    assert len(chunks) >= 2 and all(f"of {len(chunks)} of a longer" in t.prompt for t in chunks)
    assert "<partial-summary" in merge.prompt
    assert peak <= 2


async def test_the_post_compaction_prune_clears_old_outputs_left_in_view() -> None:
    b = _session(turns=6, output="y" * 120_000)
    log = await _log(b.events)
    config = Config(compaction=CompactionConfig(tail_turns=0))
    await compact(log, Fixed(), model=MODEL, config=config, clock=_clock())
    cleared = [
        r.event for r in await log.store.read("ses_test") if isinstance(r.event, ToolOutputCleared)
    ]
    assert all(e.reason == "post-compaction" for e in cleared)


async def test_rounds_arriving_during_the_summary_follow_it_with_big_results_cleared() -> None:
    log = await _log(_session().events)
    b = SessionBuilder("ses_test", model=REF, started=False, start_ms=1_950_000_000_000)
    b._calls = 100  # call ids must not repeat those of the session so far

    async def arrive() -> None:
        user = b.user("While you summarise: run the linter.")
        assistant = b.assistant(user)
        call = b.tool_call(assistant, "bash", {"command": "ruff check ."})
        b.tool_result(call, "z" * 40_000)
        b.finish(assistant)
        await log.append(b.events)

    await compact(log, Fixed(before=arrive), model=MODEL, config=Config(), clock=_clock())
    view = model_view(log.history)
    texts = [c for m in view for c in m.content if hasattr(c, "text")]
    assert any(getattr(c, "text", "") == "While you summarise: run the linter." for c in texts)
    big = [p for m in log.history.messages for p in m.parts if getattr(p, "tool", "") == "bash"][-1]
    assert isinstance(big.state, ToolCompleted) and big.state.compacted_ms is not None  # type: ignore[attr-defined]
    check_tool_pairs(view)


class _CountingStore(MemoryStore):
    """A store whose appends pass through a checkpoint that can be cancelled at."""

    def __init__(self, hook: Callable[[], None]) -> None:
        super().__init__()
        self.hook = hook

    async def append(
        self, stream: str, expected: int, events: Sequence[Event]
    ) -> list[RecordedEvent]:  # type: ignore[override]
        self.hook()
        await trio.lowlevel.checkpoint()
        return await super().append(stream, expected, events)


async def test_a_cancel_at_every_await_point_leaves_the_log_consistent() -> None:
    """Cancel the compaction at its n-th checkpoint, for every n until it completes: the
    compaction is then either completed or rolled back, and the view is one of the two."""
    events = _session().events
    reference = await _log(events)
    before = _view_bytes(reference)
    n = 0
    while True:
        n += 1
        scope = trio.CancelScope()
        tick = _cancel_at(n, scope)
        store = _CountingStore(lambda: None)
        log = await SessionLog.open(store, "ses_test")
        await log.append(events)
        store.hook = tick
        with scope:
            await compact(
                log,
                Fixed(before=partial(_tick_async, tick)),
                model=MODEL,
                config=Config(),
                clock=_clock(),
            )
        fresh = await SessionLog.open(store, "ses_test")
        assert open_request(fresh.history) is None, f"open compaction after cancel at {n}"
        check_history(fresh.history)
        statuses = [c.status for c in fresh.history.state.compactions.values()]
        if scope.cancelled_caught:
            assert statuses in ([], ["rolled_back"], ["completed"]), statuses
            if statuses != ["completed"]:
                assert _view_bytes(fresh) == before
        else:
            assert statuses == ["completed"]
            break
    assert n > 3


def _cancel_at(n: int, scope: trio.CancelScope) -> Callable[[], None]:
    """A hook that cancels ``scope`` the ``n``-th time it is called."""
    seen = 0

    def tick() -> None:
        nonlocal seen
        seen += 1
        if seen == n:
            scope.cancel()

    return tick


async def _tick_async(tick: Callable[[], None]) -> None:
    tick()
    await trio.lowlevel.checkpoint()


async def test_request_compaction_appends_an_open_request() -> None:
    log = await _log(_session().events)
    request_id = await request_compaction(log, trigger="manual", clock=_clock())
    assert open_request(log.history) == request_id
    rolled = [
        r.event
        for r in await log.store.read("ses_test")
        if isinstance(r.event, CompactionRolledBack)
    ]
    assert rolled == []


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(events=session_events(), outcome=st.sampled_from(["", SUMMARY]))
async def test_any_session_compacts_or_rolls_back_cleanly(
    events: list[Event], outcome: str
) -> None:
    log = await _log(events)
    assume(open_request(log.history) is None)
    before = _view_bytes(log)
    result = await compact(log, Fixed(outcome), model=MODEL, config=Config(), clock=_clock())
    check_history(log.history)
    check_tool_pairs(model_view(log.history))
    assert open_request(log.history) is None
    if result.outcome == "rolled_back":
        assert _view_bytes(log) == before
    else:
        assert outcome == SUMMARY
