"""The Codex CLI rollout importer: model calls closed by token counts, tool calls and their
outputs, injected and typed user messages, compactions, sub-agent rollouts, and the shared
traces against the figures of ``shared/traces/SOURCES-more.md``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextledger.events._catalogue import (
    CompactionCompleted,
    CompactionRequested,
    MessageAdded,
    PartAdded,
    SessionStarted,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._parts import ReasoningPart, TextPart, ToolCompleted, Usage
from contextledger.importers import (
    ImportedSession,
    TraceImportError,
    import_codex,
    import_codex_lines,
)
from contextledger.importers._codex import thread_session_id, uuid7_ms
from tests.importers.test_openai_chat import (
    assert_imported,
    messages,
    of_type,
    tool_parts,
    trace_dir,
)

THREAD = "019d7d08-46c9-7f73-affe-4e6ca9852d56"


def _line(second: int, kind: str, payload: dict[str, Any]) -> str:
    return json.dumps(
        {"timestamp": f"2026-04-11T14:53:{second:02d}.000Z", "type": kind, "payload": payload}
    )


def _item(second: int, **payload: Any) -> str:
    return _line(second, "response_item", payload)


def _event(second: int, **payload: Any) -> str:
    return _line(second, "event_msg", payload)


def _tokens(second: int, total: int, **last: int) -> str:
    usage = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0}
    usage.update(last)
    info = {"total_token_usage": {"total_tokens": total}, "last_token_usage": usage}
    return _event(second, type="token_count", info=info)


def _in(text: str) -> dict[str, str]:
    return {"type": "input_text", "text": text}


def _out(text: str) -> dict[str, str]:
    return {"type": "output_text", "text": text}


def _user(second: int, text: str, *, role: str = "user") -> str:
    return _item(second, type="message", role=role, content=[_in(text)])


META = _line(
    0,
    "session_meta",
    {
        "id": THREAD,
        "timestamp": "2026-04-11T14:53:00.000Z",
        "cwd": "/repo",
        "cli_version": "0.125.0",
        "originator": "codex-tui",
        "model_provider": "openai",
        "base_instructions": {"text": "You are Codex."},
    },
)
CONTEXT = _line(1, "turn_context", {"turn_id": "t1", "model": "gpt-5.5"})

ROLLOUT = [
    META,
    _event(1, type="task_started", turn_id="t1"),
    _user(1, "<permissions instructions>sandboxed</permissions instructions>", role="developer"),
    _user(1, "<environment_context><cwd>/repo</cwd></environment_context>"),
    CONTEXT,
    _user(2, "list the files"),
    _event(2, type="user_message", message="list the files", images=[]),
    _event(2, type="token_count", info=None),
    _item(
        3,
        type="reasoning",
        id="rs_1",
        summary=[{"type": "summary_text", "text": "**Listing**"}],
        encrypted_content="gAAA",
    ),
    _event(3, type="agent_message", message="Looking."),
    _item(3, type="message", role="assistant", content=[_out("Looking.")]),
    _item(4, type="function_call", name="exec_command", arguments='{"cmd":"ls"}', call_id="c1"),
    _item(4, type="custom_tool_call", name="apply_patch", input="*** Begin Patch", call_id="c2"),
    _item(5, type="function_call_output", call_id="c1", output="a.py\nb.py"),
    _event(5, type="exec_command_end", call_id="c1", exit_code=0),
    _item(5, type="custom_tool_call_output", call_id="c2", output="Success."),
    _tokens(5, 1000, input_tokens=900, cached_input_tokens=600, output_tokens=100,
            reasoning_output_tokens=40),
    _item(6, type="web_search_call", status="completed", action={"type": "search", "query": "x"}),
    _item(6, type="message", role="assistant", content=[_out("Done.")]),
    _tokens(6, 2000, input_tokens=950, cached_input_tokens=900, output_tokens=50),
    _tokens(7, 2000, input_tokens=950, cached_input_tokens=900, output_tokens=50),
    _event(7, type="task_complete", turn_id="t1", last_agent_message="Done."),
]  # fmt: skip


def outputs(session: ImportedSession) -> dict[str, str]:
    """Each completed call's output, by call id."""
    call_of_part = {p.id: p.call_id for p in tool_parts(session)}
    return {
        call_of_part[e.part_id]: e.state.output
        for e in of_type(session.events, ToolStateChanged)
        if isinstance(e.state, ToolCompleted)
    }


def _import(lines: list[str]) -> ImportedSession:
    session = import_codex_lines(lines, source="rollout.jsonl")
    assert_imported(session)
    return session


