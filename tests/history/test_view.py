"""The model view: the conversion and projection rules of opencode / Kilo Code (§2-§3, §9.3,
§9.4) and the pairing guarantee."""

from __future__ import annotations

import pytest

from contextledger.config import Config
from contextledger.events import (
    AssistantFinished,
    FilePart,
    MessageError,
    ModelRef,
    ReasoningPart,
    RecordedEvent,
    StepStartPart,
    SubtaskPart,
    ToolPart,
)
from contextledger.history import History, Message
from contextledger.history._live_view import LiveView
from contextledger.history._view import (
    CLEARED_OUTPUT,
    COMPACTION_PROMPT,
    INTERRUPTED_OUTPUT,
    SUBTASK_PROMPT,
    SYNTHETIC_ATTACHMENT_PROMPT,
    ViewOptions,
    completed_summary,
    filter_compacted,
    interrupted_calls,
    model_view,
    strip_historical_media,
    tool_pairs_ok,
    trim_before_last_summary,
)
from contextledger.testing._builder import DEFAULT_MODEL, SessionBuilder
from contextledger.vocabulary._messages import (
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)

OTHER_MODEL = ModelRef(provider_id="openai", model_id="gpt-5")


def _history(b: SessionBuilder) -> History:
    return History.rebuild(
        b.session_id, [RecordedEvent(b.session_id, i, i, e) for i, e in enumerate(b.events, 1)]
    )


def _view(b: SessionBuilder, **options: object) -> list[ModelMessage]:
    view = model_view(_history(b), ViewOptions(**{"model": DEFAULT_MODEL, **options}))
    assert tool_pairs_ok(view)
    return view


def _texts(view: list[ModelMessage]) -> list[str]:
    return [c.text for m in view for c in m.content if isinstance(c, ModelText)]


def _results(view: list[ModelMessage]) -> list[ModelToolResult]:
    return [c for m in view for c in m.content if isinstance(c, ModelToolResult)]


# --- §9.3 conversion --------------------------------------------------------------------------


def test_9_3_48_tool_output_is_truncated_for_summaries() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    b.tool_result(b.tool_call(reply, "bash"), "abcdefghij")
    (result,) = _results(_view(b, tool_output_max_chars=4))
    assert result.output == "abcd\n[Tool output truncated for compaction: omitted 6 chars]"


def test_9_3_49_a_tool_error_keeps_the_call_metadata_and_sends_the_error_text() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    call = b.tool_call(reply, "bash", metadata={"anthropic": {"cache": 1}})
    b.tool_error(call, "nope")
    view = _view(b)
    (tool_call,) = [c for m in view for c in m.content if isinstance(c, ModelToolCall)]
    assert tool_call.provider_metadata == {"anthropic": {"cache": 1}}
    (result,) = _results(view)
    assert result.is_error and result.output == "nope"


def test_9_3_50_an_interrupted_call_sends_its_partial_output_as_a_result() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    b.tool_error(b.tool_call(reply, "bash"), "interrupted", partial_output="half of it")
    (result,) = _results(_view(b))
    assert not result.is_error and result.output == "half of it"


def test_9_3_51_an_assistant_message_with_an_api_error_is_dropped() -> None:
    b = SessionBuilder()
    user = b.user("go")
    reply = b.assistant(user)
    b.text(reply, "partial")
    b.finish(reply, "error", error=MessageError(name="APIError"))
    assert [m.role for m in _view(b)] == ["user"]


def test_9_3_52_an_aborted_message_is_kept_only_with_content_beyond_reasoning() -> None:
    b = SessionBuilder()
    user = b.user("go")
    kept = b.assistant(user)
    b.reasoning(kept, "thinking")
    b.text(kept, "answer so far")
    b.finish(kept, "error", error=MessageError(name="AbortedError"))
    dropped = b.assistant(user)
    b.reasoning(dropped, "only thinking")
    b.finish(dropped, "error", error=MessageError(name="AbortedError"))
    view = _view(b)
    assert [m.source_id for m in view] == [user, kept]
    assert isinstance(view[1].content[0], ModelReasoning)
    assert _texts(view)[-1] == "answer so far"


