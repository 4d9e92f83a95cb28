"""The Claude Code importer: transcript lines in, valid events out.

Each scenario is a small inline transcript shaped like Claude Code 1.0's (records checked
against ``shared/traces/claude-code-jsonl``); the last tests import every shared trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import count
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
from contextledger.events._parts import (
    FilePart,
    ModelRef,
    PromptMeasure,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    ToolPending,
    ToolSchema,
    Usage,
)
from contextledger.history import History, SessionIndex, ViewOptions, model_view, validate_events
from contextledger.importers import (
    ImportedSession,
    TraceImportError,
    first_difference,
    import_claude_code,
    import_claude_code_lines,
)
from contextledger.importers._claude_code_attachments import (
    FIXED_REASON,
    NOT_SENT_REASON,
    UNKNOWN_REASON,
)
from contextledger.policy._tokens import measure_messages, measure_part, pieces
from contextledger.providers._anthropic import AnthropicMessages
from contextledger.vocabulary._requests import Request

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "claude-code-jsonl"

#: The "API calls" figures of ``shared/traces/README.md``, by trace file prefix.
README_API_CALLS = {
    "vsla_f67ab274": 271,
    "vsla_9034225e": 229,
    "vsla_0a725fb5": 212,
    "vsla_5f8cbb78": 207,
    "vsla_d7d349f9": 90,
}

BASH = ToolSchema(name="Bash", input_schema={"type": "object"})

USAGE = {
    "input_tokens": 4,
    "cache_creation_input_tokens": 14410,
    "cache_read_input_tokens": 120,
    "output_tokens": 3,
    "service_tier": "standard",
}


class Transcript:
    """Writes Claude Code records: a clock a second per record, uuids chained by parent."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._uuids = count(1)
        self._seconds = count(0)
        self.last_uuid: str | None = None

    def record(self, kind: str, *, sidechain: bool = False, **fields: Any) -> str:
        uuid = f"uuid-{next(self._uuids):04d}"
        record = {
            "parentUuid": self.last_uuid,
            "isSidechain": sidechain,
            "userType": "external",
            "cwd": "/repo",
            "sessionId": "0a725fb5-6378-432a-9e84-9f3f49d4043d",
            "version": "1.0.53",
            "type": kind,
            "uuid": uuid,
            "timestamp": f"2025-07-20T03:51:{next(self._seconds):02d}.360Z",
            **fields,
        }
        self.lines.append(json.dumps(record))
        self.last_uuid = uuid
        return uuid

    def user(self, content: str | list[dict[str, Any]], **fields: Any) -> str:
        return self.record("user", message={"role": "user", "content": content}, **fields)

    def assistant(
        self,
        message_id: str,
        block: dict[str, Any],
        *,
        usage: dict[str, Any] | None = None,
        stop_reason: str | None = None,
        **fields: Any,
    ) -> str:
        message = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-20250514",
            "content": [block],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage or USAGE,
        }
        return self.record("assistant", message=message, requestId="req_1", **fields)

    def raw(self, line: str) -> None:
        self.lines.append(line)

    def imported(self) -> ImportedSession:
        return import_claude_code_lines(self.lines, source="fixture.jsonl")


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str = "Bash", **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


def tool_result(call_id: str, content: Any, **fields: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **fields}


E = TypeVar("E")


