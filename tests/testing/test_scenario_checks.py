"""The scenario checks catch what they look for: ``replay_bodies`` a request body the log does
not rebuild, ``ScenarioRun`` a request over the window, an unanswered overflow and a call
crossing from one loop into another; ``lower_bound_read_share`` the shared prefixes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio

from contextledger.cachesim import blocks_from_anthropic_body
from contextledger.events import RecordedEvent, RequestSent
from contextledger.store import MemoryStore
from contextledger.testing import (
    AgentOutcome,
    Overflow,
    Scenario,
    ScenarioRun,
    lower_bound_read_share,
    replay_bodies,
    run_scenario,
)
from contextledger.testing._agentloop import loop_inputs
from contextledger.testing.loopback import Exchange

SCENARIO = Scenario(sessions=1, steps=3, fault_rate=0.0, seed=3)
Recorded = tuple[ScenarioRun, list[RecordedEvent]]


@pytest.fixture(scope="module")
def recorded() -> Recorded:
    async def main() -> Recorded:
        store = MemoryStore()
        run = await run_scenario(SCENARIO, store)
        return run, await store.read(run.agents[0].session_id)

    return trio.run(main)


def _replays(events: list[RecordedEvent], max_output_tokens: int | None = None) -> list[bool]:
    inputs = msgspec.structs.replace(
        loop_inputs("ses_loop_000", "main"), max_output_tokens=max_output_tokens
    )
    replays = replay_bodies(
        events, config=SCENARIO.config, model=SCENARIO.model, inputs={"main": inputs}
    )
    return [r.recorded == r.replayed for r in replays]


def test_a_clean_run_replays_every_body(recorded: Recorded) -> None:
    run, events = recorded
    assert len(run.replays) == 4  # three steps and the final answer
    assert run.replay_mismatches == [] and run.unrecorded_bodies == []
    assert run.failed == [] and run.over_window == [] and run.crossed_calls == []
    assert _replays(events) == [True] * 4


def test_a_recorded_hash_that_differs_is_a_mismatch(recorded: Recorded) -> None:
    _, events = recorded
    second = [r.seq for r in events if isinstance(r.event, RequestSent)][1]
    tampered = [
        msgspec.structs.replace(r, event=msgspec.structs.replace(r.event, body_hash="0" * 64))
        if r.seq == second
        else r
        for r in events
    ]
    assert _replays(tampered) == [True, False, True, True]


def test_other_inputs_rebuild_other_bodies(recorded: Recorded) -> None:
    _, events = recorded
    assert _replays(events, max_output_tokens=1_000) == [False] * 4


def _exchange(
    index: int,
    conversation: str,
    status: int,
    response: Any,
    *,
    json: Any = None,
    fault: str | None = None,
) -> Exchange:
    return Exchange(
        index=index,
        at=0.0,
        method="POST",
        path="/v1/messages",
        headers={},
        body=msgspec.json.encode(json or {}),
        conversation=conversation,
        status=status,
        response=response,
        fault=fault,
    )


def _run(exchanges: list[Exchange], agents: list[AgentOutcome] | None = None) -> ScenarioRun:
    return ScenarioRun(
        scenario=SCENARIO,
        agents=agents or [],
        exchanges=exchanges,
        replays=[],
        lags=[],
        compactions=[],
        interrupted=[],
        cpu_seconds=1.0,
        server_cpu_seconds=0.0,
        cancelled=False,
    )


def _error(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def test_a_request_refused_as_too_long_is_over_the_window_unless_a_fault_said_so() -> None:
    too_long = _error("prompt is too long: 32044 tokens > 32000 maximum")
    run = _run(
        [
            _exchange(1, "s", 400, too_long),
            _exchange(2, "s", 400, too_long, fault="overflow"),
            _exchange(3, "s", 400, _error("messages: first message must use the user role")),
        ]
    )
    assert [e.index for e in run.over_window] == [1]
    assert [e.index for e in run.refused] == [3]


def test_an_overflow_needs_one_completed_compaction_then_an_accepted_request() -> None:
    good = Overflow(seq=5, outcome="completed", accepted_seq=9, compactions=1)
    bad = [
        msgspec.structs.replace(good, compactions=2),
        msgspec.structs.replace(good, accepted_seq=None),
        msgspec.structs.replace(good, outcome="rolled_back"),
    ]
    agents = [
        AgentOutcome(session_id="s", agent_id="main", conversation="s", overflows=[overflow])
        for overflow in [good, *bad]
    ]
    assert [o for _, _, o in _run([], agents).bad_overflows] == bad


def test_a_call_issued_to_another_loop_is_crossed() -> None:
    calls = [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}]
    carrying = {"messages": [{"role": "assistant", "content": calls}]}
    run = _run(
        [
            _exchange(1, "s/explore", 200, {"content": calls}),
            _exchange(2, "s/explore", 200, {"content": []}, json=carrying),
            _exchange(3, "s", 200, {"content": []}, json=carrying),
        ]
    )
    assert run.crossed_calls == [(3, "toolu_1")]


def test_the_lower_bound_reads_every_prefix_shared_with_an_earlier_body() -> None:
    first = {"system": "s" * 400, "messages": [{"role": "user", "content": "a" * 400}]}
    second = {**first, "messages": [*first["messages"], {"role": "user", "content": "b" * 400}]}
    assert lower_bound_read_share([first]) == 0.0
    assert lower_bound_read_share([first, first]) == 0.5
    # Three blocks of about the same size: the second body reads the first's two of its three.
    assert lower_bound_read_share([first, second]) == pytest.approx(2 / 5, abs=0.01)


def test_the_lower_bound_reads_no_prefix_past_the_thinking_a_model_drops() -> None:
    # A later user text drops the earlier turns' thinking on Sonnet 4.5, not on Opus 4.5.
    def answer(text: str) -> dict[str, Any]:
        thinking = {"type": "thinking", "thinking": text * 800, "signature": "sig"}
        return {"role": "assistant", "content": [thinking, {"type": "text", "text": text}]}

    def bodies(model: str) -> list[dict[str, Any]]:
        turns: list[dict[str, Any]] = [{"role": "user", "content": "a" * 400}]
        made = [{"model": model, "system": "s" * 400, "messages": list(turns)}]
        for text in "bc":
            turns += [answer(text), {"role": "user", "content": text * 400}]
            made.append({"model": model, "system": "s" * 400, "messages": list(turns)})
        return made

    dropping, keeping = bodies("claude-sonnet-4-5"), bodies("claude-opus-4-5")
    # Blocks: system, a | system, a, thinking b, text b, user b | ... thinking c, text c, user c
    sizes = [b.tokens for b in blocks_from_anthropic_body(keeping[-1])]
    system_a, b_turn, c_turn = sum(sizes[:2]), sizes[2:5], sizes[5:8]
    # Sonnet 4.5 reads none of the earlier thinking: body 2 is sent without thinking b and
    # body 3 without either, so body 3 reads body 2 whole, and no body counts what it drops.
    sent = [system_a, system_a + sum(b_turn[1:]), system_a + sum(b_turn[1:]) + sum(c_turn[1:])]
    read = system_a + sent[1]
    assert lower_bound_read_share(dropping) == pytest.approx(read / sum(sent))
    # Opus 4.5 keeps it: body 2 is read whole by body 3, thinking included.
    sent = [system_a, system_a + sum(b_turn), system_a + sum(b_turn) + sum(c_turn)]
    assert lower_bound_read_share(keeping) == pytest.approx((system_a + sent[1]) / sum(sent))


def test_the_lag_in_compactions_is_of_ticks_overlapping_one_and_its_own_part_less_cpu_waits() -> (
    None
):
    run = msgspec.structs.replace(
        _run([]),
        compactions=[(1_000, 1_100)],
        # (wake-up time, lag, time the loop's thread waited for a CPU), all in ms.
        lags=[(1_050.0, 30.0, 25.0), (1_120.0, 40.0, 0.0), (2_000.0, 90.0, 0.0)],
    )
    # The second tick waited from 1,080: it overlaps the compaction; the third does not.
    assert run.loop_lag_p99_ms == 40.0
    assert run.loop_lag_p99_own_ms == 40.0
    assert run.loop_lag_p99_outside_compactions_ms == 90.0
    only_waited = msgspec.structs.replace(run, lags=[(1_050.0, 30.0, 25.0)])
    assert only_waited.loop_lag_p99_ms == 30.0
    assert only_waited.loop_lag_p99_own_ms == 5.0