def test_9_3_54_each_step_becomes_its_own_assistant_message() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    b.text(reply, "first")
    b.part(StepStartPart(id=b.new_part_id(), message_id=reply))
    b.text(reply, "second")
    view = _view(b)
    assert [m.role for m in view] == ["user", "assistant", "assistant"]
    assert _texts(view)[1:] == ["first", "second"]


def test_9_3_55_an_assistant_message_of_only_step_starts_is_dropped() -> None:
    b = SessionBuilder()
    b.assistant(b.user("go"))
    assert [m.role for m in _view(b)] == ["user"]


def test_9_3_56_pending_and_running_calls_are_answered_as_interrupted() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    b.tool_call(reply, "bash")
    b.tool_running(b.tool_call(reply, "read"))
    view = _view(b)
    calls = [c for m in view for c in m.content if isinstance(c, ModelToolCall)]
    assert [c.tool for c in calls] == ["bash", "read"]
    assert [r.output for r in _results(view)] == [INTERRUPTED_OUTPUT] * 2
    assert all(r.is_error for r in _results(view))


def test_ignored_text_is_never_sent_and_synthetic_text_is() -> None:
    b = SessionBuilder()
    user = b.user("visible")
    b.text(user, "hidden", ignored=True)
    b.text(user, "system note", synthetic=True)
    assert _texts(_view(b)) == ["visible", "system note"]


def test_a_user_message_left_without_content_is_dropped() -> None:
    b = SessionBuilder()
    b.user("", files=[("text/plain", "notes.txt")])
    assert _view(b) == []


def test_reasoning_of_another_model_is_sent_as_text() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"), model=OTHER_MODEL)
    b.reasoning(reply, "considering", signature="sig")
    b.reasoning(reply, "   ")
    view = _view(b)
    assert view[1].content == (ModelText(text="considering"),)


def test_empty_text_next_to_signed_reasoning_becomes_a_space() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    b.reasoning(reply, "thinking", signature="sig")
    b.text(reply, "")
    assert _view(b)[1].content[-1] == ModelText(text=" ")


def test_a_cleared_output_is_sent_as_the_placeholder() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    call = b.tool_call(reply, "read")
    b.tool_result(call, "x" * 10_000, attachments=[("image/png", "a.png")])
    b.prune([call])
    (result,) = _results(_view(b))
    assert result.output == CLEARED_OUTPUT and result.attachments == ()


def test_a_soft_trimmed_output_keeps_its_head_and_tail_with_a_marker() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    call = b.tool_call(reply, "read")
    b.tool_result(call, "h" * 1536 + "m" * 5000 + "t" * 1536)
    b.trim(call)
    (result,) = _results(_view(b))
    assert result.output.startswith("h" * 1536 + "\n\n[... trimmed — kept first and last 1.5K")
    assert "of 8072 chars ...]" in result.output
    assert result.output.endswith("t" * 1536) and "mmm" not in result.output


def test_media_in_tool_results_moves_to_a_synthetic_user_message_when_unsupported() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("look"))
    b.tool_result(
        b.tool_call(reply, "screenshot"),
        "taken",
        attachments=[("image/png", "s.png"), ("application/pdf", "r.pdf")],
    )
    deepseek = ModelRef(provider_id="deepseek", model_id="deepseek-chat")
    view = model_view(_history(b), ViewOptions(model=deepseek))
    assert tool_pairs_ok(view)
    assert [m.role for m in view] == ["user", "assistant", "tool", "user"]
    assert view[-1].synthetic
    assert view[-1].content[0] == ModelText(text=SYNTHETIC_ATTACHMENT_PROMPT, synthetic=True)
    assert [c.filename for c in view[-1].content[1:] if isinstance(c, ModelFile)] == [
        "s.png",
        "r.pdf",
    ]


