"""``simulate_trace`` and ``simulate_paths``: strategies priced on a replayed trace."""

from __future__ import annotations

import json
from itertools import count
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given, settings

from contextledger.cachesim._blocks import Block, SimRequest
from contextledger.events._catalogue import (
    AssistantFinished,
    CompactionCompleted,
    CompactionProjection,
    CompactionRequested,
    EnvironmentCaptured,
    Event,
    MemoryPinned,
    MessageAdded,
    PartAdded,
    RecordedEvent,
    SessionStarted,
)
from contextledger.events._ids import format_id
from contextledger.events._parts import ModelRef, TextPart
from contextledger.history._projection import History
from contextledger.history._validation import validate_events
from contextledger.history._view import model_view
from contextledger.importers._detect import import_trace
from contextledger.ledger import SessionLog
from contextledger.providers._anthropic import AnthropicMessages
from contextledger.simulation import (
    DEFAULT_STRATEGIES,
    MANAGEMENT_EVENTS,
    LocalSession,
    Provider,
    raw_events,
    simulate_paths,
    simulate_trace,
    sized_model,
    strategy_steps,
)
from contextledger.simulation._synthetic import synthetic_session
from contextledger.simulation._trace import interned
from contextledger.simulation._viewdiff import turn_views
from contextledger.store._memory import MemoryStore
from contextledger.strategies import StrategyError, strategy
from contextledger.testing import check_history, check_tool_pairs
from contextledger.testing._strategies import session_events

EVENTS = synthetic_session("ses_sim", seed=7, turns=2)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_baseline_costs_at_least_the_lower_bound(provider: Provider) -> None:
    """The bound compared with the billed input cost is the input side only."""
    result = simulate_trace(EVENTS, strategy_name="baseline", provider_family=provider)
    assert result.calls > 10
    assert result.billed_input_cost >= result.lower_bound > 0
    assert result.cost_vs_lower_bound is not None and result.cost_vs_lower_bound >= 1
    assert result.peak_prompt == max(result.prompt_tokens)
    assert len(result.uncached) == len(result.cache_write) == len(result.cache_read)
    for total, parts in zip(
        result.prompt_tokens,
        zip(result.uncached, result.cache_write, result.cache_read, strict=True),
        strict=True,
    ):
        assert sum(parts) == total


def test_a_strategy_changes_the_prompt_sizes() -> None:
    baseline = simulate_trace(EVENTS, strategy_name="baseline")
    truncated = simulate_trace(EVENTS, strategy_name="truncate-500")
    assert truncated.calls == baseline.calls
    assert truncated.peak_prompt < baseline.peak_prompt
    assert sum(truncated.prompt_tokens) < sum(baseline.prompt_tokens)


def test_compaction_shrinks_the_prompt() -> None:
    baseline = simulate_trace(EVENTS, strategy_name="baseline")
    compacted = simulate_trace(EVENTS, strategy_name="compact-at-20000")
    assert compacted.peak_prompt < baseline.peak_prompt


