"""The compactor shell: completion, every rollback reason, cancellation at every await point,
chunks, replay, continue, the post-compaction prune and rounds that arrive meanwhile."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from itertools import count
from typing import Any

import msgspec
import pytest
import trio
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from contextledger.compaction._compactor import (
    COMPACTION_AGENT,
    compact,
    open_request,
    request_compaction,
)
from contextledger.compaction._summarizers import (
    IDENTIFIERS,
    LAST_STEP,
    LATEST_REQUEST,
    SUMMARY_OPENING,
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
    SummaryInput,
)
from contextledger.config import CompactionConfig, Config
from contextledger.events import MAIN_AGENT, Event, ModelRef, RecordedEvent
from contextledger.events._catalogue import (
    CompactionCompleted,
    CompactionRolledBack,
    RollbackReason,
    ToolOutputCleared,
)
from contextledger.events._parts import (
    CompactionTrigger,
    MessageError,
    TextPart,
    ToolCompleted,
    ToolPart,
)
from contextledger.history._projection import History
from contextledger.history._view import ViewOptions, model_view, view_messages
from contextledger.ledger import SessionLog
from contextledger.policy._compaction import CHUNK_OUTPUT_TOKENS, EXHAUSTED_DETAIL, hide_compactions
from contextledger.policy._transcript import CONTINUE_TEXT, OVERFLOW_NOTICE, replay_parts
from contextledger.providers._errors import ContextOverflowError, ProviderError
from contextledger.providers._http import ProviderClient
from contextledger.providers._registry import WIRE_FORMATS
from contextledger.store._memory import MemoryStore
from contextledger.testing import check_history, check_tool_pairs, session_events
from contextledger.testing._builder import SessionBuilder
from contextledger.vocabulary._models import Model, ModelLimits
from contextledger.vocabulary._options import TemplateName
from tests.providers.loopback import Loopback, Reply
from tests.providers.responses import body

REF = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
MODEL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=200_000, output=32_000),
)
SUMMARY = "## Goal\n- Fix the parser.\n\n## Next Steps\n- Run the tests."
#: Why the fourth compaction of a turn is refused, under the default three attempts.
EXHAUSTED = EXHAUSTED_DETAIL.format(attempts=3)


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


def _clock(start_ms: int = 1_900_000_000_000) -> Callable[[], int]:
    ticks = count(start_ms, 1000)
    return lambda: next(ticks)


def _later(start_ms: int, calls: int = 10_000) -> SessionBuilder:
    """A builder for events appended to a log already holding a session: its messages start
    at ``start_ms`` and its call ids after ``calls`` (they must not repeat earlier ones)."""
    b = SessionBuilder("ses_test", model=REF, started=False, start_ms=start_ms)
    b._calls = calls
    return b


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


def _view_bytes(log: SessionLog, options: ViewOptions | None = None) -> bytes:
    return msgspec.json.encode(model_view(log.history, options))


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


async def _recorded(log: SessionLog) -> list[Event]:
    return [r.event for r in await log.store.read("ses_test")]


async def test_9_2_16_a_manual_compaction_records_its_completion_and_a_text_only_summary() -> None:
    log = await _log(_session().events)
    result = await compact(
        log, Fixed(), model=MODEL, config=Config(), clock=_clock(), trigger="manual"
    )
    (completed,) = [e for e in await _recorded(log) if isinstance(e, CompactionCompleted)]
    assert (completed.request_message_id, completed.summary_message_id) == (
        result.request_message_id,
        result.summary_message_id,
    )
    summary = log.history.message(result.summary_message_id or "")
    assert [type(p) for p in summary.parts] == [TextPart]  # 9.2#30: no tool parts
    assert summary.summary and summary.finish == "stop" and summary.agent == COMPACTION_AGENT


async def test_9_2_25_without_autocontinue_the_summary_is_the_last_message() -> None:
    log = await _log(_session().events)
    config = Config(compaction=CompactionConfig(autocontinue=False))
    result = await compact(log, Fixed(), model=MODEL, config=config, clock=_clock())
    assert result.outcome == "completed" and result.resumed_with is None
    assert log.history.messages[-1].id == result.summary_message_id


async def test_9_2_27_an_overflow_with_nothing_to_replay_continues_with_the_media_notice() -> None:
    b = SessionBuilder("ses_test", model=REF)
    b.user("Describe this.", files=(("image/png", "huge.png"),))
    log = await _log(b.events)
    result = await compact(
        log, Fixed(), model=MODEL, config=Config(), clock=_clock(), trigger="overflow"
    )
    (part,) = log.history.message(result.resumed_with or "").parts
    assert isinstance(part, TextPart) and part.text == f"{OVERFLOW_NOTICE}\n\n{CONTINUE_TEXT}"
    assert "previous request exceeded the provider's size limit" in part.text


async def test_9_2_28_29_a_cancel_while_the_summarizer_waits_ends_at_once_and_leaves_no_summary(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """opencode interrupts a compaction during a 10 s retry backoff (or a pending hook) and
    leaves no summary behind: here the cancel rolls it back at once, the summary message is
    withdrawn and the view is what it was."""
    log = await _log(_session().events)
    before = _view_bytes(log)
    started = trio.current_time()
    with trio.move_on_after(1):
        await compact(
            log,
            Fixed(before=partial(trio.sleep, 10)),
            model=MODEL,
            config=Config(),
            clock=_clock(),
        )
    assert trio.current_time() - started < 2
    (rolled,) = [e for e in await _recorded(log) if isinstance(e, CompactionRolledBack)]
    assert rolled.reason == "cancelled"
    summaries = [m for m in log.history.messages if m.summary]
    assert summaries and all(m.excluded for m in summaries)
    assert _view_bytes(log) == before


async def test_mimo_a_subagent_compacts_its_own_slice_and_leaves_the_main_agent_alone() -> None:
    b = _session(turns=2)
    for turn in range(3):
        user = b.user(f"explore {turn}", agent_id="explore")
        reply = b.assistant(user, agent_id="explore")
        b.text(reply, f"found {turn}", agent_id="explore")
        b.finish(reply, agent_id="explore")
    log = await _log(b.events)
    main = ViewOptions(agent_id=MAIN_AGENT)
    before = _view_bytes(log, main)
    summarizer = Fixed()
    result = await compact(
        log, summarizer, model=MODEL, config=Config(), clock=_clock(), agent_id="explore"
    )
    assert result.outcome == "completed"
    assert {m.agent_id for m in summarizer.tasks[0].head} == {"explore"}
    added = [m for m in log.history.messages if m.id >= result.request_message_id]
    assert added and {m.agent_id for m in added} == {"explore"}
    assert _view_bytes(log, main) == before
    explore = view_messages(log.history, ViewOptions(agent_id="explore"))
    assert [m.id for m in explore[:2]] == [result.request_message_id, result.summary_message_id]


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


async def test_a_model_summary_of_only_a_tool_call_rolls_back_as_empty(
    nursery: trio.Nursery,
) -> None:
    """The summary request keeps the session's tool choice (unset) and asks for text only; a
    model that calls a tool anyway has written no summary."""
    server = await Loopback.start(nursery)
    called = {
        "content": [
            {"type": "thinking", "thinking": "I should run the tests first.", "signature": "s"},
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
        ],
        "stop_reason": "tool_use",
    }
    server.script(Reply(200, body(called)))
    log = await _log(_session().events)
    before = _view_bytes(log)
    async with ProviderClient(WIRE_FORMATS["anthropic"](), server.url, api_key="k") as client:
        summarizer = ModelSummarizer(client)
        result = await compact(log, summarizer, model=MODEL, config=Config(), clock=_clock())
    assert result.outcome == "rolled_back" and result.reason == "empty"
    assert _view_bytes(log) == before
    [seen] = server.received
    sent = json.loads(seen.body)
    assert "tool_choice" not in sent
    assert sent["messages"][-1]["content"][-1]["text"].startswith(SUMMARY_OPENING)


async def test_the_fourth_attempt_of_a_turn_is_refused() -> None:
    log = await _log(_session().events)
    for _ in range(3):
        result = await compact(log, Fixed(""), model=MODEL, config=Config(), clock=_clock())
        assert result.reason == "empty"
    summarizer = Fixed()
    result = await compact(log, summarizer, model=MODEL, config=Config(), clock=_clock())
    assert result.outcome == "rolled_back" and result.detail == EXHAUSTED
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
    from contextledger.events._catalogue import PrefixPinned, PrefixProfile
    from contextledger.events._parts import ToolSchema

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
    # No request of the session's was answered: no prompt of its messages is cached, and none
    # a breakpoint on them would write is read again (the next request opens with the summary).
    assert task.sent == 0 and {m.target for m in task.marks} == {"tool", "system"}


async def test_a_later_summary_request_opens_with_the_view_as_sent_the_summary_included() -> None:
    # So a model summarizer reads the whole head from the prompt cache the session's last
    # request wrote, not only the system blocks and tools.
    log = await _log(_session().events)
    summarizer = Fixed()
    await compact(log, summarizer, model=MODEL, config=Config(), clock=_clock())
    later = _later(1_950_000_000_000)
    for turn in range(4):
        user = later.user(f"Step {turn}: edit src/later_{turn}.py")
        assistant = later.assistant(user)
        later.text(assistant, f"Done with later step {turn}.")
        later.finish(assistant)
    await log.append(later.events)
    sent = model_view(log.history, ViewOptions.from_config(Config(), REF))
    await compact(log, summarizer, model=MODEL, config=Config(), clock=_clock(2_000_000_000_000))
    task = summarizer.tasks[-1]
    assert task.messages == tuple(sent[: len(task.messages)])
    assert task.messages[1].content[0].text == SUMMARY  # type: ignore[union-attr]
    assert task.messages[-1].source_id == task.head[-1].id
    # The prompt points to that summary instead of sending it a second time.
    assert task.previous_summary == SUMMARY
    assert "Update the anchored summary above" in task.prompt
    assert "Fix the parser" not in task.prompt


async def test_an_overflow_summary_request_sends_the_view_as_sent_too() -> None:
    b = _session()
    b.user("Now run the whole suite.")
    log = await _log(b.events)
    sent = model_view(log.history, ViewOptions.from_config(Config(), REF))
    summarizer = Fixed()
    await compact(log, summarizer, model=MODEL, config=Config(), clock=_clock(), trigger="overflow")
    (task,) = summarizer.tasks
    assert task.messages and task.messages == tuple(sent[: len(task.messages)])
    assert task.messages[-1].source_id == task.head[-1].id


@pytest.mark.parametrize("limit", [0, 4_000])
async def test_a_large_head_is_summarised_in_chunks_a_few_at_a_time(limit: int) -> None:
    """With a limit of 0 the summarizer reads the compacted model's window."""
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

    summarizer = Fixed(before=pace, max_input_tokens=limit)
    config = Config(compaction=CompactionConfig(chunk_concurrency=2))
    result = await compact(log, summarizer, model=small, config=config, clock=_clock())
    assert result.outcome == "completed"
    chunks, merge = summarizer.tasks[:-1], summarizer.tasks[-1]
    assert len(chunks) >= 2 and all(f"of {len(chunks)} of a longer" in t.prompt for t in chunks)
    assert all(t.max_output_tokens == CHUNK_OUTPUT_TOKENS for t in chunks)
    assert "<partial-summary" in merge.prompt
    assert peak <= 2