@pytest.mark.parametrize(
    ("provider", "model_id", "inline"),
    [
        ("anthropic", "claude-sonnet-4", ["s.png", "r.pdf"]),
        ("amazon-bedrock", "claude", ["s.png"]),
        ("google", "gemini-3-pro", ["s.png", "r.pdf"]),
        ("google", "gemini-2.5-pro", []),
    ],
)
def test_media_in_tool_results_follows_the_providers_support(
    provider: str, model_id: str, inline: list[str]
) -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("look"))
    b.tool_result(
        b.tool_call(reply, "shot"),
        "ok",
        attachments=[("image/png", "s.png"), ("application/pdf", "r.pdf")],
    )
    view = model_view(
        _history(b), ViewOptions(model=ModelRef(provider_id=provider, model_id=model_id))
    )
    (result,) = _results(view)
    assert [a.filename for a in result.attachments] == inline


def test_strip_media_replaces_user_media_with_placeholders() -> None:
    b = SessionBuilder()
    b.user("see", files=[("image/png", "cat.png"), ("image/jpeg", None)])
    assert _texts(_view(b, strip_media=True)) == [
        "see",
        "[Attached image/png: cat.png]",
        "[Attached image/jpeg: file]",
    ]


def test_each_user_message_keeps_its_captured_environment() -> None:
    b = SessionBuilder()
    first = b.user("one", environment="<env>1</env>")
    b.user("two", environment="<env>2</env>")
    each = _view(b)
    assert _texts(each) == ["one", "<env>1</env>", "two", "<env>2</env>"]
    latest = _view(b, environment="latest")
    assert _texts(latest) == ["one", "two", "<env>2</env>"]
    assert each[0].source_id == first


def test_the_latest_environment_stays_on_the_turn_its_synthetic_messages_arrive_in() -> None:
    """An attachment or hook output the client sent in the turn is a user message too, but
    the turn's block stays on the message the person typed, in the full view and the live
    one alike."""
    b = SessionBuilder()
    b.user("one", environment="<env>1</env>")
    typed = b.user("two", environment="<env>2</env>")
    b.assistant(typed)
    b.user("[hook] tests pass", synthetic=True)
    latest = _view(b, environment="latest")
    assert _texts(latest) == ["one", "two", "<env>2</env>", "[hook] tests pass"]
    options = ViewOptions(model=DEFAULT_MODEL, environment="latest")
    assert list(LiveView(options).update(_history(b))) == latest


# --- §3 projection and §9.4 history trims --------------------------------------------------------


def test_a_compaction_without_a_tail_hides_everything_before_it() -> None:
    b = SessionBuilder()
    b.user("old question")
    b.compact("## Goal\nsummary one")
    b.user("new question")
    assert _texts(_view(b)) == [COMPACTION_PROMPT, "## Goal\nsummary one", "new question"]


def test_9_2_24_the_kept_tail_follows_the_summary() -> None:
    b = SessionBuilder()
    b.user("older context")
    tail = b.user("keep this turn")
    request = b.request_compaction()
    summary = b.summary(request, "the summary")
    b.complete_compaction(request, summary, tail)
    b.user("continue")
    view = _view(b)
    assert [m.source_id for m in view] == [request, summary, tail, view[-1].source_id]
    assert "older context" not in _texts(view)


def test_9_2_33_a_second_compaction_keeps_only_what_follows_its_tail() -> None:
    b = SessionBuilder()
    b.user("u1")
    b.user("u2")
    u3 = b.user("u3")
    b.compact("first", tail_start_id=u3)
    u4 = b.user("u4")
    b.compact("second", tail_start_id=u3)
    view = _view(b)
    texts = _texts(view)
    assert "u1" not in texts and "u2" not in texts and "first" not in texts
    assert texts == [COMPACTION_PROMPT, "second", "u3", "u4"]
    assert [m.source_id for m in view][2:] == [u3, u4]