def of_type(events: list[Event], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


def parts(events: list[Event]) -> list[Any]:
    return [e.part for e in of_type(events, PartAdded)]


def assert_valid(imported: ImportedSession) -> None:
    for session in imported.sessions():
        validate_events(SessionIndex(session.session_id), session.events)
        recorded = (
            RecordedEvent(session.session_id, seq, seq, event)
            for seq, event in enumerate(session.events, 1)
        )
        History.rebuild(session.session_id, recorded)
        for event in session.events:
            DEFAULT_CODEC.encode(event)


def a_turn() -> Transcript:
    t = Transcript()
    t.user("list the files")
    t.assistant("msg_A", text("Let me look."))
    t.assistant("msg_A", tool_use("toolu_1", command="ls"), usage={**USAGE, "output_tokens": 208})
    return t


def an_answered_turn() -> Transcript:
    """``a_turn`` with the call's result: the reply is complete."""
    t = a_turn()
    t.user([tool_result("toolu_1", "a.py")])
    return t


# --- responses and usage ---------------------------------------------------------------------


def test_lines_of_one_response_become_one_assistant_message() -> None:
    imported = an_answered_turn().imported()
    events = imported.events
    assistants = [e for e in of_type(events, MessageAdded) if e.role == "assistant"]
    assert len(assistants) == 1
    kinds = [type(p) for p in parts(events) if p.message_id == assistants[0].message_id]
    assert kinds == [StepStartPart, TextPart, ToolPart, StepFinishPart]
    assert len(of_type(events, AssistantFinished)) == 1
    assert_valid(imported)


def test_usage_repeated_on_each_line_is_counted_once() -> None:
    imported = an_answered_turn().imported()
    expected = Usage(input=4, output=208, cache_read=120, cache_write=14410)
    assert [call.usage for call in imported.calls] == [expected]
    assert [r.usage for r in of_type(imported.events, UsageReported)] == [expected]
    assert of_type(imported.events, AssistantFinished)[0].usage == expected
    assert imported.calls[0].api_message_id == "msg_A"
    assert imported.calls[0].usage.prompt == 4 + 120 + 14410


def test_each_api_call_is_its_own_message_with_the_user_as_parent() -> None:
    t = a_turn()
    t.user([tool_result("toolu_1", "a.py")])
    t.assistant("msg_B", text("Done."), stop_reason="end_turn")
    imported = t.imported()
    messages = of_type(imported.events, MessageAdded)
    assert [m.role for m in messages] == ["user", "assistant", "assistant"]
    assert messages[1].parent_id == messages[2].parent_id == messages[0].message_id
    finishes = [e.finish for e in of_type(imported.events, AssistantFinished)]
    assert finishes == ["tool-calls", "stop"]
    assert [c.message_id for c in imported.calls] == [m.message_id for m in messages[1:]]
    assert_valid(imported)


# --- a transcript that ends inside a reply -----------------------------------------------------


def finishing(events: list[Event]) -> list[Event]:
    """The events that finish a reply: its step finish, ``AssistantFinished``, its usage."""
    finishes = [e for e in events if isinstance(e, PartAdded | AssistantFinished | UsageReported)]
    return [
        e for e in finishes if not isinstance(e, PartAdded) or isinstance(e.part, StepFinishPart)
    ]


def test_a_transcript_ending_inside_a_reply_leaves_it_open_until_it_grows() -> None:
    t = a_turn()  # text, then a tool_use written while streaming: more blocks may follow
    cut = t.imported()
    assert finishing(cut.events) == []
    # The call was made: it is counted, with the usage read so far.
    assert [(c.api_message_id, c.usage.output) for c in cut.calls] == [("msg_A", 208)]
    kinds = [type(p) for p in parts(cut.events)]
    assert kinds == [TextPart, StepStartPart, TextPart, ToolPart]
    assert_valid(cut)
    t.assistant("msg_A", tool_use("toolu_2", command="pwd"), stop_reason="tool_use")
    t.user([tool_result("toolu_1", "a.py"), tool_result("toolu_2", "/repo")])
    whole = t.imported()
    assert first_difference(cut.events, whole.events) is None  # the start of the whole
    assert len(finishing(whole.events)) == 3 and len(whole.calls) == 1
    assert sum(isinstance(p, ToolPart) for p in parts(whole.events)) == 2


def _stop_hook(t: Transcript) -> None:
    t.record("progress", data={"type": "hook_progress", "hookEvent": "Stop", "hookName": "Stop"})


def _tool_hook(t: Transcript) -> None:
    t.record("progress", data={"type": "hook_progress", "hookEvent": "PostToolUse"})


def _stop_summary(t: Transcript) -> None:
    t.record("system", subtype="stop_hook_summary", hookCount=1)


def _turn_duration(t: Transcript) -> None:
    t.record("system", subtype="turn_duration", durationMs=5000)


THINKING = {"type": "thinking", "thinking": "", "signature": "sig"}


@pytest.mark.parametrize(
    ("block", "stop_reason", "after", "complete"),
    [
        # Claude Code 2.1.150 and later write the reply's final stop_reason on every block.
        (text("Done."), "end_turn", None, True),
        (text("Cut short"), "max_tokens", None, True),
        (THINKING, "end_turn", None, False),  # the answer's text follows
        (text("Let me look."), "tool_use", None, False),  # a call follows
        (tool_use("toolu_1", command="ls"), "tool_use", None, False),  # maybe more calls
        # Older versions write no stop_reason; the notices after a turn say it ended.
        (text("Done."), None, None, False),
        (text("Done."), None, _stop_hook, True),
        (text("Done."), None, _stop_summary, True),
        (text("Done."), None, _turn_duration, True),
        (text("Done."), None, _tool_hook, False),  # a hook of a call, not of the turn's end
    ],
)
def test_a_reply_at_the_end_is_finished_when_the_transcript_says_it_is_complete(
    block: dict[str, Any], stop_reason: str | None, after: Any, complete: bool
) -> None:
    t = Transcript()
    t.user("list the files")
    t.assistant("msg_A", block, stop_reason=stop_reason)
    if after is not None:
        after(t)
    imported = t.imported()
    assert len(imported.calls) == 1
    assert [type(e) for e in finishing(imported.events)] == complete * [
        PartAdded,
        AssistantFinished,
        UsageReported,
    ]
    assert_valid(imported)


def test_a_sub_agents_last_reply_is_complete_once_its_task_has_its_result() -> None:
    t = Transcript()
    t.user("survey the code")
    t.assistant("msg_A", tool_use("toolu_task", "Task", prompt="Read src/"))
    task_uuid = t.last_uuid
    t.last_uuid = None
    t.user("Read src/", sidechain=True)
    t.assistant("msg_S", text("src/ has a.c"), sidechain=True)
    running = t.imported()
    assert [finishing(child.events) for child in running.children] == [[]]
    t.last_uuid = task_uuid
    t.user([tool_result("toolu_task", "src/ has a.c")])
    (child,) = t.imported().children
    assert len(finishing(child.events)) == 3
    assert first_difference(running.children[0].events, child.events) is None


# --- tool results ----------------------------------------------------------------------------


def test_tool_result_completes_the_call_with_its_id() -> None:
    t = a_turn()
    t.user([tool_result("toolu_1", "a.py\nb.py")])
    imported = t.imported()
    (call,) = [p for p in parts(imported.events) if isinstance(p, ToolPart)]
    assert call.call_id == "toolu_1" and call.tool == "Bash"
    (change,) = of_type(imported.events, ToolStateChanged)
    assert change.part_id == call.id and change.message_id == call.message_id
    assert isinstance(change.state, ToolCompleted)
    assert change.state.output == "a.py\nb.py"
    assert change.state.input == {"command": "ls"}
    assert_valid(imported)


def test_tool_result_marked_is_error_fails_the_call() -> None:
    t = a_turn()
    t.user([tool_result("toolu_1", "File does not exist.", is_error=True)])
    imported = t.imported()
    (change,) = of_type(imported.events, ToolStateChanged)
    assert isinstance(change.state, ToolErrored)
    assert change.state.error == "File does not exist."
    assert_valid(imported)


def test_tool_result_blocks_are_joined_and_images_attached() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
    t = a_turn()
    t.user([tool_result("toolu_1", [text("first"), image, text("second")])])
    imported = t.imported()
    (change,) = of_type(imported.events, ToolStateChanged)
    assert isinstance(change.state, ToolCompleted)
    assert change.state.output == "first\nsecond"
    (attachment,) = change.state.attachments
    assert attachment.mime == "image/png" and attachment.url == "data:image/png;base64,AA"
    assert attachment.message_id == change.message_id
    assert_valid(imported)


def test_a_call_without_result_stays_pending() -> None:
    imported = a_turn().imported()
    (call,) = [p for p in parts(imported.events) if isinstance(p, ToolPart)]
    assert isinstance(call.state, ToolPending)
    assert not of_type(imported.events, ToolStateChanged)
    assert_valid(imported)


def test_a_result_for_an_unknown_call_is_skipped_and_counted() -> None:
    t = a_turn()
    t.user([tool_result("toolu_nope", "?")])
    imported = t.imported()
    assert imported.skipped == {"orphan_tool_result": 1}
    assert_valid(imported)


# --- user text -------------------------------------------------------------------------------


def test_user_text_becomes_a_user_message_with_a_text_part() -> None:
    t = Transcript()
    uuid = t.user("fix the build")
    t.user([text("[Request interrupted by user]")])
    imported = t.imported()
    users = of_type(imported.events, MessageAdded)
    assert [m.role for m in users] == ["user", "user"]
    texts = [p for p in parts(imported.events) if isinstance(p, TextPart)]
    assert [p.text for p in texts] == ["fix the build", "[Request interrupted by user]"]
    assert texts[0].metadata == {"claude_code": {"uuid": uuid}}
    assert_valid(imported)


def test_meta_user_records_are_synthetic() -> None:
    t = Transcript()
    t.user("Caveat: The messages below were generated by the user", isMeta=True)
    imported = t.imported()
    (message,) = of_type(imported.events, MessageAdded)
    assert message.synthetic
    (part,) = parts(imported.events)
    assert isinstance(part, TextPart) and part.synthetic


def test_an_answer_after_a_meta_note_replies_to_the_users_prompt() -> None:
    """A slash command the user typed, the text it expands to (a note the CLI writes,
    ``isMeta``), the answer; then a skill the model loads mid-turn, whose instructions come
    as another note: both answers reply to the typed command."""
    t = Transcript()
    t.user("<command-name>/review-pr</command-name>")
    t.user([text("# Comprehensive PR Review\n\nRun a review.")], isMeta=True)
    t.assistant("msg_A", tool_use("toolu_1", "Skill", skill="review"), stop_reason="tool_use")
    t.user([tool_result("toolu_1", "Launching skill: review")])
    t.user([text("Base directory for this skill: /repo/.claude/skills/review")], isMeta=True)
    t.assistant("msg_B", text("The PR looks fine."), stop_reason="end_turn")
    imported = t.imported()
    messages = of_type(imported.events, MessageAdded)
    users = [m for m in messages if m.role == "user"]
    assert [m.synthetic for m in users] == [False, True, True]
    answers = [m for m in messages if m.role == "assistant"]
    assert [m.parent_id for m in answers] == [users[0].message_id] * 2
    assert_valid(imported)


def test_user_images_become_file_parts() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "B"}}
    t = Transcript()
    t.user([image, text("what is this?")])
    imported = t.imported()
    kinds = [type(p) for p in parts(imported.events)]
    assert kinds == [TextPart, FilePart]
    assert_valid(imported)


