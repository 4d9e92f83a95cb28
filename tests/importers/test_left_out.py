"""Nothing is lost in silence: whatever an importer does not turn into events is listed in
``ImportedSession.left_out`` with its line, field and reason, and what it read is counted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextledger.events._catalogue import MessageAdded, PartAdded, ToolStateChanged
from contextledger.events._parts import FilePart, ToolCompleted
from contextledger.importers import (
    LeftOut,
    import_claude_code_lines,
    import_mini_swe_agent_data,
    import_openai_chat_data,
    import_openhands_lines,
    import_swe_agent_data,
)
from contextledger.importers._builder import ORPHAN_RESULT
from contextledger.importers._imported import derived_session_id
from tests.importers.test_openai_chat import CHAT, assert_imported, of_type, tool_parts
from tests.importers.test_openhands import RUN

USER = {"role": "user", "content": "Look at this."}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}


def _kinds(items: list[LeftOut]) -> list[tuple[int, str]]:
    return [(item.line, item.kind) for item in items]


def test_an_orphan_result_is_left_out_with_its_position() -> None:
    chat = [USER, {"role": "tool", "tool_call_id": "nope", "content": "x"}]
    session = import_openai_chat_data(chat)
    assert session.left_out == [
        LeftOut(line=2, kind="orphan_tool_result", reason=ORPHAN_RESULT, field="[1]")
    ]
    assert session.skipped == {"orphan_tool_result": 1}


def test_a_duplicate_result_and_a_result_before_its_call_are_left_out() -> None:
    result = CHAT[3]
    chat = [CHAT[1], result, CHAT[2], result, result]
    session = import_openai_chat_data(chat)
    assert_imported(session)
    assert _kinds(session.left_out) == [(2, "orphan_tool_result"), (5, "orphan_tool_result")]


def test_a_duplicate_call_id_in_one_step_is_left_out() -> None:
    call = CHAT[2]["tool_calls"][0]
    chat = [CHAT[1], {"role": "assistant", "content": None, "tool_calls": [call, call]}]
    session = import_openai_chat_data(chat)
    assert len(tool_parts(session)) == 1
    assert _kinds(session.left_out) == [(2, "duplicate_tool_call")]


def test_a_later_system_message_is_left_out_and_the_first_kept() -> None:
    chat = [CHAT[0], USER, {"role": "system", "content": "Be brief."}]
    session = import_openai_chat_data(chat)
    assert session.events[0].config["system_prompt"] == "You are helpful."  # type: ignore[union-attr]
    assert _kinds(session.left_out) == [(3, "system")]
    assert session.read == {"system": 2, "user": 1}


def test_user_media_become_file_parts_and_unknown_items_are_left_out() -> None:
    content = [{"type": "text", "text": "What is this?"}, IMAGE, {"type": "refusal", "x": 1}]
    session = import_openai_chat_data([{"role": "user", "content": content}])
    (file,) = [e.part for e in of_type(session.events, PartAdded) if isinstance(e.part, FilePart)]
    assert (file.mime, file.url) == ("image/jpeg", "data:image/jpeg;base64,AAAA")
    assert session.left_out == [
        LeftOut(
            line=1,
            kind="item:refusal",
            reason="a content item of a kind the importer does not read",
            field="[0].content[2]",
        )
    ]


def test_media_in_a_tool_result_are_attachments_and_in_an_answer_file_parts() -> None:
    result = {**CHAT[3], "content": [{"type": "text", "text": "shot"}, IMAGE]}
    answer = {"role": "assistant", "content": [{"type": "text", "text": "A cat."}, IMAGE]}
    session = import_openai_chat_data([CHAT[1], CHAT[2], result, answer])
    (done,) = of_type(session.events, ToolStateChanged)
    assert isinstance(done.state, ToolCompleted) and done.state.output == "shot"
    assert [a.url for a in done.state.attachments] == ["data:image/jpeg;base64,AAAA"]
    last = of_type(session.events, MessageAdded)[-1]
    parts = [
        e.part for e in of_type(session.events, PartAdded) if e.part.message_id == last.message_id
    ]
    assert [p.url for p in parts if isinstance(p, FilePart)] == ["data:image/jpeg;base64,AAAA"]
    assert session.left_out == []


def test_a_chat_takes_its_session_id_from_the_file() -> None:
    other = [*CHAT[:4], {"role": "assistant", "content": "Three files."}]
    first, second = import_openai_chat_data(CHAT), import_openai_chat_data(other)
    assert first.session_id != second.session_id
    assert import_openai_chat_data(CHAT).session_id == first.session_id
    named = import_openai_chat_data({"id": "chatcmpl-1", "messages": CHAT})
    assert named.session_id == derived_session_id(named.events[0].time_ms, "openai-chat:chatcmpl-1")
    assert named.source_session_id == "chatcmpl-1"


def test_claude_code_left_out_records_name_their_line_and_reason() -> None:
    records: list[dict[str, Any]] = [
        {"type": "summary", "summary": "Title", "leafUuid": "u1"},
        {"type": "user", "uuid": "u1", "timestamp": "2025-07-01T10:00:00Z",
         "message": {"role": "user", "content": [
             {"type": "text", "text": "hi"},
             {"type": "tool_result", "tool_use_id": "toolu_x", "content": "?"},
             {"type": "video", "source": {}}]}},
        {"type": "progress", "timestamp": "2025-07-01T10:00:01Z", "data": {}},
        {"type": "user", "uuid": "u1", "timestamp": "2025-07-01T10:00:02Z",
         "message": {"role": "user", "content": "again"}},
    ]  # fmt: skip
    session = import_claude_code_lines([json.dumps(r) for r in records], source="s.jsonl")
    assert [(i.line, i.kind, i.field) for i in session.left_out] == [
        (1, "summary", ""),
        (2, "orphan_tool_result", "message.content[1]"),
        (2, "block:video", "message.content[2]"),
        (3, "progress", ""),
        (4, "duplicate_record", ""),
    ]
    assert session.read == {"progress": 1, "summary": 1, "user": 2}
    assert sum(session.skipped.values()) == len(session.left_out)


def test_swe_agent_demonstrations_and_orphans_are_left_out() -> None:
    traj = {
        "history": [
            {"role": "user", "content": "demo", "is_demo": True},
            {"role": "user", "content": "Fix it"},
            {"role": "tool", "content": "x", "tool_call_ids": ["nope"]},
        ],
        "trajectory": [],
    }
    session = import_swe_agent_data(traj)
    assert _kinds(session.left_out) == [(1, "demonstration"), (3, "orphan_tool_result")]
    assert session.read == {"tool": 1, "user": 2}


def test_a_second_mini_swe_agent_system_message_is_left_out() -> None:
    messages = [{"role": "system", "content": "a"}, {"role": "system", "content": "b"}]
    session = import_mini_swe_agent_data(messages)
    assert _kinds(session.left_out) == [(2, "system")]


def test_openhands_recalls_and_unanswered_observations_name_the_run_and_event() -> None:
    (session,) = import_openhands_lines([json.dumps(RUN)], source="output.jsonl")
    assert [(i.line, i.kind, i.field) for i in session.left_out] == [
        (1, "recall", "history[2]"),
        (1, "recall", "history[3]"),
    ]
    assert session.read["action:run"] == 1


@pytest.mark.parametrize("key", ["ses-a", b"ses-a"])
def test_derived_session_ids_are_stable_and_sortable(key: str | bytes) -> None:
    first = derived_session_id(1_000, key)
    assert first == derived_session_id(1_000, "ses-a")
    assert first != derived_session_id(1_000, "ses-b")
    assert first.startswith("ses_") and derived_session_id(2_000, key) > first
