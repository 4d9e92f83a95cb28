"""Export and import again: a session written back as an OpenAI chat log or a Claude Code
transcript imports to the same conversation (messages by role, their text and media, each call
with its id, tool, input and result; Claude Code keeps reasoning and error flags too)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.events._catalogue import Event, RecordedEvent
from contextledger.events._parts import (
    FilePart,
    ReasoningPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
)
from contextledger.history._projection import History
from contextledger.importers import (
    export_claude_code,
    export_openai_chat,
    export_trace,
    import_claude_code_lines,
    import_openai_chat_data,
    transcripts_under,
)
from contextledger.importers._detect import import_trace
from contextledger.simulation._synthetic import synthetic_session
from tests.importers.test_openai_chat import TRACES, trace_dir

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}}
CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "What is here?"}, IMAGE]},
    {
        "role": "assistant",
        "content": "Looking.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "cat", "arguments": '{"f": 1}'}},
            {"id": "c3", "type": "function", "function": {"name": "wait", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "a"}, IMAGE]},
    {"role": "tool", "tool_call_id": "c2", "content": "b"},
    {"role": "assistant", "content": [{"type": "text", "text": "A picture."}, IMAGE]},
]


def conversation(events: Sequence[Event], *, chat: bool) -> list[tuple[Any, ...]]:
    """The conversation of ``events`` as the projection has it: per message its role, text,
    media and calls with their results; ``chat`` drops what OpenAI chat cannot carry
    (reasoning, a result's error flag)."""
    session = events[0].session_id
    history = History.rebuild(
        session, (RecordedEvent(session, i, i, e) for i, e in enumerate(events, 1))
    )
    out: list[tuple[Any, ...]] = []
    for message in history.messages:
        text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
        files = [(p.mime, p.url) for p in message.parts if isinstance(p, FilePart)]
        if message.role == "user" and not text and not files:
            continue
        reasoning = [] if chat else [p.text for p in message.parts if isinstance(p, ReasoningPart)]
        calls = [
            (p.call_id, p.tool, p.state.input, _result(p, chat=chat))
            for p in message.parts
            if isinstance(p, ToolPart)
        ]
        out.append((message.role, text, files, reasoning, calls))
    return out


def _result(call: ToolPart, *, chat: bool) -> tuple[Any, ...] | None:
    match call.state:
        case ToolCompleted(output=output, attachments=attachments):
            return (output, [a.url for a in attachments]) if chat else (output, False)
        case ToolErrored(error=error):
            return (error, []) if chat else (error, True)
    return None


def _again_as_chat(events: list[Event]) -> list[Event]:
    exported = json.loads(export_trace(events, "openai-chat"))
    assert exported == export_openai_chat(events)
    return import_openai_chat_data(exported).events


def _again_as_claude_code(events: list[Event]) -> list[Event]:
    lines = export_trace(events, "claude-code").splitlines()
    assert [json.loads(line) for line in lines] == export_claude_code(events)
    return import_claude_code_lines(lines).events


def test_a_chat_log_exports_to_itself() -> None:
    events = import_openai_chat_data(CHAT).events
    assert export_openai_chat(events) == [
        *CHAT[:3],
        CHAT[3],
        CHAT[4],
        {"role": "assistant", "content": CHAT[5]["content"]},
    ]
    assert conversation(_again_as_chat(events), chat=True) == conversation(events, chat=True)
    again = _again_as_claude_code(events)
    assert conversation(again, chat=False) == conversation(events, chat=False)


def test_an_unknown_export_format_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot export to 'html'"):
        export_trace(import_openai_chat_data(CHAT).events, "html")


@settings(max_examples=12, deadline=None)
@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=3))
def test_a_generated_session_round_trips_through_both_formats(seed: int, turns: int) -> None:
    events = synthetic_session("ses_export", seed=seed, turns=turns)
    as_chat = conversation(_again_as_chat(events), chat=True)
    assert as_chat == conversation(events, chat=True)
    as_claude = conversation(_again_as_claude_code(events), chat=False)
    assert as_claude == conversation(events, chat=False)


def test_every_shared_claude_code_session_round_trips() -> None:
    trace_dir("claude-code-jsonl")
    paths = [
        path
        for folder in ("claude-code-jsonl", "claude-code-more")
        for path in transcripts_under(TRACES / folder)
    ]
    assert paths
    for path in paths:
        (session,) = import_trace(path)
        events = session.events
        assert conversation(_again_as_claude_code(events), chat=False) == conversation(
            events, chat=False
        ), path.name
        assert conversation(_again_as_chat(events), chat=True) == conversation(events, chat=True), (
            path.name
        )