def test_a_rolled_back_compaction_leaves_the_view_as_it_was() -> None:
    b = SessionBuilder()
    b.user("u1")
    before = _view(b)
    request = b.request_compaction()
    b.summary(request, "bad summary")
    b.roll_back(request, "repetitive")
    assert _view(b) == before


def test_a_compaction_in_progress_is_not_part_of_the_view() -> None:
    b = SessionBuilder()
    b.user("u1")
    before = _view(b)
    b.request_compaction()
    assert _view(b) == before


def test_9_4_61_a_completed_summary_is_finished_without_error() -> None:
    b = SessionBuilder()
    request = b.request_compaction()
    summary = b.summary(request, "s")
    errored = b.assistant(request, summary=True)
    b.finish(errored, "error", error=MessageError(name="APIError"))
    unfinished = b.assistant(request, summary=True)
    h = _history(b)
    assert completed_summary(h.message(summary))
    assert not completed_summary(h.message(errored))
    assert not completed_summary(h.message(unfinished))


def test_9_4_62_to_67_trim_before_last_summary() -> None:
    b = SessionBuilder()
    early_reply = b.assistant(b.user("early"))
    b.finish(early_reply)
    status = b.user("status?")
    manual = b.assistant(status, summary=True)
    b.text(manual, "summary of it")
    b.finish(manual)
    following = b.user("next")
    messages = _history(b).messages
    trimmed = trim_before_last_summary(messages)
    assert [m.id for m in trimmed] == [status, manual, following]
    assert trim_before_last_summary(trimmed) is trimmed  # idempotent, parent now first
    without = [m for m in messages if not m.summary]
    assert trim_before_last_summary(without) is without
    orphan = [m for m in messages if m.id != status]
    assert trim_before_last_summary(orphan) is orphan  # parent missing: unchanged


def test_9_4_68_to_70_historical_media_becomes_placeholders() -> None:
    b = SessionBuilder()
    b.user(
        "look",
        files=[
            ("image/png", "screen.png"),
            ("image/png", None),
            ("application/pdf", "brief.pdf"),
            ("text/plain", "n.txt"),
        ],
    )
    b.user("now this", files=[("image/png", "current.png")])
    messages = _history(b).messages
    stripped = strip_historical_media(messages)
    first = stripped[0]
    texts = [getattr(p, "text", None) for p in first.parts]
    assert "[Attached image/png: screen.png]" in texts
    assert "[Attached image/png: file]" in texts
    assert "[Attached application/pdf: brief.pdf]" in texts
    assert any(getattr(p, "mime", None) == "text/plain" for p in first.parts)
    assert stripped[1] is messages[1]  # 9.4#71: the last user message is untouched
    assert messages[0].parts[1].__struct_config__.tag == "file"  # 9.4#76: input not mutated


def test_9_4_73_completed_tools_lose_only_media_attachments() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    call = b.tool_call(reply, "read")
    b.tool_result(
        call,
        "output",
        attachments=[("image/png", "a.png"), ("text/plain", "t.txt"), ("application/pdf", "p.pdf")],
    )
    b.user("next")
    stripped = strip_historical_media(_history(b).messages)
    part = next(p for p in stripped[1].parts if isinstance(p, ToolPart))
    assert [a.filename for a in part.state.attachments] == ["t.txt"]  # type: ignore[union-attr]
    assert part.state.output == "output"  # type: ignore[union-attr]


def test_9_4_75_with_one_user_message_nothing_is_stripped() -> None:
    b = SessionBuilder()
    b.user("look", files=[("image/png", "a.png")])
    messages = _history(b).messages
    assert strip_historical_media(messages) is messages


def test_9_4_77_a_synthetic_only_user_message_does_not_move_the_cutoff() -> None:
    b = SessionBuilder()
    b.user("older", files=[("image/png", "old.png")])
    b.user("real", files=[("image/png", "keep.png")])
    synthetic = b.user("", synthetic=True)
    b.text(synthetic, "Summarize the task tool output", synthetic=True)
    messages = _history(b).messages
    stripped = strip_historical_media(messages)
    assert stripped[1] is messages[1] and stripped[2] is messages[2]
    assert stripped[0] is not messages[0]