def test_ids_are_ours_monotonic_and_originals_are_kept() -> None:
    t = a_turn()
    t.user([tool_result("toolu_1", "ok")])
    t.assistant("msg_B", text("Done."))
    imported = t.imported()
    message_ids = [e.message_id for e in of_type(imported.events, MessageAdded)]
    part_ids = [p.id for p in parts(imported.events)]
    assert message_ids == sorted(message_ids) and len(set(message_ids)) == len(message_ids)
    assert part_ids == sorted(part_ids) and all(i.startswith("prt_") for i in part_ids)
    started = imported.events[0]
    assert isinstance(started, SessionStarted)
    assert started.config["source_session_id"] == "0a725fb5-6378-432a-9e84-9f3f49d4043d"
    assert imported.session_id.startswith("ses_")
    reply = [p for p in parts(imported.events) if isinstance(p, TextPart)][1]
    assert reply.metadata["claude_code"]["message_id"] == "msg_A"


# --- sub-agents, summaries, other records ------------------------------------------------------


def test_a_sidechain_becomes_a_child_session_linked_to_its_task_call() -> None:
    t = Transcript()
    t.user("survey the code")
    t.assistant("msg_A", tool_use("toolu_task", "Task", prompt="Read src/", subagent_type="x"))
    task_uuid = t.last_uuid
    t.last_uuid = None
    t.user("Read src/", sidechain=True)
    t.assistant("msg_S", tool_use("toolu_read", "Read", file_path="src/a.c"), sidechain=True)
    t.user([tool_result("toolu_read", "int main;")], sidechain=True)
    t.assistant("msg_S2", text("src/ has a.c"), sidechain=True)
    t.last_uuid = task_uuid
    t.user([tool_result("toolu_task", [text("src/ has a.c")])])
    imported = t.imported()

    (child,) = imported.children
    started = child.events[0]
    assert isinstance(started, SessionStarted)
    assert started.parent_session_id == imported.session_id != child.session_id
    assert child.parent_call_id == "toolu_task" and started.agent == "x"
    assert [c.api_message_id for c in imported.calls] == ["msg_A"]
    assert [c.api_message_id for c in child.calls] == ["msg_S", "msg_S2"]
    assert len(imported.all_calls()) == 3
    (main_result,) = of_type(imported.events, ToolStateChanged)
    assert isinstance(main_result.state, ToolCompleted)
    assert main_result.state.output == "src/ has a.c"
    assert_valid(imported)


