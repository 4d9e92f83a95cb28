"""The OpenAI chat importer, and the checks the other chat-shaped importers' tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import pytest

from contextledger.events._catalogue import (
    AssistantFinished,
    Event,
    MessageAdded,
    PartAdded,
    RecordedEvent,
    SessionStarted,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._codec import DEFAULT_CODEC
from contextledger.events._parts import TextPart, ToolCompleted, ToolPart, ToolPending
from contextledger.history import History, SessionIndex, validate_events
from contextledger.history._view import model_view
from contextledger.importers import (
    ImportedSession,
    TraceImportError,
    import_openai_chat,
    import_openai_chat_data,
)
from contextledger.importers._openai_chat import SYNTHETIC_START_MS, SYNTHETIC_STEP_MS
from contextledger.testing import check_tool_pairs

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
E = TypeVar("E", bound=Event)


def trace_dir(name: str) -> Path:
    """``shared/traces/<name>``, or skip the test when it is absent."""
    folder = TRACES / name
    if not folder.is_dir():
        pytest.skip(f"shared/traces not present: {folder} does not exist")
    return folder


def of_type(events: list[Event], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


def tool_parts(session: ImportedSession) -> list[ToolPart]:
    parts = [e.part for e in of_type(session.events, PartAdded)]
    return [p for p in parts if isinstance(p, ToolPart)]


def messages(session: ImportedSession, role: str | None = None) -> list[MessageAdded]:
    found = of_type(session.events, MessageAdded)
    return [m for m in found if role is None or m.role == role]


def assert_imported(session: ImportedSession) -> None:
    """The events validate, rebuild, encode, and their model view pairs every tool call."""
    assert isinstance(session.events[0], SessionStarted)
    validate_events(SessionIndex(session.session_id), session.events)
    recorded = (
        RecordedEvent(session.session_id, seq, seq, event)
        for seq, event in enumerate(session.events, 1)
    )
    history = History.rebuild(session.session_id, recorded)
    check_tool_pairs(model_view(history))
    for event in session.events:
        DEFAULT_CODEC.encode(event)


def answered(session: ImportedSession) -> int:
    return len(of_type(session.events, ToolStateChanged))


CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "List the files."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ls"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
    {"role": "assistant", "content": [{"type": "text", "text": "Two files."}]},
]


def test_a_chat_becomes_user_assistant_and_paired_tool_events() -> None:
    session = import_openai_chat_data(CHAT)
    assert_imported(session)
    assert [m.role for m in messages(session)] == ["user", "assistant", "assistant"]
    (call,) = tool_parts(session)
    assert (call.call_id, call.tool, call.state) == (
        "call_1",
        "bash",
        ToolPending(input={"command": "ls"}),
    )
    (result,) = of_type(session.events, ToolStateChanged)
    assert isinstance(result.state, ToolCompleted) and result.state.output == "a.py\nb.py"
    finishes = [f.finish for f in of_type(session.events, AssistantFinished)]
    assert finishes == ["tool-calls", "stop"]
    assert not of_type(session.events, UsageReported)


def test_the_system_prompt_is_config_not_a_turn() -> None:
    session = import_openai_chat_data({"messages": CHAT, "model": "gpt-4o"})
    started = session.events[0]
    assert isinstance(started, SessionStarted)
    assert started.config["system_prompt"] == "You are helpful."
    assert started.model is not None and started.model.model_id == "gpt-4o"
    assert session.skipped == {"system": 1}
    texts = [
        e.part.text for e in of_type(session.events, PartAdded) if isinstance(e.part, TextPart)
    ]
    assert texts == ["List the files.", "Two files."]


def test_the_synthetic_clock_advances_one_second_per_message() -> None:
    session = import_openai_chat_data(CHAT)
    times = sorted({m.time_ms for m in messages(session)})
    assert times[0] == SYNTHETIC_START_MS
    assert times == [SYNTHETIC_START_MS + i * SYNTHETIC_STEP_MS for i in (0, 1, 3)]


def test_session_id_is_used_and_import_is_deterministic() -> None:
    session = import_openai_chat_data(CHAT, session_id="ses_custom")
    assert session.session_id == "ses_custom"
    assert all(e.session_id == "ses_custom" for e in session.events)
    assert import_openai_chat_data(CHAT).events == import_openai_chat_data(CHAT).events


def test_a_reused_call_id_is_renamed() -> None:
    chat = [*CHAT[1:4], *CHAT[2:4]]
    session = import_openai_chat_data(chat)
    assert_imported(session)
    assert [p.call_id for p in tool_parts(session)] == ["call_1", "call_1~2"]
    assert session.skipped == {"renamed_call_id": 1}


@pytest.mark.parametrize(
    ("data", "line", "field"),
    [
        ({"nope": 1}, 1, "messages"),
        ([{"content": "x"}], 1, "[0].role"),
        ([CHAT[1], {"role": "robot", "content": "x"}], 2, "[1].role"),
        ([{"role": "user", "content": 3}], 1, "[0].content"),
        ([{"role": "tool", "content": "x"}], 1, "[0].tool_call_id"),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{"}}],
                    }
                ]
            },
            1,
            "messages[0].tool_calls[0].function.arguments",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}],
            1,
            "[0].tool_calls[0].id",
        ),
    ],
)
def test_a_malformed_chat_names_the_message_and_field(data: Any, line: int, field: str) -> None:
    with pytest.raises(TraceImportError) as caught:
        import_openai_chat_data(data, source="chat.json")
    assert (caught.value.line, caught.value.field) == (line, field)
    assert field in str(caught.value)


def test_import_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}')
    session = import_openai_chat(path)
    assert [m.role for m in messages(session)] == ["user"]
    path.write_text("[{")
    with pytest.raises(TraceImportError, match="not JSON"):
        import_openai_chat(path)
