"""``import_trace``: each format recognised by its content, unknown ones refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextledger.events._catalogue import (
    AssistantFinished,
    InputLeftOut,
    MessageAdded,
    SessionStarted,
)
from contextledger.importers import (
    INVALID_KINDS,
    TraceImportError,
    detect_format,
    first_difference,
    import_trace,
    import_with_report,
    transcripts_under,
)
from tests.importers.test_mini_swe_agent import LEGACY
from tests.importers.test_openai_chat import CHAT, TRACES, assert_imported, tool_parts, trace_dir
from tests.importers.test_openhands import RESOLVER, RUN
from tests.importers.test_swe_agent import OLD

CLAUDE_RECORD = {
    "type": "user",
    "uuid": "u1",
    "sessionId": "s1",
    "timestamp": "2025-07-01T10:00:00.000Z",
    "message": {"role": "user", "content": "hello"},
}

MINI = {"trajectory_format": "mini-swe-agent-1", "messages": [{"role": "user", "content": "go"}]}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("run.traj", OLD, "swe-agent"),
        ("mini.traj.json", LEGACY, "mini-swe-agent"),
        ("mini.json", MINI, "mini-swe-agent"),
        ("chat.json", CHAT, "openai-chat"),
        ("chat2.json", {"messages": CHAT}, "openai-chat"),
    ],
)
def test_json_documents_are_recognised(tmp_path: Path, name: str, data: Any, kind: str) -> None:
    path = _write(tmp_path, name, json.dumps(data, indent=2))
    assert detect_format(path) == kind
    (session,) = import_trace(path)
    assert_imported(session)


def test_openhands_lines_give_one_session_per_run(tmp_path: Path) -> None:
    path = _write(tmp_path, "output.jsonl", f"{json.dumps(RUN)}\n{json.dumps(RESOLVER)}\n")
    assert detect_format(path) == "openhands"
    sessions = import_trace(path)
    assert len(sessions) == 2


def test_a_single_line_file_is_read_as_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "output.jsonl", json.dumps(RUN))
    assert len(import_trace(path)) == 1
    path = _write(tmp_path, "session.jsonl", json.dumps(CLAUDE_RECORD))
    assert detect_format(path) == "claude-code"
    (session,) = import_trace(path)
    assert_imported(session)


@pytest.mark.parametrize(
    "text",
    ['{"hello": "world"}', "[1, 2]", "[]", '"x"', "not json\nat all", "[1]\n[2]\n", "\n"],
)
def test_an_unknown_format_is_refused(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, "x.json", text)
    with pytest.raises(TraceImportError, match="unknown trace format"):
        import_trace(path)


#: Each shared trace folder and the format ``import_trace`` must find there.
FOLDERS = {
    "claude-code-jsonl": "claude-code",
    "claude-code-more": "claude-code",
    "swe-agent-traj": "swe-agent",
    "openhands": "openhands",
    "openhands-v1": "openhands-v1",
    "mini-swe-agent": "mini-swe-agent",
    "codex-rollout": "codex",
    "gemini-cli": "gemini-cli",
    "opencode-export": "opencode",
    "aider-history": "aider",
}
#: Transcripts in ``shared/traces``: the 14 files of ``README.md``'s table and the 20 rows of
#: ``SOURCES-more.md``'s (each OpenHands V1 conversation folder is one transcript).
TRANSCRIPTS = 14 + 20
#: The shared transcripts that are no valid conversation, with the line of their first fault and
#: how many items a lenient import leaves out for it: ``SOURCES-more.md`` says 10 of the 11
#: observations match an action, "the goal-fixture excerpt starts after one action".
NOT_VALID = {"software-agent-sdk__goal-fixture-events.jsonl": (7, 1)}


def test_every_shared_trace_is_dispatched_to_its_importer() -> None:
    trace_dir("")
    found = transcripts_under(TRACES)
    assert len(found) == TRANSCRIPTS
    for path in found:
        assert detect_format(path) == FOLDERS[path.relative_to(TRACES).parts[0]], path.name
        fault = NOT_VALID.get(path.name)
        if fault is not None:
            with pytest.raises(TraceImportError) as caught:
                import_with_report(path)
            assert caught.value.line == fault[0]
        result = import_with_report(path, lenient=fault is not None)
        invalid = [i for i in result.report.left_out if i.kind in INVALID_KINDS]
        assert len(invalid) == (fault[1] if fault else 0), path.name
        assert result.sessions, path.name
        assert result.report.format == detect_format(path)
        for session in result.sessions:
            assert_imported(session)


def test_a_truncated_document_says_where_it_stops(tmp_path: Path) -> None:
    text = json.dumps(CHAT, indent=2)
    path = _write(tmp_path, "chat.json", text[: len(text) // 2])
    with pytest.raises(TraceImportError, match=r"not JSON at position \d+ \(line \d+") as caught:
        import_trace(path)
    assert caught.value.line > 1
    path = _write(tmp_path, "one.json", '{"messages": [{"role": "user", "content": "hi"}')
    with pytest.raises(TraceImportError, match="not JSON at position 47"):
        detect_format(path)


def test_a_truncated_last_line_of_json_lines_names_that_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "s.jsonl", f"{json.dumps(CLAUDE_RECORD)}\n{json.dumps(CLAUDE_RECORD)[:30]}"
    )
    with pytest.raises(TraceImportError) as caught:
        import_trace(path)
    assert caught.value.line == 2 and "not JSON" in caught.value.reason


def test_a_swe_agent_demonstration_is_recognised(tmp_path: Path) -> None:
    demo = {"history": [
        {"role": "user", "content": "Fix it", "agent": "primary"},
        {"role": "assistant", "content": "Look.\n```\nls -F\n```", "agent": "primary"},
        {"role": "user", "content": "src/", "agent": "primary"},
    ]}  # fmt: skip
    path = _write(tmp_path, "demo.json", json.dumps(demo))
    assert detect_format(path) == "swe-agent"
    (session,) = import_trace(path)
    assert_imported(session)
    (call,) = tool_parts(session)
    assert call.state.input == {"command": "ls -F"}
    assert session.events[0].config["demonstration"] is True  # type: ignore[union-attr]


def test_the_report_counts_what_was_read_written_and_left_out(tmp_path: Path) -> None:
    chat = [*CHAT, {"role": "tool", "tool_call_id": "nope", "content": "x"}]
    path = _write(tmp_path, "chat.json", json.dumps(chat))
    with pytest.raises(TraceImportError, match="orphan_tool_result") as caught:
        import_with_report(path, session_id="ses_named")
    assert (caught.value.line, caught.value.field) == (6, "[5]")
    result = import_with_report(path, session_id="ses_named", lenient=True)
    report = result.report
    assert (report.source, report.format) == (str(path), "openai-chat")
    assert report.read == {"assistant": 2, "system": 1, "tool": 2, "user": 1}
    assert report.written["sessions"] == 1
    assert report.written["user messages"] == 1 and report.written["tool calls"] == 1
    assert report.written["event:session.started"] == 1
    assert [(i.line, i.kind) for i in report.left_out] == [(6, "orphan_tool_result")]
    assert report.left_out_by_reason() == [("orphan_tool_result", report.left_out[0].reason, [6])]
    assert [s.session_id for s in result.sessions] == ["ses_named"]


def test_openhands_v1_events_are_recognised_in_a_file_or_a_folder(tmp_path: Path) -> None:
    events = [
        {"id": "e1", "timestamp": "2026-02-05T11:24:45", "source": "user", "kind": "MessageEvent",
         "llm_message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}},
        {"id": "e2", "timestamp": "2026-02-05T11:24:46", "source": "agent", "kind": "MessageEvent",
         "llm_message": {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
         "llm_response_id": "r1"},
    ]  # fmt: skip
    path = _write(tmp_path, "events.jsonl", "".join(json.dumps(e) + "\n" for e in events))
    assert detect_format(path) == "openhands-v1"
    folder = tmp_path / "conversation"
    folder.mkdir()
    for n, event in enumerate(events):
        (folder / f"event-{n:05d}-{event['id']}.json").write_text(json.dumps(event, indent=2))
    assert detect_format(folder) == "openhands-v1"
    assert import_trace(folder)[0].events == import_trace(path)[0].events
    single = folder / "event-00000-e1.json"
    assert detect_format(single) == "openhands-v1"
    assert len(import_trace(single)) == 1


def test_a_folder_that_is_no_conversation_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceImportError, match="not an OpenHands V1 conversation"):
        import_trace(tmp_path)


def test_transcripts_under_a_folder(tmp_path: Path) -> None:
    (tmp_path / "conv" / "events").mkdir(parents=True)
    (tmp_path / "conv" / "events" / "event-00000-a.json").write_text("{}")
    (tmp_path / "conv" / "base_state.json").write_text("{}")
    _write(tmp_path, "a.jsonl", "")
    _write(tmp_path, "notes.md", "# notes\n")
    _write(tmp_path, "history.md", "# aider chat started at 2024-08-05 19:33:02\n")
    _write(tmp_path, "image.png", "")
    assert [p.relative_to(tmp_path) for p in transcripts_under(tmp_path)] == [
        Path("a.jsonl"),
        Path("conv"),
        Path("history.md"),
    ]


def test_claude_code_files_starting_together_get_their_own_session_ids(tmp_path: Path) -> None:
    # A resumed Claude Code session copies the earlier records, first timestamp included.
    reply = {**CLAUDE_RECORD, "uuid": "u2", "message": {"role": "user", "content": "more"}}
    first = _write(tmp_path, "a.jsonl", json.dumps(CLAUDE_RECORD) + "\n")
    second = _write(tmp_path, "b.jsonl", json.dumps(CLAUDE_RECORD) + "\n" + json.dumps(reply))
    ids = [import_trace(path)[0].session_id for path in (first, second, first)]
    assert ids[0] != ids[1] and ids[0] == ids[2]


def _claude(n: int, kind: str, content: Any, **extra: Any) -> str:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message |= {"id": f"msg_{n}", "model": "claude-x", "usage": {"input_tokens": 5}}
    record = {**CLAUDE_RECORD, "type": kind, "uuid": f"u{n}", "message": message, **extra}
    return json.dumps({**record, "timestamp": f"2025-07-01T10:00:{n:02d}.000Z"}) + "\n"


def test_claude_code_sub_agent_files_become_child_sessions(tmp_path: Path) -> None:
    spawn = {"description": "d", "prompt": "Find the tests", "subagent_type": "Explore"}
    main = _write(
        tmp_path,
        "s1.jsonl",
        _claude(1, "user", "hello")
        + _claude(2, "assistant", [{"type": "tool_use", "id": "toolu_1", "name": "Agent",
                                    "input": spawn}])
        + _claude(3, "user", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]),
    )  # fmt: skip
    agents = tmp_path / "s1" / "subagents"
    agents.mkdir(parents=True)
    side = {"isSidechain": True, "agentId": "a1"}
    (agents / "agent-a1.jsonl").write_text(
        _claude(4, "user", "Find the tests", **side)
        + _claude(5, "assistant", [{"type": "text", "text": "tests/"}], **side)
    )
    (agents / "agent-a1.meta.json").write_text('{"agentType": "Explore", "spawnDepth": 1}')
    assert transcripts_under(tmp_path) == [main]
    (session,) = import_trace(main)
    (child,) = session.children
    started = child.events[0]
    assert isinstance(started, SessionStarted)
    assert (started.parent_session_id, started.agent) == (session.session_id, "Explore")
    assert child.parent_call_id == "toolu_1" and child.session_id != session.session_id
    assert sum(isinstance(e, MessageAdded) for e in child.events) == 2
    orphan = [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "?"}]
    with (agents / "agent-a1.jsonl").open("a") as f:
        f.write(_claude(6, "user", orphan, **side))
    with pytest.raises(TraceImportError) as caught:
        import_trace(main)
    assert (caught.value.source, caught.value.line) == (str(agents / "agent-a1.jsonl"), 3)
    (session,) = import_trace(main, lenient=True)
    logged = session.children[0].events[-1]
    assert isinstance(logged, InputLeftOut) and logged.source == str(agents / "agent-a1.jsonl")


def test_a_sub_agent_files_last_reply_is_complete_once_its_call_has_its_result(
    tmp_path: Path,
) -> None:
    spawn = {"description": "d", "prompt": "Find the tests", "subagent_type": "Explore"}
    call = [{"type": "tool_use", "id": "toolu_1", "name": "Agent", "input": spawn}]
    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "tests/"}]
    main = _write(tmp_path, "s1.jsonl", _claude(1, "user", "hello") + _claude(2, "assistant", call))
    agents = tmp_path / "s1" / "subagents"
    agents.mkdir(parents=True)
    side = {"isSidechain": True, "agentId": "a1"}
    (agents / "agent-a1.jsonl").write_text(
        _claude(4, "user", "Find the tests", **side)
        + _claude(5, "assistant", [{"type": "text", "text": "tests/"}], **side)
    )
    # The sub-agent may still be writing its answer: its reply stays open.
    (running,) = import_trace(main)
    assert not any(isinstance(e, AssistantFinished) for e in running.children[0].events)
    with main.open("a") as f:
        f.write(_claude(6, "user", result))
    (done,) = import_trace(main)
    assert sum(isinstance(e, AssistantFinished) for e in done.children[0].events) == 1
    assert first_difference(running.children[0].events, done.children[0].events) is None