def test_historical_media_is_stripped_in_the_view_once_a_summary_exists() -> None:
    b = SessionBuilder()
    tail = b.user("with image", files=[("image/png", "old.png")])
    b.compact("summary", tail_start_id=tail)
    b.user("now")
    assert "[Attached image/png: old.png]" in _texts(_view(b))


def test_filter_compacted_is_a_no_op_without_compactions() -> None:
    b = SessionBuilder()
    b.user("a")
    b.user("b")
    messages = _history(b).messages
    assert filter_compacted(messages) == messages


def test_an_agent_slice_sees_only_its_own_messages() -> None:
    b = SessionBuilder()
    b.user("main task")
    b.user("explore task", agent_id="explore")
    assert _texts(_view(b, agent_id="explore")) == ["explore task"]


def test_by_default_media_is_stripped_only_before_the_newest_compaction() -> None:
    b = SessionBuilder()
    tail = b.user("old", files=[("image/png", "old.png")])
    b.compact("summary", tail_start_id=tail)
    b.user("new", files=[("image/png", "new.png")])
    b.user("newer")
    view = _view(b)
    assert "[Attached image/png: old.png]" in _texts(view)
    assert [c.filename for m in view for c in m.content if isinstance(c, ModelFile)] == ["new.png"]
    kilo = _view(b, historical_media="latest-user")
    assert not [c for m in kilo for c in m.content if isinstance(c, ModelFile)]


def test_kilo_s_cut_off_is_the_last_message_a_person_wrote_not_a_synthetic_one() -> None:
    """Media the user has just attached stays when a synthetic message (an attachment the
    client sent, a hook's output) follows it in the turn: it is no newer turn."""
    b = SessionBuilder()
    b.user("old", files=[("image/png", "old.png")])
    b.compact("summary")
    b.user("look at this", files=[("image/png", "new.png")])
    b.user("[edited_text_file] src/a.py", synthetic=True)
    options = ViewOptions(model=DEFAULT_MODEL, historical_media="latest-user")
    view = _view(b, historical_media="latest-user")
    assert [c.filename for m in view for c in m.content if isinstance(c, ModelFile)] == ["new.png"]
    assert list(LiveView(options).update(_history(b))) == view


def test_calls_left_without_a_result_are_answered_once_by_an_event() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    done = b.tool_call(reply, "read")
    b.tool_result(done, "ok")
    left = b.tool_call(reply, "bash")
    b.tool_running(b.tool_call(reply, "grep"))
    b.finish(reply, "error", error=MessageError(name="AbortedError"))
    history = _history(b)
    events = interrupted_calls(history, time_ms=b.clock_ms)
    assert len(events) == 2 and events[0].part_id == left
    history.validate(events)
    for i, event in enumerate(events, len(b.events) + 1):
        history.apply(RecordedEvent(b.session_id, i, i, event))
    assert interrupted_calls(history, time_ms=b.clock_ms) == []
    results = [r for r in _results(model_view(history)) if r.is_error]
    assert [r.output for r in results] == [INTERRUPTED_OUTPUT] * 2


def test_calls_of_an_unfinished_message_are_still_running() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    b.tool_call(reply, "bash")
    assert interrupted_calls(_history(b), time_ms=0) == []


def test_9_3_53_reasoning_metadata_is_kept_for_the_same_model() -> None:
    b = SessionBuilder(model=ModelRef(provider_id="openrouter", model_id="x/y"))
    reply = b.assistant(b.user("go"))
    details = {"openrouter": {"reasoning_details": [{"type": "reasoning.text", "text": "t"}]}}
    b.part(ReasoningPart(id=b.new_part_id(), message_id=reply, text="t", metadata=details))
    view = model_view(_history(b), ViewOptions(model=b.model))
    assert view[1].content[0] == ModelReasoning(text="t", provider_metadata=details)


