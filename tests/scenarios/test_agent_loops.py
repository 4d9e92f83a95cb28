"""Agent loops through the runtime against the loopback provider: concurrent sessions of
long tool loops with 0.2-50 KB outputs on a 32k window, child sessions and agent slices,
faults, and a runtime cancelled at a random point (or in the middle of a compaction) then
reopened and resumed; on trio and on asyncio, with the extractive and the model summarizer,
on the Anthropic Messages and the OpenAI Chat Completions wire.

Each scenario runs once (cached for the module) into an SQLite file; each test is one check
of every run. ``CONTEXTLEDGER_SCENARIOS=full`` runs them at the agentloop benchmark's full
size (20 sessions x 32 steps) instead of the small default that keeps ``make test`` quick.
"""

from __future__ import annotations

import json
import os
import random
from functools import cache
from pathlib import Path

import pytest
import trio

from contextledger.cli._main import main
from contextledger.store import SQLiteStore
from contextledger.testing import Scenario, ScenarioRun, run_scenario, run_scenario_in_asyncio
from contextledger.testing.loopback import Exchange

FULL = os.environ.get("CONTEXTLEDGER_SCENARIOS") == "full"
#: The default size: four sessions of twelve steps, two with a child session, two with a
#: slice, 10% of requests faulted, and every loop refused once as too long half-way. Full
#: size: the agentloop benchmark's 20 x 32.
SIZE = (
    dict(sessions=20, steps=32, children=5, slices=5, fault_rate=0.05, overflow_at=16)
    if FULL
    else dict(sessions=4, steps=12, children=2, slices=2, fault_rate=0.1, overflow_at=6)
)
SEED = 7
#: The loops' action (a call into the runtime or a request sent) at which the cancelled
#: scenario's runtime is cancelled; the default size makes about 500 of them.
CANCEL_AT = random.Random(SEED).randrange(10, 400)

RUNS: dict[str, tuple[str, Scenario]] = {
    "trio-extractive": ("trio", Scenario(**SIZE, seed=SEED)),
    "trio-model": ("trio", Scenario(**SIZE, seed=SEED, summarizer="model")),
    "asyncio-extractive": ("asyncio", Scenario(**SIZE, seed=SEED)),
    "asyncio-model": ("asyncio", Scenario(**SIZE, seed=SEED, summarizer="model")),
    "trio-openai-chat": ("trio", Scenario(**SIZE, seed=SEED, wire="openai-chat")),
    "asyncio-openai-chat-model": (
        "asyncio",
        Scenario(**SIZE, seed=SEED, wire="openai-chat", summarizer="model"),
    ),
    "trio-cancelled": ("trio", Scenario(**SIZE, seed=SEED, cancel_after=CANCEL_AT)),
    "trio-cancelled-in-compaction": ("trio", Scenario(**SIZE, seed=SEED, cancel_in_summary=1)),
    # Two loops of 32 steps: a turn that needs more than three compactions.
    "trio-long": (
        "trio",
        Scenario(sessions=2, steps=32, fault_rate=0.1, overflow_at=16, seed=SEED),
    ),
    # Four loops of 24 steps, each with a slice half-way.
    "trio-slices": ("trio", Scenario(sessions=4, steps=24, slices=4, seed=2)),
}
CANCELLED = ("trio-cancelled", "trio-cancelled-in-compaction")


@cache
def run_of(name: str, folder: Path) -> ScenarioRun:
    """The run of scenario ``name`` into ``folder``/``name``.db, run on first use."""
    mode, scenario = RUNS[name]
    path = folder / f"{name}.db"
    if mode == "asyncio":
        return run_scenario_in_asyncio(scenario, SQLiteStore.open(path))

    async def in_trio() -> ScenarioRun:
        async with SQLiteStore.open(path) as store:
            return await run_scenario(scenario, store)

    return trio.run(in_trio)


@pytest.fixture(scope="session")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scenarios")


def sessions_of(run: ScenarioRun) -> list[str]:
    return sorted({a.session_id for a in run.agents})


