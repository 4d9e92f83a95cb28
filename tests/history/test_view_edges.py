"""Edge cases of the model view: interrupted output caps, "latest" by id after the
compaction reorder, crash recovery of unfinished calls, manual summaries in a LiveView."""

from __future__ import annotations

from contextledger.events import RecordedEvent
from contextledger.history import History
from contextledger.history._live_view import LiveView
from contextledger.history._view import (
    INTERRUPTED_OUTPUT,
    ViewOptions,
    interrupted_calls,
    model_view,
    view_messages,
)
from contextledger.testing._builder import SessionBuilder
from contextledger.vocabulary._messages import ModelText, ModelToolResult


def _history(b: SessionBuilder) -> History:
    return History.rebuild(
        b.session_id, [RecordedEvent(b.session_id, i, i, e) for i, e in enumerate(b.events, 1)]
    )


def test_the_partial_output_of_an_interrupted_call_is_capped_like_any_output() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    b.tool_error(b.tool_call(reply, "bash"), "interrupted", partial_output="line\n" * 100_000)
    (result,) = [
        c for m in model_view(_history(b)) for c in m.content if isinstance(c, ModelToolResult)
    ]
    assert result.output.count("line\n") == 2000
    assert "read_tool_output" in result.output


def test_the_latest_user_message_is_the_greatest_id_after_the_reorder() -> None:
    b = SessionBuilder()
    b.user("older")
    tail = b.user("kept in the tail", environment="<env>tail</env>")
    b.compact("summary", tail_start_id=tail)
    newest = b.user("newest", environment="<env>newest</env>")
    view = model_view(_history(b), ViewOptions(environment="latest"))
    texts = [c.text for m in view for c in m.content if isinstance(c, ModelText)]
    assert "<env>newest</env>" in texts and "<env>tail</env>" not in texts
    assert view[-1].source_id == newest


def test_after_a_crash_the_calls_of_unfinished_messages_are_answered() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    b.tool_running(b.tool_call(reply, "bash"))
    history = _history(b)
    assert interrupted_calls(history, time_ms=1) == []
    (event,) = interrupted_calls(history, time_ms=1, unfinished=True)
    assert event.state.error == INTERRUPTED_OUTPUT  # type: ignore[union-attr]
    history.validate([event])


def test_a_live_view_follows_a_manual_summary_as_it_finishes() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("early"))
    b.text(reply, "x")
    b.finish(reply)
    status = b.user("status?")
    history = History(b.session_id)
    live = LiveView()
    seq = 0

    def catch_up() -> None:
        nonlocal seq
        for event in b.events[seq:]:
            seq += 1
            history.apply(RecordedEvent(b.session_id, seq, seq, event))
        assert list(live.update(history)) == model_view(history)

    catch_up()
    summary = b.assistant(status, summary=True, step_start=False)
    b.text(summary, "the summary")
    catch_up()
    b.finish(summary)
    catch_up()
    assert [m.source_id for m in live.update(history)] == [status, summary]


def test_a_sub_agent_compaction_compacts_its_own_slice_only() -> None:
    b = SessionBuilder("ses_test")
    main_user = b.user("Main task.")
    b.finish(b.assistant(main_user))
    helper_user = b.user("Explore the code.", agent_id="explore")
    b.finish(b.assistant(helper_user, agent_id="explore"), agent_id="explore")
    request = b.compact("## Goal\n- Explore.", agent_id="explore")
    later = b.user("Main again.")
    history = _history(b)
    whole = [m.id for m in view_messages(history, ViewOptions())]
    assert main_user in whole and later in whole and helper_user in whole
    assert request not in whole
    explore = [m.id for m in view_messages(history, ViewOptions(agent_id="explore"))]
    assert explore[0] == request and helper_user not in explore
    live = LiveView(ViewOptions())
    assert [m.source_id for m in live.update(history)] == [
        m.source_id for m in model_view(history, ViewOptions())
    ]