def test_a_long_tool_output_is_cut_with_a_paging_hint_and_kept_whole_in_the_log() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    call = b.tool_call(reply, "bash")
    full = "".join(f"line {i}\n" for i in range(5000))
    b.tool_result(call, full)
    (result,) = _results(_view(b))
    assert result.output.startswith("line 0\nline 1\n")
    assert "line 4999" not in result.output
    assert f'read_tool_output(part_id="{call}"' in result.output
    part = _history(b).part(call)
    assert isinstance(part, ToolPart) and part.state.output == full  # type: ignore[union-attr]
    (whole,) = _results(_view(b, tool_output=None))
    assert whole.output == full


def test_view_options_follow_the_config() -> None:
    config = Config.from_dict({"tool_output": {"max_lines": 10, "direction": "tail"}})
    options = ViewOptions.from_config(config, DEFAULT_MODEL)
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    b.tool_result(b.tool_call(reply, "bash"), "".join(f"{i}\n" for i in range(100)))
    (result,) = _results(model_view(_history(b), options))
    assert result.output.endswith("99\n") and "\n0\n" not in result.output


def test_subtask_parts_are_sent_as_their_fixed_text() -> None:
    b = SessionBuilder()
    user = b.user("")
    b.part(SubtaskPart(id=b.new_part_id(), message_id=user, prompt="explore", agent="explore"))
    assert _texts(_view(b)) == [SUBTASK_PROMPT]


# --- §9.4 Kilo history-trim tests not covered above ----------------------------------------------


def test_9_4_61_no_messages_have_no_completed_summary() -> None:
    assert not any(completed_summary(m) for m in [])
    assert trim_before_last_summary([]) == []
    assert model_view(History("ses_test")) == []
    # Without a completed summary Kilo's maybeStripHistoricalMedia strips nothing.
    b = SessionBuilder()
    b.user("look", files=[("image/png", "old.png")])
    request = b.request_compaction()
    errored = b.assistant(request, summary=True)
    b.finish(errored, "error", error=MessageError(name="APIError"))
    b.user("now")
    view = model_view(_history(b), ViewOptions(historical_media="latest-user"))
    assert [c.filename for m in view for c in m.content if isinstance(c, ModelFile)] == ["old.png"]


def test_9_4_63_a_manual_summary_of_a_plain_user_message_trims_before_that_message() -> None:
    b = SessionBuilder()
    early = b.user("early")
    reply = b.assistant(early)
    b.text(reply, "reply")
    b.finish(reply)
    status = b.user("status?")
    summary = b.assistant(status, summary=True)
    b.text(summary, "## Goal\nwhere we are")
    b.finish(summary)
    following = b.user("next")
    messages = _history(b).messages
    assert filter_compacted(messages) == messages  # no compaction part: nothing filtered
    assert [m.id for m in trim_before_last_summary(messages)] == [status, summary, following]
    view = _view(b)
    assert [m.source_id for m in view] == [status, summary, following]
    assert _texts(view) == ["status?", "## Goal\nwhere we are", "next"]


def test_9_4_64_with_two_valid_summaries_the_newest_one_trims() -> None:
    b = SessionBuilder()
    u1 = b.user("u1")
    s1 = b.assistant(u1, summary=True)
    b.text(s1, "s1")
    b.finish(s1)
    b.user("u2")
    u3 = b.user("u3")
    s3 = b.assistant(u3, summary=True)
    b.text(s3, "s3")
    b.finish(s3)
    u4 = b.user("u4")
    messages = _history(b).messages
    assert [m.id for m in trim_before_last_summary(messages)] == [u3, s3, u4]
    assert _texts(_view(b)) == ["u3", "s3", "u4"]