def errors(exchanges: list[Exchange]) -> list[tuple[str, str]]:
    """Each refused request's conversation and the provider's error message."""
    return [(e.conversation, e.response["error"]["message"]) for e in exchanges]


@pytest.mark.parametrize("name", RUNS)
def test_no_session_fails(name: str, folder: Path) -> None:
    run = run_of(name, folder)
    assert [(a.session_id, a.agent_id, a.error) for a in run.failed] == []


@pytest.mark.parametrize("name", RUNS)
def test_no_request_exceeds_the_window(name: str, folder: Path) -> None:
    run = run_of(name, folder)
    assert errors(run.over_window) == []


@pytest.mark.parametrize("name", RUNS)
def test_every_overflow_is_followed_by_one_compaction_and_an_accepted_request(
    name: str, folder: Path
) -> None:
    run = run_of(name, folder)
    assert run.bad_overflows == []
    half_way = RUNS[name][1].overflow_at
    if half_way is not None:
        # Every loop that got half-way was refused as too long; unless a cancellation
        # interrupted its answer, the loop recorded it.
        refused = {e.conversation for e in run.exchanges if e.fault == "overflow"}
        assert all(a.conversation in refused for a in run.agents if a.steps > half_way)
        if not run.cancelled:
            assert all(a.overflows for a in run.agents if a.steps > half_way)


@pytest.mark.parametrize("name", RUNS)
def test_every_request_pairs_every_call(name: str, folder: Path) -> None:
    run = run_of(name, folder)
    assert run.unpaired == 0
    assert errors(run.refused) == []


@pytest.mark.parametrize("name", RUNS)
def test_each_agents_requests_hold_only_its_own_calls(name: str, folder: Path) -> None:
    assert run_of(name, folder).crossed_calls == []


@pytest.mark.parametrize("name", RUNS)
def test_the_log_replays_every_request_body_of_every_session_and_slice(
    name: str, folder: Path
) -> None:
    run = run_of(name, folder)
    assert run.replays
    assert {(a.session_id, a.agent_id) for a in run.agents} <= {
        (r.session_id, r.agent_id) for r in run.replays
    }
    assert [(r.session_id, r.seq, r.agent_id) for r in run.replay_mismatches] == []
    assert [(e.conversation, e.index) for e in run.unrecorded_bodies] == []


@pytest.mark.parametrize("name", RUNS)
def test_contextledger_replay_accepts_every_session(
    name: str, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_of(name, folder)
    db = str(folder / f"{name}.db")
    failing = [s for s in sessions_of(run) if main(["replay", db, "--session", s, "--json"])]
    capsys.readouterr()
    assert failing == []


@pytest.mark.parametrize("name", RUNS)
def test_diff_and_view_with_a_strategy_work_on_every_session(
    name: str, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(folder / f"{name}.db")
    for session in sessions_of(run_of(name, folder)):
        diff = ["diff", db, "--session", session, "--strategy", "baseline", "--json"]
        assert main([*diff, "--turn", "1"]) == 0, session
        calls = json.loads(capsys.readouterr().out)["calls"]
        for turn in (calls // 2 + 1, calls):
            assert main([*diff, "--turn", str(turn)]) == 0, (session, turn)
            capsys.readouterr()
        assert main(["view", db, "--session", session, "--strategy", "baseline", "--json"]) == 0
        capsys.readouterr()


@pytest.mark.parametrize("name", CANCELLED)
def test_a_cancelled_runtime_leaves_no_compaction_open(name: str, folder: Path) -> None:
    run = run_of(name, folder)
    assert run.cancelled
    # A compaction the runtime found open when it reopened was left half-way by the cancel.
    assert run.interrupted == []


@pytest.mark.parametrize("name", RUNS)
def test_every_request_goes_to_the_scenarios_wire(name: str, folder: Path) -> None:
    run = run_of(name, folder)
    paths = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions"}
    assert {e.path for e in run.exchanges} == {paths[run.scenario.wire]}