def test_summary_records_are_skipped_counted_and_kept_aside() -> None:
    t = Transcript()
    t.raw(json.dumps({"type": "summary", "summary": "Fix the build", "leafUuid": "uuid-9"}))
    t.user("hello")
    imported = t.imported()
    assert imported.skipped == {"summary": 1}
    assert imported.summaries == ["Fix the build"]
    assert [p.text for p in parts(imported.events)] == ["hello"]
    assert_valid(imported)


def test_unknown_record_types_are_skipped_and_counted() -> None:
    t = Transcript()
    t.user("hello")
    t.record("system", content="Claude Opus 4 limit reached, now using Sonnet 4", level="warning")
    t.record("file-history-snapshot", snapshot={"files": 3})
    t.record("file-history-snapshot", message="not a message")
    imported = t.imported()
    assert imported.skipped == {"file-history-snapshot": 2, "system": 1}
    assert len(imported.events) == 3  # started, the user message, its text
    assert_valid(imported)


# --- attachments (Claude Code 2.1) -------------------------------------------------------------


def test_an_attachment_becomes_a_synthetic_user_message_of_what_it_sent() -> None:
    snippet = "12\tfunc Token() error {\n13\t\treturn nil\n14\t}"
    changed = {"type": "edited_text_file", "filename": "/repo/tm.go", "snippet": snippet}
    t = a_turn()
    t.user([tool_result("toolu_1", "a.py")])
    uuid = t.record("attachment", attachment=changed)
    t.assistant("msg_B", text("Done."), stop_reason="end_turn")
    imported = t.imported()
    users = [m for m in of_type(imported.events, MessageAdded) if m.role == "user"]
    assert [m.synthetic for m in users] == [False, True]
    (note,) = [p for p in parts(imported.events) if p.message_id == users[1].message_id]
    assert isinstance(note, TextPart) and note.synthetic
    assert note.text == f"[edited_text_file]\n/repo/tm.go\n{snippet}"
    assert note.metadata["claude_code"] == {"uuid": uuid, "attachment": "edited_text_file"}
    # The answer still replies to the user's prompt, not to the note.
    answer = of_type(imported.events, MessageAdded)[-1]
    assert answer.role == "assistant" and answer.parent_id == users[0].message_id
    assert_valid(imported)