def test_a_model_call_is_the_output_items_before_its_token_count() -> None:
    session = _import(ROLLOUT)
    assistants = messages(session, "assistant")
    assert len(assistants) == 2
    assert [m.model.model_id for m in assistants if m.model] == ["gpt-5.5", "gpt-5.5"]
    first = [e.part for e in of_type(session.events, PartAdded)]
    kinds = [type(p).__name__ for p in first if p.message_id == assistants[0].message_id]
    assert kinds == [
        "StepStartPart",
        "ReasoningPart",
        "TextPart",
        "ToolPart",
        "ToolPart",
        "StepFinishPart",
    ]
    (usage, _) = [e.usage for e in of_type(session.events, UsageReported)]
    assert usage == Usage(input=300, output=60, reasoning=40, cache_read=600)


def test_a_repeated_token_count_is_reported_not_counted() -> None:
    session = _import(ROLLOUT)
    assert len(of_type(session.events, UsageReported)) == 2
    reasons = {(item.line, item.reason) for item in session.left_out if "token" in item.kind}
    assert (21, "repeats the previous totals: no new usage") in reasons
    assert (8, "a token count without usage (info is null)") in reasons


def test_tool_calls_keep_their_ids_and_freeform_input() -> None:
    session = _import(ROLLOUT)
    calls = {p.call_id: p for p in tool_parts(session)}
    assert calls["c1"].tool == "exec_command" and calls["c1"].state.input == {"cmd": "ls"}
    assert calls["c2"].tool == "apply_patch"
    assert calls["c2"].state.input == {"input": "*** Begin Patch"}
    search = calls["web-search-1"]
    assert search.provider_executed and search.state.input == {"type": "search", "query": "x"}
    assert outputs(session) == {"c1": "a.py\nb.py", "c2": "Success.", "web-search-1": ""}