async def test_the_chunks_are_asked_for_in_their_order_every_time() -> None:
    """The scheduler runs the chunks' tasks in any order; the summarizer is asked in theirs, so
    a replay's summary calls (and their prices) are the same every time."""
    events = _session(turns=40, output="x" * 6_000).events
    small = Model(
        provider_id="anthropic", model_id="m", limits=ModelLimits(context=16_000, output=2_000)
    )
    config = Config(compaction=CompactionConfig(chunk_concurrency=4))
    for _ in range(8):
        summarizer = Fixed(max_input_tokens=4_000)
        await compact(await _log(events), summarizer, model=small, config=config, clock=_clock())
        parts = [re.search(r"This is part (\d+) of", t.prompt) for t in summarizer.tasks[:-1]]
        numbers = [int(m.group(1)) for m in parts if m is not None]
        assert len(numbers) >= 3
        assert numbers == sorted(numbers)


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
    b = _later(1_950_000_000_000)

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
    tools = [p for m in log.history.messages for p in m.parts if isinstance(p, ToolPart)]
    big = [p for p in tools if p.tool == "bash"][-1]
    assert isinstance(big.state, ToolCompleted) and big.state.compacted_ms is not None
    check_tool_pairs(view)


class _CountingStore(MemoryStore):
    """A store whose appends pass through a checkpoint that can be cancelled at."""

    def __init__(self, hook: Callable[[], None]) -> None:
        super().__init__()
        self.hook = hook

    async def append(
        self,
        stream: str,
        expected: int,
        events: Sequence[Event],
        *,
        expected_position: int | None = None,
    ) -> list[RecordedEvent]:
        self.hook()
        await trio.lowlevel.checkpoint()
        return await super().append(stream, expected, events, expected_position=expected_position)


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