def test_a_prompt_typed_while_the_model_worked_is_the_users_own_message() -> None:
    queued = {"type": "queued_command", "prompt": "also fix the README", "commandMode": "prompt"}
    t = a_turn()
    t.record("attachment", attachment={**queued, "origin": {"kind": "human"}})
    t.record("attachment", attachment={**queued, "commandMode": "task-notification"})
    imported = t.imported()
    users = [m for m in of_type(imported.events, MessageAdded) if m.role == "user"]
    assert [m.synthetic for m in users] == [False, False, True]
    ids = {m.message_id for m in users}
    texts = [p.text for p in parts(imported.events) if p.message_id in ids]
    typed, notified = "also fix the README", "[queued_command]\nalso fix the README"
    assert texts == ["list the files", typed, notified]
    assert_valid(imported)


@pytest.mark.parametrize(
    ("attachment", "reason"),
    [
        ({"type": "command_permissions", "allowedTools": ["Bash"]}, NOT_SENT_REASON),
        ({"type": "hook_system_message", "content": "linked"}, NOT_SENT_REASON),
        ({"type": "hook_success", "hookEvent": "Stop", "content": "ok"}, FIXED_REASON),
        ({"type": "task_reminder", "content": [], "itemCount": 0}, FIXED_REASON),
        ({"type": "auto_mode"}, FIXED_REASON),
        ({"type": "a_kind_from_the_future", "content": "x"}, UNKNOWN_REASON),
    ],
)
def test_an_attachment_that_sent_nothing_we_hold_is_left_out_with_why(
    attachment: dict[str, Any], reason: str
) -> None:
    t = Transcript()
    t.user("hello")
    t.record("attachment", attachment=attachment)
    imported = t.imported()
    assert [p.text for p in parts(imported.events)] == ["hello"]
    (left,) = imported.left_out
    assert (left.line, left.kind, left.reason) == (2, f"attachment:{attachment['type']}", reason)
    assert_valid(imported)