def test_reasoning_keeps_its_item_id_and_encrypted_content() -> None:
    session = _import(ROLLOUT)
    (reasoning,) = [
        e.part for e in of_type(session.events, PartAdded) if isinstance(e.part, ReasoningPart)
    ]
    assert reasoning.text == "**Listing**"
    assert reasoning.metadata == {"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "gAAA"}}


def test_injected_messages_are_synthetic_and_typed_ones_are_not() -> None:
    session = _import(ROLLOUT)
    users = messages(session, "user")
    assert [m.synthetic for m in users] == [True, True, False]
    texts = [e.part for e in of_type(session.events, PartAdded) if isinstance(e.part, TextPart)]
    developer = next(p for p in texts if p.message_id == users[0].message_id)
    assert developer.metadata == {"codex": {"role": "developer"}}
    mirrors = [i for i in session.left_out if i.kind == "event_msg:user_message"]
    assert [i.line for i in mirrors] == [7]


def test_the_session_comes_from_session_meta() -> None:
    session = _import(ROLLOUT)
    started = session.events[0]
    assert isinstance(started, SessionStarted)
    assert started.config["system_prompt"] == "You are Codex."
    assert started.config["source_session_id"] == THREAD
    assert started.config["cli_version"] == "0.125.0"
    assert session.session_id == thread_session_id(THREAD, None)
    assert uuid7_ms(THREAD) == int("019d7d0846c9", 16)
    assert started.model is not None and started.model.model_id == "gpt-5.5"


def test_every_line_is_read_and_what_became_no_event_is_left_out() -> None:
    session = _import(ROLLOUT)
    assert sum(session.read.values()) == len(ROLLOUT)
    kinds = {item.kind for item in session.left_out}
    assert kinds == {
        "event_msg:task_started",
        "event_msg:user_message",
        "event_msg:token_count",
        "event_msg:agent_message",
        "event_msg:exec_command_end",
        "event_msg:task_complete",
    }


def test_a_compacted_line_is_a_compaction_with_its_replacement_history() -> None:
    compacted = _line(
        8,
        "compacted",
        {
            "message": "",
            "replacement_history": [
                {"type": "message", "role": "user", "content": [_in("list the files")]},
                {"type": "compaction", "id": "cmp_1", "encrypted_content": "sealed"},
            ],
        },
    )  # fmt: skip
    after = _item(9, type="message", role="assistant", content=[_out("Go on.")])
    session = _import([*ROLLOUT, compacted, after, _tokens(9, 3000, input_tokens=10)])
    (request,) = of_type(session.events, CompactionRequested)
    (completed,) = of_type(session.events, CompactionCompleted)
    assert completed.request_message_id == request.message_id
    assert completed.projection.summary == "list the files"
    assert completed.tail_start_id is None
    summary = next(m for m in messages(session) if m.summary)
    text = next(
        e.part
        for e in of_type(session.events, PartAdded)
        if isinstance(e.part, TextPart) and e.part.message_id == summary.message_id
    )
    assert text.metadata["codex"]["compaction_items"] == [
        {"id": "cmp_1", "encrypted_content": "sealed"}
    ]
    assert messages(session)[-1].role == "assistant"


def test_a_sub_agent_rollout_is_a_child_of_its_parent_thread() -> None:
    child = "019d7e48-96e2-77a0-b4ce-607c7aba4b96"
    spawn = {
        "parent_thread_id": THREAD,
        "depth": 1,
        "agent_nickname": "Euler",
        "agent_role": "explorer",
    }
    lines = [
        _line(
            0,
            "session_meta",
            {
                "id": child,
                "forked_from_id": THREAD,
                "timestamp": "2026-04-11T20:42:59.683Z",
                "source": {"subagent": {"thread_spawn": spawn}},
            },
        ),
        META,
        _event(1, type="task_started", turn_id="019d7d08-f1d2-78a1-ae52-df8e21f9b394"),
        _user(1, "review the repo"),
        _event(1, type="user_message", message="review the repo"),
        _item(
            2,
            type="function_call",
            name="spawn_agent",
            arguments='{"message":"review commit a1"}',
            call_id="spawn1",
        ),
        _tokens(2, 100, input_tokens=100),
        _item(
            2,
            type="function_call_output",
            call_id="spawn1",
            output="You are the newly spawned agent.",
        ),
        _event(3, type="task_started", turn_id="019d7e48-9707-74f1-a6d0-0978874cf657"),
        _user(3, "review commit a1"),
        _event(3, type="user_message", message="review commit a1"),
        _item(
            4,
            type="message",
            role="assistant",
            content=[{"type": "output_text", "text": "No findings."}],
        ),
        _tokens(4, 200, input_tokens=100),
    ]
    session = _import(lines)
    started = session.events[0]
    assert isinstance(started, SessionStarted)
    assert started.agent == "explorer"
    assert started.parent_session_id == thread_session_id(THREAD, None)
    assert started.config["forked_messages"] == 2
    assert started.config["agent_nickname"] == "Euler"
    assert session.parent_call_id == "spawn1"
    assert session.source_session_id == child


def test_sub_agent_activity_links_the_spawn_result_to_the_child() -> None:
    child = "019f80ee-401e-78f1-919f-34033e956ba8"
    lines = [
        META,
        _user(1, "review"),
        _item(2, type="function_call", name="spawn_agent", arguments="{}", call_id="s1"),
        _event(
            2,
            type="sub_agent_activity",
            event_id="s1",
            agent_thread_id=child,
            agent_path="/root/a",
            kind="started",
        ),
        _item(2, type="function_call_output", call_id="s1", output="spawned"),
        _tokens(2, 10, input_tokens=10),
    ]
    session = _import(lines)
    (done,) = of_type(session.events, ToolStateChanged)
    assert isinstance(done.state, ToolCompleted)
    assert done.state.metadata["codex"]["child_session_id"] == thread_session_id(child, None)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"type": "event_msg", "payload": {}}', "timestamp"),
        ('{"timestamp": "2026-04-11T14:53:00Z", "type": "event_msg"}', "payload"),
        ('{"timestamp": "2026-04-11T14:53:00Z", "payload": {}}', "type"),
    ],
)
def test_a_malformed_line_names_its_field(line: str, field: str) -> None:
    with pytest.raises(TraceImportError) as caught:
        import_codex_lines([META, line], source="rollout.jsonl")
    assert (caught.value.line, caught.value.field) == (2, field)


def test_a_call_without_a_call_id_names_the_field() -> None:
    bad = _item(2, type="function_call", name="exec_command", arguments="{}")
    with pytest.raises(TraceImportError) as caught:
        import_codex_lines([META, bad], source="rollout.jsonl")
    assert (caught.value.line, caught.value.field) == (2, "payload.call_id")


# --- the shared traces -------------------------------------------------------------------------

