"""The opencode export importer: parts one to one, steps with their usage, tool states,
compactions, and the shared traces against ``shared/traces/SOURCES-more.md``."""

from __future__ import annotations

from typing import Any

import pytest

from contextledger.events._catalogue import (
    AssistantFinished,
    CompactionCompleted,
    CompactionRequested,
    PartAdded,
    SessionStarted,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._parts import (
    FilePart,
    ReasoningPart,
    StepFinishPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    Usage,
)
from contextledger.importers import TraceImportError, import_opencode, import_opencode_data
from tests.importers.test_openai_chat import (
    assert_imported,
    messages,
    of_type,
    tool_parts,
    trace_dir,
)

TOKENS = {
    "total": 150,
    "input": 100,
    "output": 40,
    "reasoning": 10,
    "cache": {"read": 5, "write": 0},
}


def _tool(call_id: str, status: str, **state: Any) -> dict[str, Any]:
    return {"type": "tool", "tool": "read", "callID": call_id,
            "state": {"status": status, "input": {"filePath": "a.ts"}, **state}}  # fmt: skip


EXPORT: dict[str, Any] = {
    "info": {"id": "ses_288a", "title": "Fix lint", "version": "1.4.1",
             "time": {"created": 1775823873629}},
    "messages": [
        {"info": {"id": "u1", "role": "user", "agent": "build", "time": {"created": 1775823873700}},
         "parts": [{"type": "text", "text": "Fix the lint error in @a.ts"},
                   {"type": "file", "mime": "text/plain", "filename": "a.ts",
                    "url": "file:///repo/a.ts", "source": {"path": "a.ts"}},
                   {"type": "text", "text": "Called the Read tool", "synthetic": True}]},
        {"info": {"id": "a1", "role": "assistant", "parentID": "u1", "providerID": "openai",
                  "modelID": "gpt-5.3-codex", "agent": "build", "cost": 0.01, "tokens": TOKENS,
                  "finish": "tool-calls", "time": {"created": 1775823874000,
                                                   "completed": 1775823876000}},
         "parts": [{"type": "step-start", "snapshot": "f4c4"},
                   {"type": "reasoning", "text": "Read it first.",
                    "metadata": {"openai": {"itemId": "rs_1"}}},
                   _tool("call_1", "completed", output="let a = 1", title="a.ts",
                         time={"start": 1775823874500, "end": 1775823875000}),
                   _tool("call_2", "error", error="no such file"),
                   {"type": "step-finish", "reason": "tool-calls", "tokens": TOKENS, "cost": 0.01},
                   {"type": "patch", "hash": "abc", "files": ["a.ts"]}]},
        {"info": {"id": "u2", "role": "user", "time": {"created": 1775823877000}},
         "parts": [{"type": "compaction", "auto": True, "overflow": False}]},
        {"info": {"id": "a2", "role": "assistant", "parentID": "u2", "summary": True,
                  "agent": "compaction", "providerID": "openai", "modelID": "gpt-5.3-codex",
                  "finish": "stop", "tokens": TOKENS,
                  "time": {"created": 1775823877100, "completed": 1775823878000}},
         "parts": [{"type": "step-start"}, {"type": "text", "text": "## Goal\nFix lint."},
                   {"type": "step-finish", "reason": "stop", "tokens": TOKENS}]},
    ],
}  # fmt: skip


def test_parts_map_one_to_one() -> None:
    session = import_opencode_data(EXPORT)
    assert_imported(session)
    parts = [e.part for e in of_type(session.events, PartAdded)]
    (file,) = [p for p in parts if isinstance(p, FilePart)]
    assert (file.mime, file.filename, file.source_path) == ("text/plain", "a.ts", "a.ts")
    texts = [(p.text, p.synthetic) for p in parts if isinstance(p, TextPart)]
    assert texts[:2] == [("Fix the lint error in @a.ts", False), ("Called the Read tool", True)]
    (reasoning,) = [p for p in parts if isinstance(p, ReasoningPart)]
    assert reasoning.metadata == {"openai": {"itemId": "rs_1"}}
    started = session.events[0]
    assert isinstance(started, SessionStarted) and started.title == "Fix lint"


def test_tool_parts_are_calls_answered_by_their_state() -> None:
    session = import_opencode_data(EXPORT)
    assert [p.call_id for p in tool_parts(session)] == ["call_1", "call_2"]
    done, failed = [e.state for e in of_type(session.events, ToolStateChanged)]
    assert isinstance(done, ToolCompleted)
    assert (done.output, done.title, done.started_ms) == ("let a = 1", "a.ts", 1775823874500)
    assert isinstance(failed, ToolErrored) and failed.error == "no such file"


def test_each_step_finish_reports_its_usage_and_the_message_its_totals() -> None:
    session = import_opencode_data(EXPORT)
    usage = Usage(input=100, output=40, reasoning=10, cache_read=5)
    assert [e.usage for e in of_type(session.events, UsageReported)] == [usage, usage]
    steps = [
        e.part for e in of_type(session.events, PartAdded) if isinstance(e.part, StepFinishPart)
    ]
    assert [(s.reason, s.cost) for s in steps] == [("tool-calls", 0.01), ("stop", 0.0)]
    finished = of_type(session.events, AssistantFinished)
    assert [(f.finish, f.cost) for f in finished] == [("tool-calls", 0.01), ("stop", 0.0)]


def test_a_compaction_part_and_its_summary_are_a_compaction() -> None:
    session = import_opencode_data(EXPORT)
    (request,) = of_type(session.events, CompactionRequested)
    assert request.auto and not request.overflow
    (completed,) = of_type(session.events, CompactionCompleted)
    summary = next(m for m in messages(session) if m.summary)
    assert summary.parent_id == request.message_id == completed.request_message_id
    assert completed.projection.summary == "## Goal\nFix lint."


def test_patch_parts_are_left_out() -> None:
    session = import_opencode_data(EXPORT)
    assert [(i.line, i.kind, i.field) for i in session.left_out] == [
        (2, "part:patch", "messages[1].parts[5]")
    ]
    assert session.read["part:tool"] == 2


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"messages": []}, "info"),
        ({"info": {"id": "s"}, "messages": [{"info": {}, "parts": []}]}, "messages[0].info.role"),
        (
            {
                "info": {"id": "s"},
                "messages": [{"info": {"role": "assistant"}, "parts": [{"type": "tool"}]}],
            },
            "messages[0].parts[0].callID",
        ),
    ],
)
def test_a_malformed_export_names_the_field(data: Any, field: str) -> None:
    with pytest.raises(TraceImportError) as caught:
        import_opencode_data(data, source="export.json")
    assert caught.value.field == field


#: ``shared/traces/SOURCES-more.md``, opencode_export rows: step-finish parts (API calls) /
#: user messages / tool parts; the session-bridge export "contains a compaction part".
SOURCES: dict[str, tuple[int, int, int, int]] = {
    "gatomia__0f1be78a364c-1__oc-1.14.30-gpt-5.4.json": (65, 2, 131, 0),
    "biome-config__f94a4d1e69f1-0__gpt-5.3-codex.json": (10, 3, 10, 0),
    "session-bridge__13dddd416599-0__oc-1.4.3-claude-sonnet-4.6.json": (69, 5, 72, 1),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_shared_export_has_the_documented_counts(name: str) -> None:
    session = import_opencode(trace_dir("opencode-export") / name)
    assert_imported(session)
    steps, users, tools, compactions = SOURCES[name]
    assert len(of_type(session.events, UsageReported)) == len(session.calls) == steps
    requests = of_type(session.events, CompactionRequested)
    assert len(messages(session, "user")) + len(requests) == users
    assert len(tool_parts(session)) == tools
    assert len(of_type(session.events, CompactionCompleted)) == len(requests) == compactions