@pytest.mark.parametrize(
    ("provider", "model"), [("anthropic", "claude-sonnet-4-20250514"), ("openai", "gpt-5")]
)
def test_the_figures_are_deterministic(provider: Provider, model: str) -> None:
    runs = [
        simulate_trace(EVENTS, strategy_name="age-truncate-500-keep-3", provider_family=provider)
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    assert runs[0].model == model


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(StrategyError):
        simulate_trace(EVENTS, strategy_name="no-such-strategy")
    with pytest.raises(ValueError, match="window"):
        simulate_trace(EVENTS, strategy_name="baseline", window=0)


def test_the_default_strategies_are_pis_four_kilos_mimos_and_ours() -> None:
    for name in DEFAULT_STRATEGIES:
        assert strategy(name).name == name
    assert DEFAULT_STRATEGIES[:4] == (
        "baseline",
        "truncate-500",
        "age-truncate-500-keep-3",
        "compact-at-12000-structured",
    )
    assert DEFAULT_STRATEGIES[-1] == "default"


def test_simulate_paths_names_each_session_by_folder_and_file(tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    chat = [
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "content": "Hi."},
    ]
    (folder / "chat.json").write_text(json.dumps(chat))
    results = simulate_paths([folder], ["baseline"], ["anthropic", "openai"])
    assert list(results) == ["traces/chat.json"]
    assert set(results["traces/chat.json"]["baseline"]) == {"anthropic", "openai"}
    assert results["traces/chat.json"]["baseline"]["openai"].calls == 1


async def test_replayed_usage_is_the_prompt_the_strategy_sent() -> None:
    """The overflow and pressure rules read each answer's usage: under a strategy it must be
    the prompt that strategy sent, not the recorded run's."""
    sent: list[int] = []
    async for step in strategy_steps(EVENTS, strategy("truncate-500"), window=200_000):
        answers = [m for m in step.history.messages if m.role == "assistant" and not m.summary]
        assert len(answers) == len(sent)  # every call before this one, answered
        for message, prompt in zip(answers, sent, strict=True):
            assert message.usage is not None and message.usage.prompt == prompt
            assert message.usage.cache_read == message.usage.cache_write == 0
        sent.append(step.sim.prompt_tokens)
    assert len(sent) > 10


CLAUDE_CODE = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "claude-code-jsonl"
#: A long Claude Code trace (90 calls) where the margin over truncate-500 is among the smallest.
LONG_TRACE = "vsla_d7d349f9-c243-46e2-9a32-4a0eddfc634b.jsonl"


@pytest.mark.parametrize("window", [200_000, 32_000])
def test_on_a_long_claude_code_trace_the_default_costs_no_more_than_baseline(window: int) -> None:
    """With every summary priced as a model call, within the window, on a tuning trace."""
    path = CLAUDE_CODE / LONG_TRACE
    if not path.exists():
        pytest.skip(f"the shared traces are not here ({CLAUDE_CODE}); they come with CI")
    events = import_trace(path)[0].events
    ours, baseline = (
        simulate_trace(events, strategy_name=name, window=window, summarizer="model")
        for name in ("default", "baseline")
    )
    assert ours.calls == baseline.calls == 90
    assert ours.failed_at is None and ours.over_window_calls == 0
    assert ours.summary_calls == ours.compactions > 0 and ours.summary_cost > 0
    assert ours.cost <= baseline.cost
    assert ours.retention is not None and baseline.retention is not None


async def test_raw_events_leave_out_what_a_runtime_did_to_the_conversation() -> None:
    log = await SessionLog.open(MemoryStore(), "ses_sim")
    await log.append(EVENTS)
    ticks = count(EVENTS[-1].time_ms + 1_000)
    local = LocalSession(
        log,
        strategy("compact-at-1000"),
        model=sized_model("anthropic", "claude-sonnet-4-5", 200_000),
        wire=AnthropicMessages(),
        clock=lambda: next(ticks),
    )
    result = await local.compact(trigger="auto")
    assert result.outcome == "completed"
    assert result.resumed_with is not None  # a synthetic continue message
    recorded = [r.event for r in await log.store.read("ses_sim")]
    assert len(recorded) > len(EVENTS)
    assert raw_events(recorded) == list(EVENTS)
    compacted = await turn_views(recorded, "baseline", 5)
    assert compacted.after == (await turn_views(EVENTS, "baseline", 5)).after
    # Another event landing between the compaction and its "continue" message changes nothing.
    resume = next(
        i
        for i, e in enumerate(recorded)
        if isinstance(e, MessageAdded) and e.message_id == result.resumed_with
    )
    pinned = MemoryPinned(session_id="ses_sim", time_ms=recorded[resume].time_ms, text="notes")
    interleaved = [*recorded[:resume], pinned, *recorded[resume:]]
    assert raw_events(interleaved) == [*EVENTS, pinned]


@given(events=session_events())
@settings(max_examples=80, deadline=None)
def test_raw_events_are_a_valid_conversation_without_management(events: list[Event]) -> None:
    raw = raw_events(events)
    assert not any(isinstance(e, MANAGEMENT_EVENTS) for e in raw)
    assert raw_events(raw) == raw
    history = History(events[0].session_id)
    validate_events(history.index, raw)
    history.apply_all(RecordedEvent(history.session_id, i, i, e) for i, e in enumerate(raw, 1))
    check_history(history)
    assert not history.state.compactions
    assert not any(m.summary for m in history.messages)
    check_tool_pairs(model_view(history))
    kept = {e.message_id for e in raw if isinstance(e, MessageAdded)}
    people = {
        e.message_id
        for e in events
        if isinstance(e, MessageAdded) and not e.synthetic and not e.summary
    }
    assert people <= kept  # every message a person or the model wrote stays


def test_raw_events_leave_out_the_environment_of_a_message_resuming_after_a_compaction() -> None:
    # Found by the test above: the message that resumed after a compaction went, the
    # environment captured for it stayed and named a message no longer there.
    stamp = {"session_id": "ses_env", "time_ms": 1_000}
    ref = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4")
    ids = {name: format_id("msg", 1_000, n) for n, name in enumerate(("ask", "req", "sum", "up"))}

    def message(name: str, role: Literal["user", "assistant"], **extra: Any) -> list[Event]:
        id_ = ids[name]
        part = TextPart(id=format_id("prt", 1_000, len(name)), message_id=id_, text=name)
        added = MessageAdded(message_id=id_, role=role, model=ref, **extra, **stamp)
        return [added, PartAdded(part=part, **stamp)]

    request, summary = ids["req"], ids["sum"]
    events: list[Event] = [
        SessionStarted(model=ref, **stamp),
        *message("ask", "user"),
        CompactionRequested(
            message_id=request,
            part_id=format_id("prt", 1_000, 9),
            auto=True,
            parent_id=ids["ask"],
            **stamp,
        ),
        *message("sum", "assistant", parent_id=request, summary=True),
        AssistantFinished(message_id=summary, finish="stop", **stamp),
        CompactionCompleted(
            request_message_id=request,
            summary_message_id=summary,
            tail_start_id=None,
            projection=CompactionProjection(summary="sum"),
            **stamp,
        ),
        *message("up", "user", synthetic=True),
        EnvironmentCaptured(user_message_id=ids["up"], text="", **stamp),
    ]
    raw = raw_events(events)
    assert raw == events[:3]
    validate_events(History("ses_env").index, raw)


def test_a_strategy_that_cannot_get_under_the_window_fails_at_that_call() -> None:
    # Kilo's window at 32k: 32,000 - 8,000 output - 20,000 reserved leaves 4,000 usable
    # tokens, which no compaction of this session reaches.
    events = synthetic_session("ses_sim", seed=7, turns=8)
    result = simulate_trace(events, strategy_name="opencode", window=32_000)
    assert result.failed_at is not None
    assert result.calls == result.failed_at - 1
    assert result.summary()["failed_at"] == result.failed_at
    assert simulate_trace(events, strategy_name="default", window=32_000).failed_at is None


def test_interned_requests_share_equal_blocks_and_keep_their_figures() -> None:
    first = SimRequest(blocks=(Block(key="a", tokens=10), Block(key="b", tokens=5)), at=1.0)
    second = SimRequest(blocks=(Block(key="a", tokens=10), Block(key="c", tokens=7)), at=2.0)
    known: dict[Block, Block] = {}
    one, two = interned(first, known), interned(second, known)
    assert one == first and two == second
    assert two.blocks[0] is one.blocks[0] and len(known) == 3
