"""Strategies over small sessions: a ``LocalSession`` prunes after the turn and compacts
before the next request when the strategy says so, as the runtime does."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from contextledger.config import Config, PruneConfig
from contextledger.events import Event
from contextledger.events._catalogue import (
    CompactionCompleted,
    PrefixAdvanced,
    PrefixPinned,
    PrefixRotated,
    RequestSent,
    ToolOutputCleared,
    ToolOutputTrimmed,
)
from contextledger.events._parts import ModelRef, Usage
from contextledger.history._view import COMPACTION_PROMPT, model_view
from contextledger.ledger import SessionLog
from contextledger.policy._overflow import usable
from contextledger.providers._anthropic import AnthropicMessages
from contextledger.request._builder import RequestInputs
from contextledger.request._system import SystemSegments
from contextledger.simulation import LocalSession
from contextledger.strategies import (
    CompactAt,
    CompactOnce,
    DefaultStrategy,
    MimoTiers,
    OpencodeDefault,
    Strategy,
    estimate_view_tokens,
    strategy,
    strategy_view,
)
from contextledger.testing import check_history, check_tool_pairs
from contextledger.vocabulary._defaults import BATCH_TRIM_KEEP_CHARS
from contextledger.vocabulary._models import Model, ModelLimits
from tests.strategies._sessions import MODEL, clock, log_of, results, session

#: Prune settings that make the few small outputs of a test session candidates.
EAGER = PruneConfig(protect_tokens=0, minimum_tokens=0)


INPUTS = RequestInputs(
    model=ModelRef(provider_id=MODEL.provider_id, model_id=MODEL.model_id),
    segments=SystemSegments(prompt="You are a coding agent.", environment="<env>\n</env>"),
)


#: What building a request records: not a strategy's doing.
REQUEST_RECORDS = (PrefixPinned, PrefixRotated, PrefixAdvanced, RequestSent)


async def _new_events(log: SessionLog, before: int) -> list[Event]:
    events = [r.event for r in await log.store.read("ses_test", before + 1)]
    return [e for e in events if not isinstance(e, REQUEST_RECORDS)]


def _local(
    log: SessionLog, strat: Strategy, config: Config, model: Model = MODEL, now: int | None = None
) -> LocalSession:
    return LocalSession(
        log,
        strat,
        model=model,
        wire=AnthropicMessages(),
        clock=clock() if now is None else (lambda: now),
        config=config,
    )


async def _turn(local: LocalSession) -> None:
    """What follows a turn: the after-turn prune, then the next request (compacting first
    when the strategy says so)."""
    await local.prune(force=False)
    await local.build_request(INPUTS)


async def _run(
    strat: Strategy, events: Sequence[Event], config: Config, model: Model = MODEL
) -> tuple[SessionLog, list[Event]]:
    log = await log_of(events)
    before = log.history.seq
    await _turn(_local(log, strat, config, model))
    check_history(log.history)
    check_tool_pairs(model_view(log.history))
    return log, await _new_events(log, before)


def _completed(log: SessionLog) -> int:
    return sum(c.status == "completed" for c in log.history.state.compactions.values())


def _kinds(events: Sequence[Event]) -> set[type]:
    return {type(e) for e in events}


async def test_compact_at_waits_until_the_estimate_passes_n() -> None:
    b = session(4, output=lambda turn, tool: "z" * 400)
    log = await log_of(b.events)
    tokens = estimate_view_tokens(model_view(log.history))
    _, events = await _run(CompactAt(tokens), b.events, Config())
    assert events == []
    log, events = await _run(CompactAt(tokens - 1), b.events, Config())
    assert CompactionCompleted in _kinds(events)
    assert model_view(log.history)[0].content[0].text == COMPACTION_PROMPT  # type: ignore[union-attr]
    assert estimate_view_tokens(model_view(log.history)) < tokens


async def test_compact_at_compacts_again_only_when_passed_again() -> None:
    b = session(4, output=lambda turn, tool: "z" * 400)
    log = await log_of(b.events)
    at = _local(log, CompactAt(estimate_view_tokens(model_view(log.history)) - 1), Config())
    await _turn(at)
    assert _completed(log) == 1
    await _turn(at)
    assert _completed(log) == 1
    check_history(log.history)


async def test_compact_at_structured_compacts_once_past_n_characters() -> None:
    b = session(4, output=lambda turn, tool: "z" * 400)
    log = await log_of(b.events)
    chars = len(msgspec.json.encode(model_view(log.history)))
    _, events = await _run(CompactOnce(chars), b.events, Config())
    assert events == []
    once = CompactOnce(chars - 1)
    assert once.name == f"compact-at-{chars - 1}-structured"
    await _turn(_local(log, once, Config()))
    assert _completed(log) == 1
    (summary,) = [m for m in log.history.messages if m.summary]
    assert "## Task Overview" in summary.parts[-1].text  # type: ignore[union-attr]
    await _turn(_local(log, CompactOnce(1), Config()))  # far past any threshold ...
    assert _completed(log) == 1  # ... but the summary is frozen
    check_history(log.history)


async def test_default_compacts_early_once_reads_cost_more_than_compacting() -> None:
    big = session(12, output=lambda turn, tool: "z" * 40_000)
    log, events = await _run(DefaultStrategy(), big.events, Config())
    assert CompactionCompleted in _kinds(events)  # no usage reported: not an overflow
    assert estimate_view_tokens(model_view(log.history)) < 20_000
    _, events = await _run(OpencodeDefault(), big.events, Config())
    assert events == []  # the window-only cadence waits for the window


def _overflowing(turn: int, at: int) -> Usage:
    return Usage(input=at) if turn == 3 else Usage(input=10)


async def test_opencode_compacts_at_the_usable_window_only() -> None:
    opencode = OpencodeDefault()
    limit = usable(MODEL, opencode.configure(Config()))
    assert limit == 200_000 - 32_000 - 20_000  # Kilo: context - output - reserved
    below = session(4, usage=lambda turn: _overflowing(turn, limit - 1))
    _, events = await _run(opencode, below.events, Config())
    assert events == []  # Kilo's after-turn prune is opt-in
    at = session(4, usage=lambda turn: _overflowing(turn, limit))
    log, events = await _run(opencode, at.events, Config())
    assert CompactionCompleted in _kinds(events)
    _, again = await _run(opencode, [r.event for r in await log.store.read("ses_test")], Config())
    assert again == []  # the usage predates the compaction


async def test_opencode_runs_the_opt_in_prune() -> None:
    config = Config(prune=PruneConfig(enabled=True, protect_tokens=0, minimum_tokens=0))
    _, events = await _run(OpencodeDefault(), session(4).events, config)
    (cleared,) = events
    assert isinstance(cleared, ToolOutputCleared) and cleared.reason == "normal"


async def test_mimo_tiers_trim_at_level_1_and_clear_at_level_2() -> None:
    mimo = MimoTiers()
    limit = usable(MODEL, mimo.configure(Config()))
    config = Config(prune=EAGER)
    big = session(4, output=lambda turn, tool: "q" * 6_000, usage=lambda t: Usage())
    _, events = await _run(mimo, big.events, config)
    assert events == []  # no pressure
    level1 = session(4, output=lambda t, tool: "q" * 6_000, usage=lambda t: Usage(input=limit // 2))
    _, events = await _run(mimo, level1.events, config)
    assert events and all(isinstance(e, ToolOutputTrimmed) for e in events)
    level2 = session(
        4, output=lambda t, tool: "q" * 6_000, usage=lambda t: Usage(input=limit * 3 // 4)
    )
    log, events = await _run(mimo, level2.events, config)
    cleared = [e for e in events if isinstance(e, ToolOutputCleared)]
    assert [e.reason for e in cleared] == ["pressure"]
    assert (
        sum(
            r.output == "[Old tool result content cleared]"
            for r in results(model_view(log.history))
        )
        == 2
    )


async def test_mimo_tiers_compact_at_the_trigger() -> None:
    mimo = MimoTiers()
    limit = usable(MODEL, mimo.configure(Config()))
    assert limit == 180_000  # 0.9 of the window
    b = session(4, usage=lambda turn: _overflowing(turn, limit))
    log, events = await _run(mimo, b.events, Config())
    assert CompactionCompleted in _kinds(events)
    summary = [m for m in log.history.messages if m.summary]
    assert summary


async def test_default_trims_old_outputs_when_it_pays_and_compacts_at_the_window() -> None:
    ours = DefaultStrategy()
    config = Config(prune=EAGER)
    big = session(4, output=lambda turn, tool: "q" * 6_000)
    _, events = await _run(ours, big.events, config)
    keep = BATCH_TRIM_KEEP_CHARS
    assert events  # cold cache: any saving pays, and one batch trims every old output
    assert all(
        isinstance(e, ToolOutputTrimmed) and (e.head_chars, e.tail_chars) == (keep, keep)
        for e in events
    )
    limit = usable(MODEL, ours.configure(config))
    _, events = await _run(ours, session(4, usage=lambda t: _overflowing(t, limit)).events, config)
    assert CompactionCompleted in _kinds(events)


async def test_default_keeps_a_warm_cache_when_trimming_does_not_pay() -> None:
    log = await log_of(session(4, output=lambda turn, tool: "q" * 6_000).events)
    before = log.history.seq
    last = log.history.messages[-1].created_ms
    once = msgspec.structs.replace(EAGER, expected_turns=1)  # the rewrite never pays back
    local = _local(log, DefaultStrategy(), Config(prune=once), now=int(last) + 1000)
    assert await local.prune(force=False) == []
    assert await _new_events(log, before) == []
    local = _local(log, DefaultStrategy(), Config(prune=once), now=int(last) + 3_600_000)
    assert await local.prune(force=False) != []  # a cold cache is written again anyway


async def test_view_strategies_append_nothing_and_shape_the_view() -> None:
    b = session(4, tools=("bash", "read"))
    log, events = await _run(strategy("per-tool-keep-last-1"), b.events, Config())
    assert events == []
    view = strategy_view(
        strategy("per-tool-keep-last-1"), log.history, model=MODEL, config=Config()
    )
    assert [r.output for r in results(view)][-2:] == ["bash output 3", "read output 3"]
    assert len(strategy_view(strategy("last-3"), log.history, model=MODEL, config=Config())) == 3


async def test_a_small_window_model_keeps_a_proportional_trigger() -> None:
    small = Model(provider_id="x", model_id="y", limits=ModelLimits(context=8_000, output=8_000))
    assert usable(small, DefaultStrategy().configure(Config())) > 0
