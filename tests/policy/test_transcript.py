"""Specification of ``contextledger.policy._transcript``: the head transcript (pi's
``serializeConversation``, mimo-pi.md §8-§9), the summarizer's prompts, the messages written
after a compaction (opencode-kilo.md §5.5) and MiMo Code's summary wrapper and file manifest
(mimo-pi.md §2)."""

from __future__ import annotations

from typing import Any

import pytest

from contextledger.events import RecordedEvent
from contextledger.events._catalogue import FileRange
from contextledger.events._parts import FilePart, MessageError
from contextledger.history import History, Message
from contextledger.history._view import CLEARED_OUTPUT, INTERRUPTED_OUTPUT
from contextledger.policy._templates import CONTINUATION
from contextledger.policy._transcript import (
    CONTINUE_TEXT,
    MANIFEST_INTRO,
    OVERFLOW_CONTEXT_NOTICE,
    OVERFLOW_NOTICE,
    SUMMARY_NO_TAIL,
    SUMMARY_TAIL,
    TO_END,
    chunk_prompt,
    clip,
    continue_text,
    conversation_request,
    file_manifest,
    merge_prompt,
    render_manifest,
    replay_parts,
    serialize_head,
    unwrap_summary,
    wrap_summary,
)
from contextledger.testing._builder import SessionBuilder


def _messages(b: SessionBuilder) -> list[Message]:
    history = History.rebuild(
        b.session_id, [RecordedEvent(b.session_id, i, i, e) for i, e in enumerate(b.events, 1)]
    )
    return history.messages


def _tool_turn(b: SessionBuilder, output: str) -> str:
    reply = b.assistant(b.user("run it"))
    b.tool_result(b.tool_call(reply, "bash", {"command": "make"}), output)
    b.finish(reply)
    return serialize_head(_messages(b))


# --- pi's serialisation tests ---------------------------------------------------------------


def test_pi_a_tool_result_over_2000_characters_is_cut_with_a_marker() -> None:
    text = _tool_turn(SessionBuilder(), "r" * 2_500)
    assert "[Tool result]: " + "r" * 2_000 + "\n\n[... 500 more characters truncated]" in text
    assert "r" * 2_001 not in text


def test_pi_a_short_tool_result_is_unchanged() -> None:
    assert "[Tool result]: short output" in _tool_turn(SessionBuilder(), "short output")


def test_pi_user_and_assistant_text_is_never_cut() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("u" * 10_000))
    b.text(reply, "a" * 10_000)
    b.finish(reply)
    text = serialize_head(_messages(b), tool_output_chars=10)
    assert "[User]: " + "u" * 10_000 in text
    assert "[Assistant]: " + "a" * 10_000 in text


def test_the_transcript_labels_each_kind_of_content() -> None:
    b = SessionBuilder()
    user = b.user("fix the test")
    reply = b.assistant(user)
    b.reasoning(reply, "look at the file first")
    b.text(reply, "Reading it.")
    first = b.tool_call(reply, "read", {"path": "a.py", "limit": 10})
    second = b.tool_call(reply, "grep", {"pattern": "def"})
    b.tool_result(first, "code")
    b.tool_error(second, "no matches")
    b.finish(reply, "tool-calls")
    assert serialize_head(_messages(b)) == (
        "[User]: fix the test\n\n"
        "[Assistant thinking]: look at the file first\n\n"
        "[Assistant]: Reading it.\n\n"
        '[Assistant tool calls]: read(path="a.py", limit=10); grep(pattern="def")\n\n'
        "[Tool result]: code\n\n"
        "[Tool error]: no matches"
    )


def test_the_transcript_shows_what_the_view_shows() -> None:
    b = SessionBuilder()
    user = b.user("look", files=[("image/png", "shot.png")])
    b.text(user, "never sent", ignored=True)
    reply = b.assistant(user)
    cleared = b.tool_call(reply, "bash", {"command": "ls"})
    b.tool_result(cleared, "a very long listing")
    b.tool_call(reply, "bash", {"command": "sleep 100"})
    b.finish(reply, "tool-calls")
    b.prune([cleared])
    failed = b.assistant(user)
    b.text(failed, "half an answer that failed")
    b.finish(failed, "error", error=MessageError(name="APIError", message="boom"))
    text = serialize_head(_messages(b))
    assert "[User]: look\n[Attached image/png: shot.png]" in text
    assert "never sent" not in text and "half an answer" not in text
    assert f"[Tool result]: {CLEARED_OUTPUT}" in text and "a very long listing" not in text
    assert f"[Tool error]: {INTERRUPTED_OUTPUT}" in text


def test_long_tool_arguments_are_cut_too() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("write it"))
    b.tool_result(b.tool_call(reply, "write", {"path": "a.py", "content": "c" * 50}), "ok")
    b.finish(reply)
    text = serialize_head(_messages(b), tool_output_chars=20)
    assert 'content="' + "c" * 19 + "\n\n[... 32 more characters truncated]" in text


def test_clip() -> None:
    assert clip("abcdef", 6) == "abcdef"
    assert clip("abcdef", 4) == "abcd\n\n[... 2 more characters truncated]"


# --- requests and messages around the summary -----------------------------------------------


def test_conversation_request_puts_the_transcript_before_the_prompt() -> None:
    assert conversation_request("[User]: hi", "Summarise.") == (
        "<conversation>\n[User]: hi\n</conversation>\n\nSummarise."
    )


def test_chunk_and_merge_prompts() -> None:
    assert "part 2 of 5" in chunk_prompt(2, 5)
    merged = merge_prompt(["first part", " second part\n"], CONTINUATION, "before")
    assert merged.index('<partial-summary index="1">\nfirst part\n') < merged.index(
        '<partial-summary index="2">\nsecond part\n</partial-summary>'
    )
    assert "<previous-summary>\nbefore\n</previous-summary>" in merged
    assert "## Task Overview" in merged


