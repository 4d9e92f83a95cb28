"""How each event changes the History projection."""

from __future__ import annotations

import pytest

from contextledger.events import (
    CompactionPart,
    Event,
    MemoryPinned,
    MessageError,
    PrefixAdvanced,
    PrefixPinned,
    PrefixProfile,
    PrefixRotated,
    RecordedEvent,
    RequestSent,
    TextPart,
    ToolCompleted,
    ToolPart,
    Usage,
)
from contextledger.events._errors import InvalidEvent
from contextledger.history import History
from contextledger.testing._builder import SessionBuilder

PROFILE = PrefixProfile(
    provider_id="anthropic",
    model_id="m",
    agent="main",
    system_mode="default",
    system=("s",),
    tools=("bash",),
)


def _project(b: SessionBuilder) -> History:
    history = History(b.session_id)
    for i, event in enumerate(b.events, 1):
        history.validate([event])
        history.apply(RecordedEvent(b.session_id, i, i, event))
    return history


def _tool(history: History, part_id: str) -> ToolPart:
    part = history.part(part_id)
    assert isinstance(part, ToolPart)
    return part


def test_messages_and_parts_are_kept_in_id_order() -> None:
    b = SessionBuilder()
    user = b.user("hello")
    reply = b.assistant(user)
    b.text(reply, "hi")
    b.finish(reply)
    history = _project(b)
    assert [m.id for m in history.messages] == [user, reply]
    assert [p.id for p in history.message(reply).parts] == sorted(
        p.id for p in history.message(reply).parts
    )
    assert history.seq == len(b.events)


def test_a_tool_call_moves_from_pending_to_completed() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("list files"))
    call = b.tool_call(reply, "bash", {"command": "ls"})
    b.tool_result(call, "a.py\nb.py")
    state = _tool(_project(b), call).state
    assert isinstance(state, ToolCompleted)
    assert state.output == "a.py\nb.py"
    assert state.input == {"command": "ls"}


def test_finishing_records_usage_and_error() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    usage = Usage(input=10, output=5, cache_read=100)
    b.finish(reply, "error", usage=usage, error=MessageError(name="AbortedError"))
    message = _project(b).message(reply)
    assert message.finish == "error"
    assert message.usage == usage
    assert message.error is not None and message.error.name == "AbortedError"


def test_a_prune_marks_the_output_compacted_and_keeps_it() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("read"))
    call = b.tool_call(reply, "read")
    b.tool_result(call, "x" * 1000)
    b.tick(5000)
    b.prune([call], "post-compaction")
    state = _tool(_project(b), call).state
    assert isinstance(state, ToolCompleted)
    assert state.compacted_ms == b.clock_ms
    assert state.compacted_reason == "post-compaction"
    assert state.output == "x" * 1000


def test_a_soft_trim_records_the_kept_head_and_tail() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("read"))
    call = b.tool_call(reply, "read")
    b.tool_result(call, "y" * 10_000)
    b.trim(call, 1536, 1536)
    state = _tool(_project(b), call).state
    assert isinstance(state, ToolCompleted) and state.trimmed == (1536, 1536)


def test_token_estimates_follow_each_part_version() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("read"))
    call = b.tool_call(reply, "read", {})
    history = _project(b)
    before = history.part_tokens(call)
    b.tool_result(call, "z" * 4000)
    after = _project(b).part_tokens(call)
    assert after - before >= 1000


def test_a_completed_compaction_sets_the_tail_on_its_part() -> None:
    b = SessionBuilder()
    first = b.user("one")
    second = b.user("two")
    request = b.compact("## Goal\nship it", tail_start_id=second)
    history = _project(b)
    part = history.message(request).parts[0]
    assert isinstance(part, CompactionPart) and part.tail_start_id == second
    compaction = history.state.compactions[request]
    assert compaction.status == "completed"
    assert compaction.projection is not None and compaction.projection.summary.startswith("##")
    assert not history.message(first).excluded


def test_a_rollback_excludes_the_request_and_its_summary() -> None:
    b = SessionBuilder()
    b.user("one")
    request = b.request_compaction()
    summary = b.summary(request, "")
    b.roll_back(request, "empty")
    history = _project(b)
    assert history.message(request).excluded
    assert history.message(summary).excluded
    assert history.state.compactions[request].status == "rolled_back"


def test_session_level_facts_are_kept() -> None:
    b = SessionBuilder()
    user = b.user("hi", environment="<environment_details>cwd</environment_details>")
    reply = b.assistant(user)
    b.finish(reply)
    b.add(MemoryPinned, text="remember")
    b.add(PrefixPinned, key="k1", profile=PROFILE)
    b.add(PrefixAdvanced, key="k1", message_id=reply)
    history = _project(b)
    assert history.state.environment[user].startswith("<environment_details>")
    assert history.state.memory == "remember"
    assert history.state.prefix is not None and history.state.prefix.advanced_to == reply