# --- the properties of every compaction, end to end ---------------------------------------------

_SLICES = st.sampled_from([MAIN_AGENT, "explore"])
_TRIGGERS = st.sampled_from(["auto", "manual", "overflow"])
_TAILS = st.builds(
    CompactionConfig,
    tail_turns=st.integers(0, 3),
    preserve_recent_tokens=st.none() | st.integers(0, 3_000),
)
_ALL_VIEWS = (ViewOptions(), ViewOptions(agent_id=MAIN_AGENT), ViewOptions(agent_id="explore"))


def _slice_view(config: Config, agent_id: str) -> ViewOptions:
    """The view a compaction of ``agent_id`` works on: its own slice."""
    return ViewOptions.from_config(config, agent_id=agent_id)


def _texts(history: History, message_id: str | None) -> tuple[str, ...]:
    if message_id is None:
        return ()
    return tuple(p.text for p in history.message(message_id).parts if isinstance(p, TextPart))


@PROPERTY
@given(events=session_events(), trigger=_TRIGGERS, tails=_TAILS, agent_id=_SLICES)
async def test_the_summary_input_and_the_kept_tail_account_for_the_whole_view_before(
    events: list[Event],
    trigger: CompactionTrigger,
    tails: CompactionConfig,
    agent_id: str,
) -> None:
    """Every message of the view before a compaction is summarised (the summarizer's head)
    or kept verbatim after the summary, exactly once and in order, and the newest earlier
    summary is what the new one updates; an overflow's replayed request is the one message
    neither, and it is sent again."""
    log = await _log(events)
    assume(open_request(log.history, agent_id) is None)
    config = Config(compaction=tails)
    options = _slice_view(config, agent_id)
    visible, previous = hide_compactions(view_messages(log.history, options))
    summarizer = Fixed()
    result = await compact(
        log,
        summarizer,
        model=MODEL,
        config=config,
        clock=_clock(),
        trigger=trigger,
        agent_id=agent_id,
    )
    if result.outcome == "rolled_back":
        assert result.detail == EXHAUSTED and summarizer.tasks == []
        return
    (task,) = summarizer.tasks
    assert task.previous_summary == previous
    check_tool_pairs(model_view(log.history, options))
    after = [m.id for m in view_messages(log.history, options)]
    assert after[:2] == [result.request_message_id, result.summary_message_id]
    assert _texts(log.history, result.summary_message_id) == (SUMMARY,)
    kept = [i for i in after[2:] if i < result.request_message_id]
    assert after[2:] == kept + ([result.resumed_with] if result.resumed_with else [])
    head = [m.id for m in task.head]
    replayed = [m for m in visible if m.id not in head and m.id not in kept]
    assert head + kept == [m.id for m in visible if m not in replayed]
    if replayed:
        (replay,) = replayed
        assert trigger == "overflow" and kept == []
        assert _texts(log.history, result.resumed_with) == replay_parts(replay)