def test_attachments_before_the_first_prompt_do_not_take_its_place() -> None:
    t = Transcript()
    t.record("attachment", attachment={"type": "skill_listing", "content": "- review: a skill"})
    t.user("the task")
    imported = t.imported()
    (first,) = [m for m in of_type(imported.events, MessageAdded) if not m.synthetic]
    assert [p.text for p in parts(imported.events) if p.message_id == first.message_id] == [
        "the task"
    ]
    assert_valid(imported)


def test_sealed_thinking_and_attachments_are_sent_back_and_measured_as_sent() -> None:
    """What the prompt held reaches the request, and the estimate measures the request's
    content as the history's parts: Opus 4.7's thinking goes back with its text omitted and
    its signature, and is counted by the signature; an attachment is user text."""
    signature = "EqAPCmMIDhgCKkDJZUuNNeogV27oBp+qYpoE/u/qnW9lwlZHsRxf9qPJAULIpF06A7Z3"
    t = Transcript()
    t.user("fix the token refresh")
    t.assistant("msg_A", {"type": "thinking", "thinking": "", "signature": signature})
    t.assistant("msg_A", tool_use("toolu_1", command="go test ./..."))
    t.user([tool_result("toolu_1", "ok")])
    changed = {"type": "edited_text_file", "filename": "a.go", "snippet": "1\tpackage a"}
    t.record("attachment", attachment=changed)
    imported = t.imported()
    recorded = (
        RecordedEvent(imported.session_id, seq, seq, event)
        for seq, event in enumerate(imported.events, 1)
    )
    history = History.rebuild(imported.session_id, recorded)
    model = ModelRef(provider_id="anthropic", model_id="claude-opus-4-20250514")
    view = model_view(history, ViewOptions(model=model))
    request = Request(
        session_id=imported.session_id, model=model, messages=tuple(view), tools=(BASH,)
    )
    body = json.loads(AnthropicMessages().encode(request).body)
    blocks = [block for message in body["messages"] for block in message["content"]]
    assert {"type": "thinking", "thinking": "", "signature": signature} in blocks
    assert {"type": "text", "text": "[edited_text_file]\na.go\n1\tpackage a"} in blocks
    held = sum((measure_part(p) for m in history.messages for p in m.parts), PromptMeasure())
    assert measure_messages(view) == held
    assert held.text_pieces >= pieces(signature)


def test_a_repeated_record_is_imported_once() -> None:
    t = a_turn()
    t.raw(t.lines[-1])
    imported = t.imported()
    assert imported.skipped == {"duplicate_record": 1}
    assert len([p for p in parts(imported.events) if isinstance(p, ToolPart)]) == 1
    assert_valid(imported)


def test_lone_surrogates_are_replaced() -> None:
    t = Transcript()
    t.user("placeholder")
    t.lines[-1] = t.lines[-1].replace("placeholder", "party \\ud83c time")
    imported = t.imported()
    assert [p.text for p in parts(imported.events)] == ["party \ufffd time"]
    assert_valid(imported)


def test_invalid_utf8_bytes_are_replaced() -> None:
    lines = [b'{"type":"user","message":{"role":"user","content":"bad \xff byte"}}']
    imported = import_claude_code_lines(lines)
    assert [p.text for p in parts(imported.events)] == ["bad \ufffd byte"]
    assert_valid(imported)


def test_an_empty_transcript_is_an_empty_session() -> None:
    imported = import_claude_code_lines(["", "\n"])
    assert [type(e) for e in imported.events] == [SessionStarted]
    assert imported.calls == [] and imported.children == []


