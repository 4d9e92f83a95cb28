"""Specification of ``contextledger.simulation._replay``: a replay has the session's own turns.
A user message the client sent on its own (``synthetic``: a hook's output, a changed file, a
skill listing) is a note of the turn it arrived in, recorded again as the synthetic message
it was, where it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextledger.actors import Runtime
from contextledger.config import Config
from contextledger.events._catalogue import Event, RecordedEvent
from contextledger.history._projection import History, Message
from contextledger.history._view import is_real_user
from contextledger.importers._detect import import_trace
from contextledger.simulation import (
    RecordedCall,
    RecordedNote,
    ReplayClock,
    ReplayedCall,
    TurnReplay,
    priced_model,
    raw_events,
    recorded_turns,
    request_inputs,
    sized_model,
)
from contextledger.store._memory import MemoryStore
from contextledger.strategies import strategy
from contextledger.testing._builder import SessionBuilder

#: A window nothing here comes near: the replays send what was recorded, uncompacted.
WINDOW = 1_000_000
TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "claude-code-more"
AUTH_GO = TRACES / "auth-go__c3e870840354-0__cc-2.1.150.jsonl"


def _answer(b: SessionBuilder, user: str, text: str) -> str:
    reply = b.assistant(user)
    b.text(reply, text)
    b.finish(reply)
    return reply


def _session_with_notes() -> list[Event]:
    """A hook's note before the first prompt, a turn of two calls with a note between them
    and one after, and a second turn."""
    b = SessionBuilder()
    b.user("[hook_additional_context] SessionStart: use the repo's make targets", synthetic=True)
    first = b.user("fix the failing test")
    _answer(b, first, "reading src/app.py")
    b.user("[diagnostics] src/app.py:3: unused import os", synthetic=True)
    _answer(b, first, "removed the import")
    b.user("[edited_text_file] src/app.py changed", synthetic=True)
    second = b.user("now run the linter")
    _answer(b, second, "ruff is clean")
    return b.events


def _messages(events: list[Event]) -> list[Message]:
    session_id = events[0].session_id
    rebuilt = (RecordedEvent(session_id, i, i, e) for i, e in enumerate(events, 1))
    return History.rebuild(session_id, rebuilt).messages


def _users(messages: list[Message]) -> list[tuple[bool, str]]:
    """Each user message: whether it is synthetic, and its text."""
    return [
        (m.synthetic, "".join(getattr(p, "text", "") for p in m.parts))
        for m in messages
        if m.role == "user"
    ]


async def _replay(events: list[Event]) -> tuple[list[ReplayedCall], History]:
    """``events`` replayed through a ``Runtime`` under ``baseline``: its calls and the
    history it ends with."""
    model_id = priced_model("anthropic", events)
    clock = ReplayClock(events[0].time_ms)
    config = strategy("baseline").configure(Config())
    model = sized_model("anthropic", model_id, WINDOW)
    async with Runtime.open(MemoryStore(), model=model, config=config, clock=clock) as runtime:
        session = await runtime.session(events[0].session_id)
        inputs = request_inputs(events, "anthropic", model_id)
        replay = TurnReplay(session, recorded_turns(events), inputs, clock, context=WINDOW)
        calls = [call async for call in replay.calls()]
        return calls, await session.history()


def test_a_turn_starts_at_a_message_the_user_typed() -> None:
    first, second = recorded_turns(_session_with_notes())
    assert (first.text, second.text) == ("fix the failing test", "now run the linter")
    assert [n.after for n in first.notes] == [None, 1, 2]
    assert second.notes == []
    assert [n.text[:17] for n in first.opening()] == ["[hook_additional_"]
    steps = list(first.steps())
    assert [type(s) for s in steps] == [RecordedCall, RecordedNote, RecordedCall, RecordedNote]
    assert [s.text[:13] for s in steps if isinstance(s, RecordedNote)] == [
        "[diagnostics]",
        "[edited_text_",
    ]


async def test_a_replay_records_each_synthetic_message_as_it_was_where_it_was() -> None:
    events = _session_with_notes()
    calls, history = await _replay(events)
    assert _users(history.messages) == _users(_messages(events))
    assert [m.role for m in history.messages] == [m.role for m in _messages(events)]
    assert [c.turn for c in calls] == [0, 0, 1]
    notes = [m for m in history.messages if m.role == "user" and m.synthetic]
    assert all(p.synthetic for m in notes for p in m.parts)  # type: ignore[union-attr]
    # Each answer replies to the message the user typed, not to a note.
    typed = [m.id for m in history.messages if is_real_user(m)]
    answers = [m.parent_id for m in history.messages if m.role == "assistant"]
    assert answers == [typed[0], typed[0], typed[1]]


@pytest.mark.skipif(not AUTH_GO.is_file(), reason=f"the shared trace is not here ({AUTH_GO})")
async def test_a_replay_of_a_claude_code_session_has_the_sessions_own_turns() -> None:
    # auth-go: 13 prompts the user typed, 14 attachments and the CLI's own notes around them.
    events = raw_events(import_trace(AUTH_GO)[0].events)
    recorded = _messages(events)
    turns = recorded_turns(events)
    assert len(turns) == sum(map(is_real_user, recorded)) == 13
    calls, history = await _replay(events)
    assert sum(map(is_real_user, history.messages)) == 13
    assert _users(history.messages) == _users(recorded)
    assert max(c.turn for c in calls) == 12
