"""Events that may not be appended are rejected with a reason, naming their batch index."""

from __future__ import annotations

import msgspec
import pytest

from contextledger.events import (
    AssistantFinished,
    CompactionCompleted,
    CompactionProjection,
    CompactionRolledBack,
    EnvironmentCaptured,
    Event,
    InvalidEvent,
    MemoryPinned,
    MessageAdded,
    PartAdded,
    PartUpdated,
    PrefixAdvanced,
    PrefixProfile,
    PrefixRotated,
    SessionStarted,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolCompleted,
    ToolOutputCleared,
    ToolOutputTrimmed,
    ToolPart,
    ToolPending,
    ToolRunning,
    ToolStateChanged,
    Usage,
    UsageReported,
)
from contextledger.history import SessionIndex, validate_events
from contextledger.testing._builder import SessionBuilder


def _index(b: SessionBuilder) -> SessionIndex:
    index = SessionIndex(b.session_id)
    validate_events(index, b.events)
    for event in b.events:
        index.note(event)
    return index


def _reason(b: SessionBuilder, *events: Event) -> str:
    with pytest.raises(InvalidEvent) as caught:
        validate_events(_index(b), events)
    return caught.value.reason


def _session_with_call() -> tuple[SessionBuilder, str, str]:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    return b, reply, b.tool_call(reply, "bash")


def test_the_first_event_must_start_the_session() -> None:
    b = SessionBuilder(started=False)
    event = MessageAdded(session_id=b.session_id, message_id="msg_1", role="user")
    assert "has not started" in _reason(b, event)


def test_a_session_starts_once() -> None:
    assert "started already" in _reason(SessionBuilder(), SessionStarted(session_id="ses_test"))


def test_an_event_of_another_session_is_rejected() -> None:
    event = MessageAdded(session_id="ses_other", message_id="msg_9", role="user")
    assert "belongs to session" in _reason(SessionBuilder(), event)


def test_a_message_id_that_goes_backwards_is_rejected() -> None:
    b = SessionBuilder()
    first = b.user("one")
    b.user("two")
    event = MessageAdded(session_id=b.session_id, message_id=first, role="user")
    assert "does not follow" in _reason(b, event)


def test_a_part_id_that_goes_backwards_is_rejected() -> None:
    b, reply, call = _session_with_call()
    part = TextPart(id=call, message_id=reply, text="dup")
    assert "does not follow" in _reason(b, PartAdded(session_id=b.session_id, part=part))


def test_a_part_of_an_unknown_message_is_rejected() -> None:
    b = SessionBuilder()
    part = TextPart(id="prt_ffffffffffffffffff", message_id="msg_missing", text="x")
    assert "does not exist" in _reason(b, PartAdded(session_id=b.session_id, part=part))


def test_a_tool_result_for_an_unknown_call_is_rejected() -> None:
    b, reply, _ = _session_with_call()
    event = ToolStateChanged(
        session_id=b.session_id, message_id=reply, part_id="prt_unknown", state=ToolCompleted()
    )
    assert "does not exist" in _reason(b, event)


def test_a_tool_result_on_the_wrong_message_is_rejected() -> None:
    b, _, call = _session_with_call()
    other = b.user("other")
    event = ToolStateChanged(
        session_id=b.session_id, message_id=other, part_id=call, state=ToolCompleted()
    )
    assert "belongs to message" in _reason(b, event)


def test_a_completed_call_cannot_complete_again() -> None:
    b, reply, call = _session_with_call()
    b.tool_result(call, "done")
    event = ToolStateChanged(
        session_id=b.session_id, message_id=reply, part_id=call, state=ToolRunning()
    )
    assert "cannot go from completed to running" in _reason(b, event)


def test_a_reused_call_id_is_rejected() -> None:
    b, reply, _ = _session_with_call()
    part = ToolPart(
        id="prt_ffffffffffffffffff",
        message_id=reply,
        call_id="call_0001",
        tool="bash",
        state=ToolPending(),
    )
    assert "used already" in _reason(b, PartAdded(session_id=b.session_id, part=part))


def test_only_completed_outputs_can_be_cleared_or_trimmed() -> None:
    b, _, call = _session_with_call()
    clear = ToolOutputCleared(session_id=b.session_id, part_ids=(call,), reason="normal")
    trim = ToolOutputTrimmed(session_id=b.session_id, part_id=call, head_chars=1, tail_chars=1)
    assert "has no output" in _reason(b, clear)
    assert "has no output" in _reason(b, trim)