#: ``shared/traces/SOURCES-more.md``, codex_rollout rows: token_count events whose ``info`` is
#: not null / ``user_message`` events / function_call + custom_tool_call + web_search_call.
SOURCES: dict[str, tuple[int, int, int]] = {
    "entire-graph__3705cde00da0-0__codex-desktop-0.145.0a18.jsonl": (219, 3, 204),
    "agentv__0034f597b72d-1__codex-tui-0.142.2.jsonl": (183, 10, 177),
    "entire-graph__d94ea7db13b9-0__codex-tui-0.136.0.jsonl": (281, 6, 424),
    "git-sync__36113cbd7ee5-1__codex-tui-0.118.0-subagent.jsonl": (331, 19, 507),
    "skills__d654a3e78b3c-0__codex-tui-0.125.0.jsonl": (26, 2, 65),
}
#: Compactions per rollout (SOURCES-more.md: agentv "compacted lines", d94ea7 "1 compacted",
#: git-sync and the Desktop file one each, skills none).
COMPACTIONS = {
    "entire-graph__3705cde00da0-0__codex-desktop-0.145.0a18.jsonl": 1,
    "agentv__0034f597b72d-1__codex-tui-0.142.2.jsonl": 2,
    "entire-graph__d94ea7db13b9-0__codex-tui-0.136.0.jsonl": 1,
    "git-sync__36113cbd7ee5-1__codex-tui-0.118.0-subagent.jsonl": 1,
    "skills__d654a3e78b3c-0__codex-tui-0.125.0.jsonl": 0,
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_shared_rollout_has_the_documented_counts(name: str) -> None:
    path = trace_dir("codex-rollout") / name
    session = import_codex(path)
    assert_imported(session)
    token_counts, typed, calls = SOURCES[name]
    reported = len(of_type(session.events, UsageReported))
    repeats = [
        i
        for i in session.left_out
        if i.kind == "event_msg:token_count" and "info is null" not in i.reason
    ]
    assert reported + len(repeats) == token_counts
    assert len([m for m in messages(session, "user") if not m.synthetic]) == typed
    parts = tool_parts(session)
    assert len(parts) == calls
    assert len(of_type(session.events, ToolStateChanged)) == calls
    assert len(of_type(session.events, CompactionCompleted)) == COMPACTIONS[name]
    lines = sum(1 for line in path.read_bytes().splitlines() if line.strip())
    assert sum(session.read.values()) == lines


def test_the_shared_sub_agent_rollout_names_its_parent_and_spawn_call() -> None:
    path = trace_dir("codex-rollout") / "git-sync__36113cbd7ee5-1__codex-tui-0.118.0-subagent.jsonl"
    session = import_codex(path)
    started = session.events[0]
    assert isinstance(started, SessionStarted)
    # SOURCES-more.md: "nickname Euler, role explorer, depth 1", forked from the parent thread.
    assert (started.agent, started.config["agent_nickname"], started.config["depth"]) == (
        "explorer",
        "Euler",
        1,
    )
    parent = "019d7d08-46c9-7f73-affe-4e6ca9852d56"
    assert started.config["forked_from_id"] == parent
    assert started.parent_session_id == thread_session_id(parent, None)
    spawn = next(p for p in tool_parts(session) if p.call_id == session.parent_call_id)
    assert spawn.tool == "spawn_agent"
    # The forked copy is the first ``forked_messages`` messages (compaction requests count);
    # the sub-agent's own first task is the spawn call's message.
    ordered = [e for e in session.events if isinstance(e, MessageAdded | CompactionRequested)]
    own = ordered[started.config["forked_messages"] :]
    first_task = next(
        m for m in own if isinstance(m, MessageAdded) and m.role == "user" and not m.synthetic
    )
    text = next(
        e.part.text
        for e in of_type(session.events, PartAdded)
        if isinstance(e.part, TextPart) and e.part.message_id == first_task.message_id
    )
    assert spawn.state.input["message"] == text


def test_the_desktop_rollout_links_every_spawned_agent() -> None:
    path = (
        trace_dir("codex-rollout") / "entire-graph__3705cde00da0-0__codex-desktop-0.145.0a18.jsonl"
    )
    session = import_codex(path)
    linked = [
        e
        for e in of_type(session.events, ToolStateChanged)
        if isinstance(e.state, ToolCompleted)
        and "child_session_id" in e.state.metadata.get("codex", {})
    ]
    # SOURCES-more.md: the parent side has event_msg sub_agent_activity lines (counted here on
    # the raw file), each naming the spawn call it started a sub-agent for.
    activity = sum(1 for line in path.read_bytes().splitlines() if b'"sub_agent_activity"' in line)
    assert len(linked) == activity > 0


def test_a_rollout_read_from_a_path_equals_one_read_from_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(ROLLOUT))
    assert import_codex(path).events == import_codex_lines(ROLLOUT, source=str(path)).events
