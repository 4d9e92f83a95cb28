"""The runtime and the simulation decide alike: a recorded Claude Code session replayed through
a ``Runtime`` (actors, store, the model's answers taken from the trace) and through the
simulation's ``LocalSession`` under the ``default`` strategy compacts and prunes at the same
calls, sends the same requests, costs the same and ends with the same history; and what
``simulate_trace`` publishes for ``default`` (its summaries written once per head, its blocks
interned) is the runtime's figures."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from contextledger.actors import Runtime
from contextledger.config import Config
from contextledger.events._catalogue import Event
from contextledger.importers._detect import import_trace
from contextledger.simulation import (
    ReplayClock,
    ReplayedCall,
    TurnReplay,
    priced_model,
    raw_events,
    recorded_turns,
    request_inputs,
    simulate_trace_async,
    sized_model,
    strategy_steps,
    trace_result,
)
from contextledger.store._memory import MemoryStore
from contextledger.strategies import strategy

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "claude-code-jsonl"
PATHS = sorted(TRACES.glob("*.jsonl")) if TRACES.is_dir() else []


async def _through_runtime(events: list[Event], model_id: str, window: int) -> list[ReplayedCall]:
    clock = ReplayClock(events[0].time_ms)
    config = strategy("default").configure(Config())
    model = sized_model("anthropic", model_id, window)
    calls: list[ReplayedCall] = []
    async with Runtime.open(MemoryStore(), model=model, config=config, clock=clock) as runtime:
        session = await runtime.session(events[0].session_id)
        inputs = request_inputs(events, "anthropic", model_id)
        replay = TurnReplay(session, recorded_turns(events), inputs, clock, context=window)
        async for call in replay.calls():
            calls.append(call)
    return calls


async def _through_simulation(
    events: list[Event], model_id: str, window: int
) -> list[ReplayedCall]:
    chosen = strategy("default")
    steps = strategy_steps(events, chosen, model_id=model_id, window=window)
    return [call async for call in steps]


@pytest.mark.skipif(not PATHS, reason=f"the shared traces are not here ({TRACES})")
@pytest.mark.parametrize("window", [200_000, 32_000])
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name[:13])
async def test_the_runtime_decides_and_costs_what_the_simulation_does(
    path: Path, window: int
) -> None:
    events = raw_events(import_trace(path)[0].events)
    model_id = priced_model("anthropic", events)
    runtime = await _through_runtime(events, model_id, window)
    simulated = await _through_simulation(events, model_id, window)

    assert len(runtime) == len(simulated) > 0
    for ours, theirs in zip(runtime, simulated, strict=True):
        assert (ours.call, ours.compactions, ours.pruned) == (
            theirs.call,
            theirs.compactions,
            theirs.pruned,
        )
        assert ours.built.encoded.body == theirs.built.encoded.body, f"call {ours.call}"
        assert ours.sim == theirs.sim
    costs = [
        trace_result("x", "anthropic", model_id, [c.sim for c in calls], [c.actions for c in calls])
        for calls in (runtime, simulated)
    ]
    assert round(costs[0].billed_input_cost, 2) == round(costs[1].billed_input_cost, 2)
    assert costs[0] == costs[1]
    published = await simulate_trace_async(events, strategy_name="default", window=window)
    compactions = sum(c.compactions.count("compacted") for c in runtime)
    assert published.failed_at is None and published.over_window_calls == 0
    facts = ("facts_needed", "facts_retained", "facts_needed_older", "facts_retained_older")
    assert msgspec.structs.replace(published, **dict.fromkeys(facts, 0)) == (
        msgspec.structs.replace(costs[0], strategy="default", compactions=compactions)
    )
    assert runtime[-1].history == simulated[-1].history
    # The replay did decide something, so the comparison covers the decisions.
    assert any(c.compactions or c.pruned for c in runtime) or len(runtime) < 20