#: A turn that never runs out of attempts, so every rollback below has the reason provoked.
UNLIMITED = Config(compaction=CompactionConfig(max_attempts=1_000))


async def _cancelled(log: SessionLog, agent_id: str) -> None:
    with trio.CancelScope() as scope:

        async def cancel() -> None:
            scope.cancel()
            await trio.lowlevel.checkpoint()

        await compact(
            log,
            Fixed(before=cancel),
            model=MODEL,
            config=UNLIMITED,
            clock=_clock(),
            agent_id=agent_id,
        )
    assert scope.cancelled_caught


async def _crashed(log: SessionLog, agent_id: str) -> None:
    with pytest.raises(RuntimeError, match="a bug"):
        await compact(
            log,
            Fixed(error=RuntimeError("a bug")),
            model=MODEL,
            config=UNLIMITED,
            clock=_clock(),
            agent_id=agent_id,
        )


def _failing(summarizer: Fixed) -> Callable[[SessionLog, str], Awaitable[None]]:
    async def run(log: SessionLog, agent_id: str) -> None:
        result = await compact(
            log, summarizer, model=MODEL, config=UNLIMITED, clock=_clock(), agent_id=agent_id
        )
        assert result.outcome == "rolled_back"

    return run


#: Every way a compaction is rolled back: the reason recorded, and how to provoke it.
_ROLLBACKS: dict[str, tuple[RollbackReason, Callable[[SessionLog, str], Awaitable[None]]]] = {
    "empty summary": ("empty", _failing(Fixed(""))),
    "repetitive summary": ("repetitive", _failing(Fixed("The same line again and again.\n" * 40))),
    "summary overflowed": (
        "overflow",
        _failing(
            Fixed(
                error=ContextOverflowError("anthropic", MessageError(name="ContextOverflowError"))
            )
        ),
    ),
    "provider error": (
        "error",
        _failing(Fixed(error=ProviderError("anthropic", MessageError(name="APIError")))),
    ),
    "summarizer crashed": ("error", _crashed),
    "cancelled": ("cancelled", _cancelled),
}


