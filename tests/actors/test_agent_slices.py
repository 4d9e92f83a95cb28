"""Two agents alternating on one session: each agent's request holds its own slice (the main
agent's request carries neither the sub-agent's messages nor its call in flight) behind its
own pinned prefix (a switch rotates nothing), each ``RequestSent`` is recorded with its
agent, and ``contextledger replay`` reproduces them."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import trio

from contextledger.actors import Runtime, SessionHandle
from contextledger.cli import main
from contextledger.events._catalogue import (
    MAIN_AGENT,
    PrefixAdvanced,
    PrefixPinned,
    PrefixRotated,
    RecordedEvent,
    RequestSent,
    UsageReported,
)
from contextledger.events._parts import Usage
from contextledger.history._projection import History
from contextledger.history._view import INTERRUPTED_OUTPUT
from contextledger.request._builder import BuiltRequest
from contextledger.store import SQLiteStore
from contextledger.vocabulary._messages import ModelToolResult
from tests.actors.test_runtime import INPUTS, MODEL, _clock

REVIEWER = "reviewer"
REVIEW_INPUTS = msgspec.structs.replace(INPUTS, agent="review")


def _sources(built: BuiltRequest) -> set[str]:
    return {m.source_id for m in built.request.messages}


def _interrupted(built: BuiltRequest) -> list[ModelToolResult]:
    return [
        c
        for m in built.request.messages
        for c in m.content
        if isinstance(c, ModelToolResult) and c.output == INTERRUPTED_OUTPUT
    ]


async def _alternate(session: SessionHandle, rounds: int) -> tuple[set[str], set[str]]:
    """``rounds`` times: a main step, the reviewer's step with a call still running while the
    main agent builds, then the reviewer's result and request. Returns the message ids each
    agent was sent."""
    main_sent: set[str] = set()
    reviewer_sent: set[str] = set()
    for n in range(rounds):
        user = await session.add_user(f"Step {n}: fix src/mod_{n}.py")
        await session.record_assistant(user, tool_calls=[("bash", {"command": "pytest"}, "ok")])
        main_sent |= _sources(await session.build_request(INPUTS))
        ask = await session.add_user(f"Review src/mod_{n}.py", agent="review", agent_id=REVIEWER)
        reply = await session.start_assistant(ask, agent="review", agent_id=REVIEWER)
        call = await session.call_tool(
            reply, "read", {"path": f"src/mod_{n}.py"}, agent_id=REVIEWER
        )
        built = await session.build_request(INPUTS)  # the reviewer's call is in flight
        assert _interrupted(built) == []
        main_sent |= _sources(built)
        await session.record_tool_result(call, "x = 1", agent_id=REVIEWER)
        await session.finish(reply, finish="tool-calls", agent_id=REVIEWER)
        reviewer_sent |= _sources(await session.build_request(REVIEW_INPUTS, agent_id=REVIEWER))
    return main_sent, reviewer_sent


async def _record(db: Path) -> tuple[set[str], set[str], History, list[RecordedEvent]]:
    async with (
        SQLiteStore.open(db) as store,
        Runtime.open(store, model=MODEL, clock=_clock()) as rt,
    ):
        session = await rt.session("ses_agents")
        main_sent, reviewer_sent = await _alternate(session, 3)
        return main_sent, reviewer_sent, await session.history(), await store.read("ses_agents")


def test_two_agents_alternating_are_each_sent_their_slice_and_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "agents.db"
    main_sent, reviewer_sent, history, recorded = trio.run(_record, db)
    mine = {m.id for m in history.messages if m.agent_id == REVIEWER}
    assert reviewer_sent and reviewer_sent <= mine
    assert main_sent and not main_sent & mine
    sent = [r.event.agent_id for r in recorded if isinstance(r.event, RequestSent)]
    assert sent == ["main", "main", REVIEWER] * 3
    # Each agent pins its own prefix once; switching between them rotates nothing.
    prefixes = [r.event for r in recorded if isinstance(r.event, PrefixPinned | PrefixRotated)]
    assert [(type(e), e.agent_id) for e in prefixes] == [
        (PrefixPinned, "main"),
        (PrefixPinned, REVIEWER),
    ]

    capsys.readouterr()  # the runtime's log lines
    code = main(["replay", str(db), "--session", "ses_agents", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["ok"] and result["prefix_hashes_matched"] == 9


async def _overlap(db: Path) -> list[RecordedEvent]:
    """Three rounds in which the reviewer's request is sent while the main agent's call runs;
    the main agent's answer arrives first in even rounds, the reviewer's in odd ones."""
    async with (
        SQLiteStore.open(db) as store,
        Runtime.open(store, model=MODEL, clock=_clock()) as rt,
    ):
        session = await rt.session("ses_overlap")
        for n in range(3):
            asks = {
                MAIN_AGENT: await session.add_user(f"Step {n}: fix src/mod_{n}.py"),
                REVIEWER: await session.add_user(
                    f"Review src/mod_{n}.py", agent="review", agent_id=REVIEWER
                ),
            }
            await session.build_request(INPUTS)
            await session.build_request(REVIEW_INPUTS, agent_id=REVIEWER)
            for agent in (MAIN_AGENT, REVIEWER) if n % 2 == 0 else (REVIEWER, MAIN_AGENT):
                kind = "review" if agent == REVIEWER else "build"
                answer = await session.start_assistant(asks[agent], agent=kind, agent_id=agent)
                usage = Usage(input=900 + n, output=10)
                await session.finish(answer, usage=usage, agent_id=agent)
        return await store.read("ses_overlap")


def test_overlapping_calls_of_two_agents_each_report_usage_for_their_own_request(
    tmp_path: Path,
) -> None:
    recorded = trio.run(_overlap, tmp_path / "overlap.db")
    sent: dict[str, RequestSent] = {}
    reports = {MAIN_AGENT: 0, REVIEWER: 0}
    advanced = {MAIN_AGENT: 0, REVIEWER: 0}
    for event in (r.event for r in recorded):
        if isinstance(event, RequestSent):
            sent[event.agent_id] = event
        elif isinstance(event, UsageReported):
            request = sent[event.agent_id]
            assert event.measure == request.measure is not None
            assert event.estimated_tokens == request.estimated_tokens > 0
            reports[event.agent_id] += 1
        elif isinstance(event, PrefixAdvanced):
            assert event.message_id == sent[event.agent_id].last_message_id
            advanced[event.agent_id] += 1
    assert reports == advanced == {MAIN_AGENT: 3, REVIEWER: 3}