# --- malformed input ---------------------------------------------------------------------------


def _assistant_line(**message: Any) -> str:
    base = {"id": "msg_A", "role": "assistant", "content": [text("hi")], "usage": USAGE}
    base.update(message)
    return json.dumps({"type": "assistant", "uuid": "u", "message": base})


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("{not json", ""),
        ("[1, 2]", ""),
        ('{"uuid": "u"}', "type"),
        ('{"type": 7}', "type"),
        ('{"type": "user", "uuid": "u"}', "message"),
        ('{"type": "user", "message": {"role": "user"}}', "message.content"),
        (_assistant_line(id=None), "message.id"),
        (_assistant_line(content="hi"), "message.content"),
        (_assistant_line(content=[{"type": "text", "text": 5}]), "message.content[0].text"),
        (_assistant_line(content=[{"text": "x"}]), "message.content[0].type"),
        (_assistant_line(content=[{"type": "tool_use", "name": "Bash"}]), "message.content[0].id"),
        (_assistant_line(usage={"input_tokens": "many"}), "message.usage.input_tokens"),
        (
            json.dumps({"type": "user", "timestamp": "yesterday", "message": {"content": "x"}}),
            "timestamp",
        ),
        (
            json.dumps(
                {"type": "user", "message": {"content": [{"type": "tool_result", "content": ""}]}}
            ),
            "message.content[0].tool_use_id",
        ),
        ('{"type": "attachment", "uuid": "u"}', "attachment"),
        ('{"type": "attachment", "attachment": {"snippet": "x"}}', "attachment.type"),
        ('{"type": "attachment", "attachment": "a file"}', "attachment"),
    ],
)
def test_a_malformed_record_names_its_line_and_field(line: str, field: str) -> None:
    t = Transcript()
    t.user("fine")
    t.raw(line)
    with pytest.raises(TraceImportError) as raised:
        t.imported()
    assert raised.value.line == 2
    assert raised.value.field == field
    assert raised.value.source == "fixture.jsonl"
    assert "fixture.jsonl:2" in str(raised.value)


def test_import_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(a_turn().lines) + "\n", encoding="utf-8")
    imported = import_claude_code(path, session_id="ses_given")
    assert imported.session_id == "ses_given"
    assert all(e.session_id == "ses_given" for e in imported.events)
    assert len(imported.calls) == 1


# --- the shared traces ---------------------------------------------------------------------------


def _trace_files() -> Iterator[Path]:
    return iter(sorted(TRACES.glob("*.jsonl")))


@pytest.fixture
def traces() -> list[Path]:
    if not TRACES.is_dir():
        pytest.skip(f"shared/traces not present: {TRACES} does not exist")
    files = list(_trace_files())
    assert files, f"{TRACES} holds no .jsonl file"
    return files


def test_every_shared_trace_imports_and_validates(traces: list[Path]) -> None:
    for path in traces:
        imported = import_claude_code(path)
        assert imported.calls, path.name
        assert_valid(imported)
        for child in imported.children:
            assert child.parent_call_id is not None, path.name


def test_shared_traces_have_the_readme_api_call_counts(traces: list[Path]) -> None:
    counted = {path.name[:13]: len(import_claude_code(path).all_calls()) for path in traces}
    assert {name: counted.get(name) for name in README_API_CALLS} == README_API_CALLS


#: ``shared/traces/SOURCES-more.md``, the claude_code rows (Claude Code 2.1): API calls
#: (distinct ``message.id``) / ``tool_use`` blocks; its record count is the file's lines.
MORE: dict[str, tuple[int, int]] = {
    "context-evaluator__95cc2ca9e65d-2__cc-2.1.45.jsonl": (107, 120),
    "oh-my-posh__10906611becd-0__cc-2.1.219.jsonl": (250, 245),
    "entire-cli__d0161e0df1cb-0__cc-2.1.33.jsonl": (185, 196),
    "auth-go__c3e870840354-0__cc-2.1.150.jsonl": (139, 132),
}


def _has_content(content: str | list[dict[str, Any]]) -> bool:
    """Whether a user record's content makes a user message: text, or a media block."""
    if isinstance(content, str):
        return True
    return any(b.get("type") in ("text", "image", "document") for b in content)