def _view_bytes_of_every_slice(log: SessionLog) -> list[bytes]:
    return [_view_bytes(log, options) for options in _ALL_VIEWS]


@pytest.mark.parametrize("how", sorted(_ROLLBACKS))
@PROPERTY
@given(events=session_events(), agent_id=_SLICES)
async def test_every_rollback_reason_leaves_every_view_byte_identical(
    how: str, events: list[Event], agent_id: str
) -> None:
    log = await _log(events)
    before = _view_bytes_of_every_slice(log)
    reason, provoke = _ROLLBACKS[how]
    await provoke(log, agent_id)
    rolled = [e for e in await _recorded(log) if isinstance(e, CompactionRolledBack)][-1]
    assert rolled.reason == reason
    assert _view_bytes_of_every_slice(log) == before
    assert open_request(log.history, agent_id) is None
    check_history(log.history)


@PROPERTY
@given(events=session_events(), agent_id=_SLICES)
async def test_an_exhausted_turn_rolls_back_every_attempt_leaving_every_view_byte_identical(
    events: list[Event], agent_id: str
) -> None:
    log = await _log(events)
    before = _view_bytes_of_every_slice(log)
    config = Config()
    # The first attempt may complete a request still open from an earlier turn.
    for _ in range(2 * (config.compaction.max_attempts + 1)):
        result = await compact(
            log, Fixed(""), model=MODEL, config=config, clock=_clock(), agent_id=agent_id
        )
        assert result.outcome == "rolled_back"
        assert _view_bytes_of_every_slice(log) == before
        if result.detail == EXHAUSTED:
            assert result.reason == "error"
            return
    pytest.fail("the attempts of a turn were never exhausted")