def test_9_4_65_errored_and_unfinished_newer_summaries_do_not_trim() -> None:
    b = SessionBuilder()
    u1 = b.user("u1")
    valid = b.assistant(u1, summary=True)
    b.text(valid, "valid")
    b.finish(valid)
    u2 = b.user("u2")
    errored = b.assistant(u2, summary=True)
    b.text(errored, "errored")
    b.finish(errored, "error", error=MessageError(name="APIError"))
    u3 = b.user("u3")
    unfinished = b.assistant(u3, summary=True)
    b.text(unfinished, "unfinished")
    b.user("u4")
    messages = _history(b).messages
    assert messages[0].id == u1  # the valid summary's parent is first
    assert trim_before_last_summary(messages) is messages


def test_9_4_72_text_and_directory_file_parts_are_not_stripped() -> None:
    b = SessionBuilder()
    expanded = b.user("read these", files=[("text/plain", "n.txt")])
    b.part(
        FilePart(
            id=b.new_part_id(),
            message_id=expanded,
            mime="application/x-directory",
            url="file:///src",
            filename="src",
        )
    )
    mixed = b.user(
        "and these",
        files=[("text/plain", "m.txt"), ("image/png", "i.png"), ("application/x-directory", "d")],
    )
    b.user("now")
    messages = _history(b).messages
    stripped = strip_historical_media(messages)
    assert stripped[0] is messages[0]  # nothing to strip: the same message
    assert stripped[1] is not messages[1]
    kept = [p for p in stripped[1].parts if isinstance(p, FilePart)]
    assert kept == [
        p for p in messages[1].parts if isinstance(p, FilePart) and p.mime != "image/png"
    ]
    assert [p.mime for p in kept] == ["text/plain", "application/x-directory"]
    assert "[Attached image/png: i.png]" in [getattr(p, "text", None) for p in stripped[1].parts]
    assert stripped[1].id == mixed


def test_9_4_74_errored_pending_and_running_tools_are_not_stripped() -> None:
    b = SessionBuilder()
    b.user("look", files=[("image/png", "old.png")])
    reply = b.assistant(b.user("go"))
    b.tool_error(b.tool_call(reply, "bash"), "failed")
    b.tool_error(b.tool_call(reply, "bash"), "interrupted", partial_output="half")
    b.tool_call(reply, "read")
    b.tool_running(b.tool_call(reply, "grep"))
    b.finish(reply, "error", error=MessageError(name="AbortedError"))
    b.user("now")
    messages = _history(b).messages
    stripped = strip_historical_media(messages)
    assert stripped[0] is not messages[0]  # the stripping did run before the cutoff
    assert stripped[2] is messages[2]
    tools = [p for p in stripped[2].parts if isinstance(p, ToolPart)]
    assert [type(p.state).__name__ for p in tools] == [
        "ToolErrored",
        "ToolErrored",
        "ToolPending",
        "ToolRunning",
    ]


def test_9_4_75_without_users_or_with_only_one_nothing_is_stripped() -> None:
    empty: list[Message] = []
    assert strip_historical_media(empty) is empty
    b = SessionBuilder()
    only = b.user("look", files=[("image/png", "a.png")])
    reply = b.assistant(only)
    b.tool_result(b.tool_call(reply, "shot"), "ok", attachments=[("image/png", "s.png")])
    b.finish(reply, "tool-calls")
    messages = _history(b).messages
    assert strip_historical_media(messages) is messages  # one user: the cutoff is 0
    no_users = [m for m in messages if m.role != "user"]
    assert strip_historical_media(no_users) is no_users


# --- turns that arrive while a compaction's summary is being written ----------------------------


