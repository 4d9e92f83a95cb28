"""The Gemini CLI importer: user and model messages, tool calls carrying their results, token
usage, notices, and the shared traces against ``shared/traces/SOURCES-more.md``."""

from __future__ import annotations

from typing import Any

import pytest

from contextledger.events._catalogue import (
    PartAdded,
    SessionStarted,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._parts import ReasoningPart, TextPart, ToolCompleted, ToolErrored, Usage
from contextledger.importers import (
    TraceImportError,
    import_gemini_cli,
    import_gemini_cli_data,
)
from tests.importers.test_openai_chat import (
    assert_imported,
    messages,
    of_type,
    tool_parts,
    trace_dir,
)


def _call(call_id: str, status: str, response: dict[str, Any]) -> dict[str, Any]:
    answer = {"id": call_id, "name": "run_shell_command", "response": response}
    result = [{"functionResponse": answer}]
    return {"id": call_id, "name": "run_shell_command", "args": {"command": "ls"},
            "result": result, "status": status, "timestamp": "2026-04-14T00:16:31.000Z",
            "resultDisplay": "a.gif", "displayName": "Shell"}  # fmt: skip


RECORDING: dict[str, Any] = {
    "sessionId": "970c70a7-5c8e",
    "projectHash": "40fc80fd",
    "startTime": "2026-04-14T00:15:48.303Z",
    "kind": "main",
    "messages": [
        {"id": "m0", "timestamp": "2026-04-14T00:15:53.423Z", "type": "info",
         "content": "1 extension has an update."},
        {"id": "m1", "timestamp": "2026-04-14T00:16:25.510Z", "type": "user",
         "content": [{"text": "Shrink @media/a.gif"}, {"text": "\n--- Content ---"}],
         "displayContent": [{"text": "Shrink @media/a.gif"}]},
        {"id": "m2", "timestamp": "2026-04-14T00:16:29.767Z", "type": "gemini",
         "content": "I will list the files.",
         "thoughts": [{"subject": "Sizing", "description": "Check sizes first.",
                       "timestamp": "2026-04-14T00:16:28.992Z"}],
         "tokens": {"input": 19567, "output": 54, "cached": 7000, "thoughts": 154, "tool": 10,
                    "total": 19775},
         "model": "gemini-3-flash-preview",
         "toolCalls": [_call("c1", "success", {"output": "a.gif"}),
                       _call("c2", "cancelled", {"error": "[Operation Cancelled]"})]},
        {"id": "m3", "timestamp": "2026-04-14T00:17:11.477Z", "type": "gemini",
         "content": "Done.", "thoughts": [], "model": "gemini-3-flash-preview"},
    ],
}  # fmt: skip


def test_user_and_model_messages_and_their_parts() -> None:
    session = import_gemini_cli_data(RECORDING)
    assert_imported(session)
    assert [m.role for m in messages(session)] == ["user", "assistant", "assistant"]
    parts = [e.part for e in of_type(session.events, PartAdded)]
    texts = [p for p in parts if isinstance(p, TextPart)]
    assert [t.text for t in texts] == [
        "Shrink @media/a.gif",
        "\n--- Content ---",
        "I will list the files.",
        "Done.",
    ]
    assert texts[0].metadata == {"gemini_cli": {"displayContent": "Shrink @media/a.gif"}}
    (thought,) = [p.text for p in parts if isinstance(p, ReasoningPart)]
    assert thought == "**Sizing**\nCheck sizes first."


def test_tool_calls_carry_their_results() -> None:
    session = import_gemini_cli_data(RECORDING)
    assert [(p.call_id, p.state.input) for p in tool_parts(session)] == [
        ("c1", {"command": "ls"}),
        ("c2", {"command": "ls"}),
    ]
    done, cancelled = [e.state for e in of_type(session.events, ToolStateChanged)]
    assert isinstance(done, ToolCompleted) and done.output == "a.gif"
    assert isinstance(cancelled, ToolErrored) and cancelled.interrupted
    assert cancelled.error == "[Operation Cancelled]"


def test_tokens_are_the_usage_of_the_call_that_reports_them() -> None:
    session = import_gemini_cli_data(RECORDING)
    (usage,) = [e.usage for e in of_type(session.events, UsageReported)]
    assert usage == Usage(input=12577, output=54, reasoning=154, cache_read=7000)
    assert len(session.calls) == 2


def test_the_session_comes_from_the_recording_and_notices_are_left_out() -> None:
    session = import_gemini_cli_data(RECORDING)
    started = session.events[0]
    assert isinstance(started, SessionStarted)
    assert session.source_session_id == "970c70a7-5c8e"
    assert started.model is not None and started.model.provider_id == "google"
    assert [(i.line, i.kind, i.field) for i in session.left_out] == [(1, "info", "messages[0]")]
    assert session.read == {"gemini": 2, "info": 1, "user": 1}


@pytest.mark.parametrize(
    ("data", "line", "field"),
    [
        ({"messages": []}, 1, "sessionId"),
        ({"sessionId": "s", "messages": [{"id": "x"}]}, 1, "messages[0].type"),
        (
            {"sessionId": "s", "messages": [{"type": "gemini", "toolCalls": [{"name": "f"}]}]},
            1,
            "messages[0].toolCalls[0].id",
        ),
    ],
)
def test_a_malformed_recording_names_the_field(data: Any, line: int, field: str) -> None:
    with pytest.raises(TraceImportError) as caught:
        import_gemini_cli_data(data, source="session.json")
    assert (caught.value.line, caught.value.field) == (line, field)


#: ``shared/traces/SOURCES-more.md``, gemini_cli_session rows: messages with type gemini /
#: type user / entries in toolCalls; and "37 of 38 gemini messages carry tokens".
SOURCES: dict[str, tuple[int, int, int, int]] = {
    "session-bridge__e94f17cdc65d-0__gemini-3-flash.json": (38, 4, 40, 37),
    "session-bridge__c66a5f5ed92d-0__gemini-3-flash.json": (10, 3, 7, 10),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_shared_recording_has_the_documented_counts(name: str) -> None:
    session = import_gemini_cli(trace_dir("gemini-cli") / name)
    assert_imported(session)
    calls, users, tools, with_tokens = SOURCES[name]
    assert len(messages(session, "assistant")) == len(session.calls) == calls
    assert len(messages(session, "user")) == users
    assert len(tool_parts(session)) == len(of_type(session.events, ToolStateChanged)) == tools
    assert len(of_type(session.events, UsageReported)) == with_tokens