# --- a second compaction keeps the facts of the first -------------------------------------------

_PATHS = st.sampled_from(["src/app.py", "src/parse_util.py", "tests/test_app.py"])
_COMMANDS = st.sampled_from(["pytest -q", "ruff check src", "make build"])
_TODOS = st.lists(
    st.tuples(
        st.sampled_from(["Fix parse_line", "Write the docs", "Run the suite"]),
        st.sampled_from(["pending", "in_progress", "completed"]),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda todo: todo[0],
)
#: One tool call: (tool, input, output), of the kinds a summary keeps facts of.
_CALLS = st.one_of(
    st.builds(
        lambda path, offset: ("Read", {"file_path": path, "offset": offset, "limit": 20}, "code"),
        _PATHS,
        st.integers(1, 60),
    ),
    st.builds(lambda path: ("Edit", {"file_path": path, "old_string": "a"}, "ok"), _PATHS),
    st.builds(
        lambda command, fails: (
            "Bash",
            {"command": command},
            "Exit code 1\nValueError: bad input in parse_line" if fails else "all good",
        ),
        _COMMANDS,
        st.booleans(),
    ),
    st.builds(
        lambda todos: ("TodoWrite", {"todos": [{"content": t, "status": s} for t, s in todos]}, ""),
        _TODOS,
    ),
)
Call = tuple[str, dict[str, Any], str]
Work = list[tuple[str, list[Call], str]]
#: Turns of work: a request, the calls answering it and the closing text.
_WORK: st.SearchStrategy[Work] = st.lists(
    st.tuples(
        st.sampled_from(["Fix parse_line in src/app.py", "Make the tests pass", "Update docs"]),
        st.lists(_CALLS, max_size=3),
        st.sampled_from(["Done.", "I will use msgspec because it is faster."]),
    ),
    min_size=1,
    max_size=3,
)


def _work(b: SessionBuilder, work: Work) -> list[Event]:
    for request, calls, answer in work:
        reply = b.assistant(b.user(request))
        for tool, tool_input, output in calls:
            b.tool_result(b.tool_call(reply, tool, tool_input), output)
        b.text(reply, answer)
        b.finish(reply)
    return b.events


class _Recording:
    """A summarizer wrapped to keep every task and the answer to it."""

    def __init__(self, inner: Summarizer) -> None:
        self.inner = inner
        self.max_input_tokens = inner.max_input_tokens
        self.calls: list[tuple[SummaryInput, str]] = []

    async def summarize(self, task: SummaryInput) -> str:
        answer = await self.inner.summarize(task)
        self.calls.append((task, answer))
        return answer


#: Facts a newer bullet states anew (so the older bullet may go): the latest request, the
#: last step and the identifiers list, by prefix; a command run again, a file listed again,
#: a file changed again and a todo with a new status, by what they name.
_RESTATED_BY_PREFIX = (LATEST_REQUEST, LAST_STEP, IDENTIFIERS)
_RESTATED_BY_NAME = (
    re.compile(r"(`+) ?\$ (?P<name>.+?) ?\1(?!`)"),
    re.compile(r"`(?P<name>[^`\n]+)`: "),
    re.compile(r"(?:created|written|edited|deleted) `(?P<name>[^`\n]+)`$"),
    re.compile(r"\[[a-z_]+\] (?P<name>.+)$"),
)
_CODE_SPAN = re.compile(r"`([^`]+)`")


def _bullets(summary: str) -> list[str]:
    """The bullets of a summary, continuation lines included, without the ``- ``."""
    bullets: list[str] = []
    for line in summary.split("\n"):
        if line.startswith("- "):
            bullets.append(line[2:])
        elif line.startswith("  ") and bullets:
            bullets[-1] += "\n" + line
    return bullets


def _fact(bullet: str) -> str | None:
    """What a bullet states, when a newer bullet may state it anew (None: it may not)."""
    first = bullet.split("\n", 1)[0]
    for prefix in _RESTATED_BY_PREFIX:
        if first.startswith(prefix):
            return prefix
    for kind, pattern in enumerate(_RESTATED_BY_NAME):
        match = pattern.match(first)
        if match:
            return f"{kind}:{match['name'].strip()}"
    return None


@PROPERTY
@given(
    events=session_events(),
    before=_WORK,
    between=_WORK,
    template=st.sampled_from(["opencode", "continuation"]),
    tail_turns=st.integers(0, 2),
)
async def test_a_second_compaction_keeps_the_facts_of_the_first_summary(
    events: list[Event],
    before: Work,
    between: Work,
    template: TemplateName,
    tail_turns: int,
) -> None:
    """Through the compactor with the extractive summarizer: every bullet of the first
    summary is in the second, unless the second states the same fact anew (a newer request,
    the same file, command or todo); every identifier of the first is still listed."""
    log = await _log([*events, *_work(_later(max(e.time_ms for e in events) + 1_000), before)])
    config = Config(compaction=CompactionConfig(template=template, tail_turns=tail_turns))
    summarizer = _Recording(ExtractiveSummarizer())

    async def compact_at(start_ms: int) -> None:
        result = await compact(
            log, summarizer, model=MODEL, config=config, clock=_clock(start_ms), trigger="manual"
        )
        assert result.outcome == "completed", result

    await compact_at(1_900_000_000_000)
    await log.append(_work(_later(1_950_000_000_000, calls=20_000), between))
    await compact_at(2_000_000_000_000)
    (_, first), (task, second) = summarizer.calls
    assert first.strip() in (task.previous_summary or "")
    restated = {_fact(b) for b in _bullets(second)} - {None}
    for bullet in _bullets(first):
        if bullet.startswith(IDENTIFIERS):
            (listed,) = [b for b in _bullets(second) if b.startswith(IDENTIFIERS)]
            assert set(_CODE_SPAN.findall(bullet)) <= set(_CODE_SPAN.findall(listed))
        elif bullet not in _bullets(second):
            assert _fact(bullet) in restated, bullet


# --- secrets in a failure's text --------------------------------------------------------------

KEY = "sk-ant-api03-SECRETSECRET123"


async def _rolled_back_detail(log: SessionLog) -> str:
    (rolled,) = [
        r.event
        for r in await log.store.read("ses_test")
        if isinstance(r.event, CompactionRolledBack)
    ]
    return rolled.detail


async def test_a_provider_errors_detail_is_stored_with_its_secrets_masked() -> None:
    log = await _log(_session().events)
    error = ProviderError("anthropic", MessageError(name="AuthError"), detail=f"x-api-key: {KEY}")
    result = await compact(log, Fixed(error=error), model=MODEL, config=Config(), clock=_clock())
    detail = await _rolled_back_detail(log)
    assert detail == "x-api-key: [redacted]"
    assert result.detail == detail


async def test_an_unexpected_errors_text_is_stored_with_its_secrets_masked() -> None:
    log = await _log(_session().events)
    error = RuntimeError(f"summarizer crashed: Authorization: Bearer {KEY}")
    with pytest.raises(RuntimeError):
        await compact(log, Fixed(error=error), model=MODEL, config=Config(), clock=_clock())
    detail = await _rolled_back_detail(log)
    assert detail == "RuntimeError('summarizer crashed: Authorization: Bearer [redacted]')"