def _compaction_with_a_late_turn(
    *, summary_first: bool, keep_tail: bool
) -> tuple[SessionBuilder, list[str]]:
    """old turn, tail turn, compaction request, a turn arriving while the summary is written
    (its summary message created before it when ``summary_first``), compaction completed;
    returns the builder and the expected view order of source ids."""
    b = SessionBuilder()
    old = b.user("old work")
    b.finish(b.assistant(old))
    tail = b.user("recent turn")
    request = b.request_compaction(parent_id=tail)
    summary = b.assistant(request, summary=True, step_start=False) if summary_first else ""
    late = b.user("arrived while summarising")
    late_reply = b.assistant(late)
    b.tool_result(b.tool_call(late_reply, "bash"), "ok")
    b.finish(late_reply, "tool-calls")
    if not summary_first:
        summary = b.assistant(request, summary=True, step_start=False)
    b.text(summary, "SUMMARY")
    b.add(AssistantFinished, message_id=summary, finish="stop")
    b.complete_compaction(request, summary, tail if keep_tail else None, "SUMMARY")
    kept = [tail] if keep_tail else []
    return b, [request, summary, *kept, late, late_reply, late_reply]


@pytest.mark.parametrize("keep_tail", [True, False])
def test_a_turn_arriving_after_the_summary_started_follows_the_summary(keep_tail: bool) -> None:
    b, expected = _compaction_with_a_late_turn(summary_first=True, keep_tail=keep_tail)
    assert [m.source_id for m in _view(b)] == expected


@pytest.mark.parametrize("keep_tail", [True, False])
def test_a_turn_arriving_before_the_summary_message_follows_the_summary(keep_tail: bool) -> None:
    b, expected = _compaction_with_a_late_turn(summary_first=False, keep_tail=keep_tail)
    assert [m.source_id for m in _view(b)] == expected


# --- stripped parts (PartsStripped) ---------------------------------------------------------------


def _file_ids(b: SessionBuilder, message_id: str) -> list[str]:
    return [p.id for p in _history(b).message(message_id).parts if isinstance(p, FilePart)]


def test_a_stripped_file_is_sent_as_its_name_or_mime_and_stripped_reasoning_not_at_all() -> None:
    b = SessionBuilder()
    user = b.user("look", files=[("image/png", "shot.png"), ("application/pdf", None)])
    reply = b.assistant(user)
    thought = b.reasoning(reply, "thinking", signature="sig")
    b.text(reply, "")
    b.text(reply, "seen")
    b.finish(reply)
    before = _view(b)
    assert ModelText(text=" ") in before[1].content
    b.strip([*_file_ids(b, user), thought])
    view = _view(b)
    assert view[0].content == (
        ModelText(text="look"),
        ModelText(text="[stripped: shot.png]", synthetic=True),
        ModelText(text="[stripped: application/pdf]", synthetic=True),
    )
    # Without its signed reasoning, the empty text is no longer needed as a space.
    assert view[1].content == (ModelText(text="seen"),)


def test_a_stripped_file_keeps_its_placeholder_when_media_is_stripped_anyway() -> None:
    b = SessionBuilder()
    old = b.user("old", files=[("image/png", "old.png"), ("image/png", "kept.png")])
    b.strip(_file_ids(b, old)[:1])
    b.compact("summary", tail_start_id=old)
    b.user("new")
    for options in ({}, {"strip_media": True}, {"historical_media": "latest-user"}):
        assert _texts(_view(b, **options))[3:5] == [
            "[stripped: old.png]",
            "[Attached image/png: kept.png]",
        ]


def test_a_stripped_part_stays_in_the_history_and_its_message_is_converted_again() -> None:
    b = SessionBuilder()
    user = b.user("look", files=[("image/png", "shot.png")])
    live = LiveView(ViewOptions(model=DEFAULT_MODEL))
    history = _history(b)
    live.update(history)
    version = history.message(user).version
    (part_id,) = _file_ids(b, user)
    b.strip([part_id])
    history.apply(RecordedEvent(b.session_id, len(b.events), len(b.events), b.events[-1]))
    message = history.message(user)
    assert message.stripped == (part_id,) and message.version == version + 1
    assert isinstance(history.part(part_id), FilePart)
    assert list(live.update(history)) == model_view(history, ViewOptions(model=DEFAULT_MODEL))