def test_continue_text_names_the_cause_of_an_overflow() -> None:
    assert continue_text(False, media=True) == continue_text(False, media=False) == CONTINUE_TEXT
    assert continue_text(True, media=True).startswith(OVERFLOW_NOTICE)
    assert continue_text(True, media=True).endswith(CONTINUE_TEXT)
    assert "smaller or fewer files" in OVERFLOW_NOTICE
    assert continue_text(True, media=False).startswith(OVERFLOW_CONTEXT_NOTICE)
    assert "media" not in continue_text(True, media=False)


def test_replay_parts_are_text_and_placeholders_without_the_ignored() -> None:
    b = SessionBuilder()
    user = b.user("see", files=[("image/png", "cat.png")])
    b.part(FilePart(id=b.new_part_id(), message_id=user, mime="application/pdf", url="data:,"))
    b.text(user, "hidden", ignored=True)
    b.text(user, "reminder", synthetic=True)
    (message,) = _messages(b)
    assert replay_parts(message) == (
        "see",
        "[Attached image/png: cat.png]",
        "[Attached application/pdf: file]",
        "reminder",
    )


def test_replay_parts_skip_the_compaction_part() -> None:
    b = SessionBuilder()
    b.request_compaction()
    (message,) = _messages(b)
    assert replay_parts(message) == ()


@pytest.mark.parametrize("has_tail", [True, False])
def test_mimo_the_wrapped_summary_says_what_follows_it(has_tail: bool) -> None:
    wrapped = wrap_summary("  ## Goal\nShip it.\n", "overflow", has_tail)
    lines = wrapped.splitlines()
    assert lines[0] == '<conversation-summary trigger="overflow">'
    assert lines[2] == (SUMMARY_TAIL if has_tail else SUMMARY_NO_TAIL)
    assert lines[-3:] == ["## Goal", "Ship it.", "</conversation-summary>"]
    assert unwrap_summary(wrapped) == "## Goal\nShip it."


def test_unwrap_leaves_a_plain_summary_alone() -> None:
    assert unwrap_summary("\n## Goal\nx\n") == "## Goal\nx"


# --- the file manifest ----------------------------------------------------------------------


def _calls(
    *calls: tuple[str, dict[str, Any]], failed: tuple[str, dict[str, Any]] | None = None
) -> list[Message]:
    b = SessionBuilder()
    reply = b.assistant(b.user("work"))
    for tool, tool_input in calls:
        b.tool_result(b.tool_call(reply, tool, tool_input), "ok")
    if failed is not None:
        b.tool_error(b.tool_call(reply, *failed), "not found")
    b.finish(reply, "tool-calls")
    return _messages(b)


def test_mimo_the_manifest_lists_the_last_files_read_or_written_with_their_lines() -> None:
    messages = _calls(
        ("Read", {"file_path": "/src/a.py", "offset": 10, "limit": 20}),
        ("read_file", {"path": "/src/a.py", "start_line": 25, "end_line": 40}),
        ("view", {"path": "/src/a.py", "offset": 100}),
        ("str_replace_based_edit_tool", {"command": "view", "path": "b.py", "view_range": [3, -1]}),
        ("mcp__fs__read_file", {"filePath": "c.py"}),
        ("Edit", {"file_path": "d.py", "old_string": "x", "new_string": "y"}),
        ("read", {"filePath": "d.py", "offset": 1, "limit": 5}),
        failed=("read", {"path": "missing.py"}),
    )
    assert file_manifest(messages, 10) == (
        FileRange(path="d.py", action="write"),
        FileRange(path="c.py", action="read"),
        FileRange(path="b.py", action="read", ranges=((3, TO_END),)),
        FileRange(path="/src/a.py", action="read", ranges=((10, 40), (100, TO_END))),
    )
    assert [f.path for f in file_manifest(messages, 2)] == ["d.py", "c.py"]


def test_the_manifest_reads_the_files_of_a_patch() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: src/x.py\n@@\n-a\n+b\n"
        "*** Add File: src/y.py\n+new\n*** End Patch"
    )
    diff = "--- a/z.py\n+++ b/z.py\n@@ -1 +1 @@\n-a\n+b\n--- a/gone.py\n+++ /dev/null\n"
    messages = _calls(("apply_patch", {"patch": diff}), ("apply_patch", {"input": patch}))
    assert [(f.path, f.action) for f in file_manifest(messages, 5)] == [
        ("src/x.py", "write"),
        ("src/y.py", "write"),
        ("z.py", "write"),
    ]


def test_the_manifest_ignores_other_tools_and_adds_the_previous_ones() -> None:
    messages = _calls(("bash", {"command": "cat a.py"}), ("write", {"path": "new.py"}))
    previous = (FileRange(path="new.py", action="read"), FileRange(path="old.py", action="read"))
    assert file_manifest(messages, 5, previous) == (
        FileRange(path="new.py", action="write"),
        FileRange(path="old.py", action="read"),
    )


def test_render_manifest_reminds_to_read_again_before_editing() -> None:
    text = render_manifest(
        (
            FileRange(path="a.py", action="write"),
            FileRange(path="b.py", action="read"),
            FileRange(path="c.py", action="read", ranges=((1, 20), (40, TO_END))),
        )
    )
    assert text == (
        f"{MANIFEST_INTRO}\n- a.py: written\n- b.py: read in full\n- c.py: read, lines 1-20, 40-end"
    )
    assert "Read a file again before you edit it" in MANIFEST_INTRO
    assert render_manifest(()) == ""