def test_message_versions_grow_with_each_change() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    v1 = _project(b).message(reply).version
    b.text(reply, "more")
    assert _project(b).message(reply).version == v1 + 1


def test_a_snapshot_restores_an_equal_projection() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    call = b.tool_call(reply, "bash")
    b.tool_result(call, "ok")
    b.finish(reply, "tool-calls")
    history = _project(b)
    restored = History.from_snapshot(history.snapshot())
    assert restored == history
    assert isinstance(restored.part(call), ToolPart)
    assert isinstance(restored.message(reply).parts[0], type(history.message(reply).parts[0]))
    assert not isinstance(restored.part(call), TextPart)


def test_finished_steps_count_each_agents_finished_answers_not_summaries() -> None:
    b = SessionBuilder()
    for turn in range(3):
        b.finish(b.assistant(b.user(f"go {turn}")))
    b.assistant(b.user("still running"))
    b.finish(b.assistant(b.user("help", agent_id="helper"), agent_id="helper"), agent_id="helper")
    b.compact("what happened so far")
    history = _project(b)
    scanned = {
        agent: sum(
            m.role == "assistant" and not m.summary and m.finish is not None
            for m in history.messages
            if m.agent_id == agent
        )
        for agent in ("main", "helper", "nobody")
    }
    assert scanned == {"main": 3, "helper": 1, "nobody": 0}
    restored = History.from_snapshot(history.snapshot())
    for agent, steps in scanned.items():
        assert history.finished_steps(agent) == restored.finished_steps(agent) == steps


def test_each_agent_keeps_its_own_pinned_prefix() -> None:
    b = SessionBuilder("ses_prefix")
    reply = b.assistant(b.user("hello"))
    b.add(PrefixPinned, key="main-key", profile=PROFILE)
    b.add(PrefixPinned, "reviewer", key="review-key", profile=PROFILE)
    b.add(PrefixAdvanced, "reviewer", key="review-key", message_id=reply)
    history = _project(b)
    main, review = history.pinned_prefix(), history.pinned_prefix("reviewer")
    assert main is not None and main.key == "main-key" and main.advanced_to is None
    assert review is not None and review.key == "review-key" and review.advanced_to == reply
    recorded = [RecordedEvent(b.session_id, i, i, e) for i, e in enumerate(b.events, 1)]
    assert History.rebuild(b.session_id, recorded) == history


def test_each_agent_keeps_its_own_last_request() -> None:
    """A sub-agent's request sent while the main agent's call runs, and the main agent's
    next one sent while the sub-agent's runs, leave each agent's last request its own."""
    b = SessionBuilder("ses_requests")
    main_user = b.user("main task")
    sub_user = b.user("explore", agent_id="explore")

    def send(agent_id: str, last_message_id: str) -> Event:
        return b.add(
            RequestSent,
            agent_id,
            provider_id="anthropic",
            model_id="m",
            prefix_hash=agent_id,
            body_hash=last_message_id,
            body_bytes=1,
            estimated_tokens=len(b.events),
            last_message_id=last_message_id,
        )

    send("main", main_user)
    explore = send("explore", sub_user)
    main_reply = b.assistant(main_user)
    b.finish(main_reply)
    main = send("main", main_reply)
    history = _project(b)
    assert history.last_request() == history.last_request("main") == main
    assert history.last_request("explore") == explore
    assert history.last_request("reviewer") is None
    recorded = [RecordedEvent(b.session_id, i, i, e) for i, e in enumerate(b.events, 1)]
    assert History.rebuild(b.session_id, recorded) == history
    restored = History.from_snapshot(history.snapshot())
    assert restored.last_request("explore") == history.last_request("explore")
    assert restored.last_request() == history.last_request()


def test_a_rotation_or_an_advance_names_its_own_agents_prefix() -> None:
    b = SessionBuilder("ses_prefix")
    reply = b.assistant(b.user("hello"))
    b.add(PrefixPinned, key="main-key", profile=PROFILE)
    history = _project(b)
    other = {"session_id": b.session_id, "agent_id": "reviewer"}
    rotated = PrefixRotated(key="other", profile=PROFILE, reason="tools changed", **other)
    with pytest.raises(InvalidEvent, match="no prefix is pinned to rotate"):
        history.validate([rotated])
    advanced = PrefixAdvanced(key="main-key", message_id=reply, **other)
    with pytest.raises(InvalidEvent, match="is not the pinned one"):
        history.validate([advanced])