@pytest.mark.parametrize("name", sorted(MORE))
def test_claude_code_2_1_sessions_have_the_documented_counts(name: str) -> None:
    folder = TRACES.parent / "claude-code-more"
    if not folder.is_dir():
        pytest.skip(f"shared/traces not present: {folder} does not exist")
    path = folder / name
    imported = import_claude_code(path)
    assert_valid(imported)
    calls, tool_uses = MORE[name]
    assert len(imported.all_calls()) == calls
    parts = [e.part for e in imported.events if isinstance(e, PartAdded)]
    assert sum(isinstance(p, ToolPart) for p in parts) == tool_uses
    # The user's own messages: user records with text or media (not isMeta), and the prompts
    # typed while the model worked, which Claude Code 2.1 writes as queued_command
    # attachments (auth-go 1, oh-my-posh 2); no other attachment is the user's.
    records = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    spoken = sum(
        r.get("type") == "user"
        and not (r.get("isMeta") or r.get("isSidechain"))
        and _has_content(r["message"]["content"])
        for r in records
    )
    queued = sum(
        r.get("attachment", {}).get("type") == "queued_command"
        and r["attachment"].get("commandMode") == "prompt"
        for r in records
    )
    users = [e for e in of_type(imported.events, MessageAdded) if e.role == "user"]
    assert sum(not u.synthetic for u in users) == spoken + queued
    # Every line is read; the 2.1 line types no event carries are listed with their line.
    lines = sum(1 for line in path.read_bytes().splitlines() if line.strip())
    assert sum(imported.read.values()) == lines
    new_types = {"progress", "attachment", "file-history-snapshot", "queue-operation"}
    assert new_types & {item.kind for item in imported.left_out}


@pytest.mark.parametrize(
    "name",
    ["auth-go__c3e870840354-0__cc-2.1.150.jsonl", "oh-my-posh__10906611becd-0__cc-2.1.219.jsonl"],
)
def test_every_attachment_of_a_2_1_session_is_imported_or_left_out_with_why(name: str) -> None:
    path = TRACES.parent / "claude-code-more" / name
    if not path.is_file():
        pytest.skip(f"shared/traces not present: {path} does not exist")
    imported = import_claude_code(path)
    records = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    sent = [r["attachment"] for r in records if r.get("type") == "attachment"]
    notes = [
        p
        for p in parts(imported.events)
        if isinstance(p, TextPart) and "attachment" in p.metadata.get("claude_code", {})
    ]
    left = [item for item in imported.left_out if item.kind.startswith("attachment:")]
    assert notes and len(notes) + len(left) == len(sent)
    # A changed file's lines, the skills on offer, a typed prompt: each is in a note,
    # character for character.
    held = "\n".join(note.text for note in notes)
    key = {"edited_text_file": "snippet", "skill_listing": "content", "queued_command": "prompt"}
    strings = [a[key[a["type"]]] for a in sent if a["type"] in key]
    assert strings and all(text in held for text in strings)
    assert_valid(imported)


def test_a_late_line_of_a_response_that_called_tools_is_imported_into_it() -> None:
    # Claude Code wrote a text block of the response after its tool call's result: the
    # block joins the closed response, and the session still passes validation.
    t = Transcript()
    t.user("hi")
    t.assistant("msg_1", {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}})
    t.user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}])
    t.assistant("msg_1", text("late text of the same response"))
    t.user("next")
    session = t.imported()
    assert session.skipped["late_assistant_line"] == 1
    validate_events(SessionIndex(session.session_id), session.events)
    texts = [
        e.part.text
        for e in session.events
        if isinstance(e, PartAdded) and isinstance(e.part, TextPart)
    ]
    assert "late text of the same response" in texts


def test_a_spawning_call_whose_prompt_is_no_text_is_imported() -> None:
    t = Transcript()
    t.user("hi")
    spawn = {"prompt": ["do", "it"], "subagent_type": "x"}
    t.assistant("msg_1", {"type": "tool_use", "id": "toolu_1", "name": "Task", "input": spawn})
    t.user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}])
    session = t.imported()
    assert [s.prompt for s in session.spawns] == [["do", "it"]]
    validate_events(SessionIndex(session.session_id), session.events)