def test_an_output_is_cleared_once() -> None:
    b, _, call = _session_with_call()
    b.tool_result(call, "out")
    b.prune([call])
    again = ToolOutputCleared(session_id=b.session_id, part_ids=(call,), reason="normal")
    assert "cleared already" in _reason(b, again)


def test_a_text_part_update_must_keep_its_kind() -> None:
    b, reply, call = _session_with_call()
    event = PartUpdated(session_id=b.session_id, part=TextPart(id=call, message_id=reply, text="x"))
    assert "cannot change its kind" in _reason(b, event)


def test_an_assistant_message_finishes_once() -> None:
    b, reply, _ = _session_with_call()
    b.finish(reply)
    again = AssistantFinished(session_id=b.session_id, message_id=reply, finish="stop")
    assert "finished already" in _reason(b, again)


def test_a_compaction_completes_only_with_its_own_summary() -> None:
    b = SessionBuilder()
    user = b.user("one")
    request = b.request_compaction()
    stray = b.assistant(user, summary=True)
    b.finish(stray)
    event = CompactionCompleted(
        session_id=b.session_id,
        request_message_id=request,
        summary_message_id=stray,
        tail_start_id=None,
        projection=CompactionProjection(summary="s"),
    )
    assert "does not answer the request" in _reason(b, event)


def test_a_compaction_tail_must_start_before_the_request() -> None:
    b = SessionBuilder()
    b.user("one")
    request = b.request_compaction()
    summary = b.summary(request, "s")
    later = b.user("later")
    event = CompactionCompleted(
        session_id=b.session_id,
        request_message_id=request,
        summary_message_id=summary,
        tail_start_id=later,
        projection=CompactionProjection(summary="s"),
    )
    assert "not a message before the request" in _reason(b, event)


def test_a_closed_compaction_cannot_be_rolled_back() -> None:
    b = SessionBuilder()
    b.user("one")
    request = b.compact("s")
    rollback = CompactionRolledBack(
        session_id=b.session_id, request_message_id=request, reason="empty"
    )
    assert "no open compaction request" in _reason(b, rollback)


def test_session_level_events_need_their_targets() -> None:
    b, reply, _ = _session_with_call()
    sid = b.session_id
    assert "user message" in _reason(
        b, EnvironmentCaptured(session_id=sid, user_message_id=reply, text="env")
    )
    assert "not the pinned one" in _reason(
        b, PrefixAdvanced(session_id=sid, key="k", message_id=reply)
    )
    missing = UsageReported(session_id=sid, message_id="msg_missing", usage=Usage())
    assert "does not exist" in _reason(b, missing)
    b.add(MemoryPinned, text="m")
    assert "pinned once" in _reason(b, MemoryPinned(session_id=sid, text="again"))


def test_the_rejected_index_is_the_first_bad_event_of_the_batch() -> None:
    b = SessionBuilder()
    b.user("one")
    ok = MessageAdded(session_id=b.session_id, message_id="msg_ffffffffffffff0000", role="user")
    bad = MessageAdded(session_id=b.session_id, message_id="msg_ffffffffffffff0000", role="user")
    with pytest.raises(InvalidEvent) as caught:
        validate_events(_index(b), [ok, bad])
    assert caught.value.index == 1


def test_validation_does_not_change_the_index() -> None:
    b = SessionBuilder()
    index = _index(b)
    event = MessageAdded(session_id=b.session_id, message_id="msg_ffffffffffffff0000", role="user")
    validate_events(index, [event])
    validate_events(index, [event])  # still acceptable: the first call changed nothing


def test_a_compaction_completes_only_once_its_summary_finished() -> None:
    b = SessionBuilder()
    b.user("one")
    request = b.request_compaction()
    unfinished = b.assistant(request, summary=True)
    event = CompactionCompleted(
        session_id=b.session_id,
        request_message_id=request,
        summary_message_id=unfinished,
        tail_start_id=None,
        projection=CompactionProjection(summary="s"),
    )
    assert "has not finished" in _reason(b, event)


def test_an_environment_is_captured_once_per_user_message() -> None:
    b = SessionBuilder()
    user = b.user("hi", environment="<env/>")
    again = EnvironmentCaptured(session_id=b.session_id, user_message_id=user, text="<env2/>")
    assert "captured already" in _reason(b, again)


def test_a_prefix_is_rotated_only_after_one_was_pinned() -> None:
    b = SessionBuilder()
    profile = PrefixProfile(
        provider_id="p", model_id="m", agent="main", system_mode="d", system=(), tools=()
    )
    rotate = PrefixRotated(session_id=b.session_id, key="k", profile=profile, reason="tools")
    assert "no prefix is pinned" in _reason(b, rotate)


def test_a_tool_call_belongs_to_an_assistant_message() -> None:
    b = SessionBuilder()
    user = b.user("hi")
    part = ToolPart(
        id="prt_ffffffffffffffffff", message_id=user, call_id="c", tool="bash", state=ToolPending()
    )
    assert "belong to assistant messages" in _reason(
        b, PartAdded(session_id=b.session_id, part=part)
    )


def test_a_tool_call_needs_a_call_id_and_a_tool_name() -> None:
    b, reply, _ = _session_with_call()
    part = ToolPart(
        id="prt_ffffffffffffffffff", message_id=reply, call_id="", tool="bash", state=ToolPending()
    )
    assert "needs a call id" in _reason(b, PartAdded(session_id=b.session_id, part=part))


def test_usage_counts_must_not_be_negative() -> None:
    b, reply, _ = _session_with_call()
    finished = AssistantFinished(
        session_id=b.session_id, message_id=reply, finish="stop", usage=Usage(input=-1)
    )
    assert "must not be negative" in _reason(b, finished)
    report = UsageReported(session_id=b.session_id, message_id=reply, usage=Usage(output=-5))
    assert "must not be negative" in _reason(b, report)


@pytest.mark.parametrize("cost", [float("nan"), float("inf"), -0.01])
def test_a_cost_must_be_a_finite_amount_not_negative(cost: float) -> None:
    b, reply, _ = _session_with_call()
    finished = AssistantFinished(
        session_id=b.session_id, message_id=reply, finish="stop", cost=cost
    )
    assert "cost must be a finite amount" in _reason(b, finished)
    step = StepFinishPart(id=b.new_part_id(), message_id=reply, reason="stop", cost=cost)
    assert "cost must be a finite amount" in _reason(
        b, PartAdded(session_id=b.session_id, part=step)
    )
    b.part(msgspec.structs.replace(step, cost=0.25))
    changed = msgspec.structs.replace(step, cost=cost)
    assert "cost must be a finite amount" in _reason(
        b, PartUpdated(session_id=b.session_id, part=changed)
    )


def test_a_finished_message_takes_no_more_parts() -> None:
    b, reply, _ = _session_with_call()
    b.finish(reply, "stop")
    call = ToolPart(
        id="prt_ffffffffffffffffff",
        message_id=reply,
        call_id="c2",
        tool="bash",
        state=ToolPending(),
    )
    text = TextPart(id="prt_ffffffffffffffffff", message_id=reply, text="late")
    for part in (call, text):
        assert "has finished" in _reason(b, PartAdded(session_id=b.session_id, part=part))


def test_a_response_that_called_tools_takes_its_later_blocks_only() -> None:
    """Claude Code writes a response's blocks as records of their own, its tool calls each
    followed by its result: its importer adds the later blocks (calls, text) after the step
    finished with tool-calls, but no new step."""
    b, reply, _ = _session_with_call()
    b.finish(reply, "tool-calls")
    call = ToolPart(
        id="prt_ffffffffffffffffff",
        message_id=reply,
        call_id="c2",
        tool="bash",
        state=ToolPending(),
    )
    text = TextPart(id="prt_ffffffffffffffffff", message_id=reply, text="late")
    for part in (call, text):
        validate_events(_index(b), [PartAdded(session_id=b.session_id, part=part)])
    step = StepStartPart(id="prt_ffffffffffffffffff", message_id=reply)
    assert "has finished" in _reason(b, PartAdded(session_id=b.session_id, part=step))


def test_an_assistant_message_answers_a_user_message() -> None:
    b, reply, _ = _session_with_call()
    answer = MessageAdded(
        session_id=b.session_id, message_id="msg_ffffffffffffffffff", role="assistant"
    )
    reason = _reason(b, msgspec.structs.replace(answer, parent_id=reply))
    assert "answers a user message" in reason
    request = b.request_compaction()
    validate_events(_index(b), [msgspec.structs.replace(answer, parent_id=request, summary=True)])


def test_an_assistant_message_answers_its_own_agents_user_message() -> None:
    b = SessionBuilder()
    user = b.user("look into the parser", agent_id="explore")
    answer = MessageAdded(
        session_id=b.session_id,
        message_id="msg_ffffffffffffffffff",
        role="assistant",
        parent_id=user,
    )
    assert "belongs to agent 'explore'" in _reason(b, answer)
    validate_events(_index(b), [msgspec.structs.replace(answer, agent_id="explore")])
