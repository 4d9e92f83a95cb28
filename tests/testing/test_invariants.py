"""The view invariants of ``contextledger.testing``: each passes on a good input and raises
``InvariantViolation``, naming what broke, on a crafted bad one."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from contextledger.events import RecordedEvent
from contextledger.history import History
from contextledger.history._live_view import LiveView
from contextledger.history._view import ViewOptions, model_view
from contextledger.testing import (
    InvariantViolation,
    check_live_view_matches,
    check_prefix_stable,
    check_snapshot_matches,
    check_tool_pairs,
    check_view_deterministic,
)
from contextledger.testing import _invariants as invariants_module
from contextledger.testing._builder import SessionBuilder
from contextledger.vocabulary._messages import (
    ModelMessage,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)


def _recorded(b: SessionBuilder) -> list[RecordedEvent]:
    return [RecordedEvent(b.session_id, i, i, e) for i, e in enumerate(b.events, 1)]


def _session() -> SessionBuilder:
    """A short session with tools, a prune, a compaction with a tail and a newer turn."""
    b = SessionBuilder()
    first = b.user("first")
    reply = b.assistant(first)
    call = b.tool_call(reply, "bash", {"command": "ls"})
    b.tool_result(call, "a\nb")
    b.tool_call(reply, "read")  # left pending: the view answers it as interrupted
    b.finish(reply, "tool-calls")
    b.prune([call])
    tail = b.user("second")
    b.compact("## Goal\nsummary", tail_start_id=tail)
    answer = b.assistant(b.user("third"))
    b.tool_result(b.tool_call(answer, "grep", {"pattern": "x"}), "found")
    b.text(answer, "done")
    b.finish(answer)
    return b


def _user(text: str, source: str = "msg_u") -> ModelMessage:
    return ModelMessage(role="user", content=(ModelText(text=text),), source_id=source)


def _call(*call_ids: str, source: str = "msg_a") -> ModelMessage:
    return ModelMessage(
        role="assistant",
        content=tuple(ModelToolCall(call_id=c, tool="bash") for c in call_ids),
        source_id=source,
    )


def _results(*call_ids: str, source: str = "msg_a") -> ModelMessage:
    return ModelMessage(
        role="tool",
        content=tuple(ModelToolResult(call_id=c, tool="bash", output="ok") for c in call_ids),
        source_id=source,
    )


# --- check_tool_pairs -----------------------------------------------------------------------


def test_check_tool_pairs_passes_on_a_real_view() -> None:
    view = model_view(History.rebuild("ses_test", _recorded(_session())))
    assert any(m.role == "tool" for m in view)
    check_tool_pairs(view)
    check_tool_pairs([])
    check_tool_pairs([_user("q"), _call("c1", "c2"), _results("c2", "c1"), _user("next")])


@pytest.mark.parametrize(
    ("view", "named"),
    [
        ([_user("q"), _call("c1"), _user("next")], r"call 'c1' \(bash\) of message 1"),
        ([_user("q"), _call("c1")], r"call 'c1' .* never answered"),
        ([_user("q"), _call("c1", "c2"), _results("c1")], r"call 'c2' .* not answered"),
        ([_user("q"), _call("c1"), _results("c1", "c1")], r"call 'c1' is answered twice"),
        ([_user("q"), _results("c9")], r"answers call 'c9' .* did not make"),
        ([_call("c1"), _results("c1"), _results("c1")], r"answers call 'c1' .* did not make"),
        ([_call("c1", "c1"), _results("c1", "c1")], r"call 'c1' is made twice"),
        (
            [
                ModelMessage(
                    role="user",
                    content=(ModelToolResult(call_id="c3", tool="read", output="x"),),
                    source_id="msg_u",
                )
            ],
            r"result of call 'c3' \(read\) outside a tool message",
        ),
    ],
)
def test_check_tool_pairs_names_the_offending_call(view: list[ModelMessage], named: str) -> None:
    with pytest.raises(InvariantViolation, match=named):
        check_tool_pairs(view)


# --- check_view_deterministic ---------------------------------------------------------------


def test_check_view_deterministic_passes_on_a_real_history() -> None:
    recorded = _recorded(_session())
    history = History.rebuild("ses_test", recorded)
    check_view_deterministic(history)
    check_view_deterministic(history, ViewOptions(environment="latest"), recorded=recorded)


def test_check_view_deterministic_catches_a_log_that_rebuilds_to_another_view() -> None:
    recorded = _recorded(_session())
    history = History.rebuild("ses_test", recorded)
    with pytest.raises(InvariantViolation, match=r"rebuilt from .* events differs"):
        check_view_deterministic(history, recorded=recorded[:-3])


def test_check_view_deterministic_catches_a_view_that_changes_between_builds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    builds = iter(range(100))

    def clocked_view(history: History, options: ViewOptions | None = None) -> list[ModelMessage]:
        return [_user(f"built {next(builds)}")]

    monkeypatch.setattr(invariants_module, "model_view", clocked_view)
    history = History.rebuild("ses_test", _recorded(_session()))
    with pytest.raises(InvariantViolation, match="second build differs: message 0"):
        check_view_deterministic(history)


def test_check_view_deterministic_catches_a_snapshot_that_loses_something(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded = _recorded(_session())
    history = History.rebuild("ses_test", recorded)
    older = History.rebuild("ses_test", recorded[:-3]).snapshot()
    monkeypatch.setattr(History, "snapshot", lambda self: older)
    with pytest.raises(InvariantViolation, match="restored from its snapshot differs"):
        check_view_deterministic(history)


# --- check_live_view_matches ----------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [ViewOptions(), ViewOptions(environment="latest"), ViewOptions(historical_media="keep")],
)
def test_check_live_view_matches_passes_event_by_event(options: ViewOptions) -> None:
    recorded = _recorded(_session())
    history = History.rebuild("ses_test", recorded)
    check_live_view_matches(history, options)
    check_live_view_matches(history, options, recorded=recorded)


def test_check_live_view_matches_catches_events_of_another_history() -> None:
    recorded = _recorded(_session())
    history = History.rebuild("ses_test", recorded)
    with pytest.raises(InvariantViolation, match="differs from the view of the history"):
        check_live_view_matches(history, recorded=recorded[: len(recorded) // 2])


class _StaleLiveView(LiveView):
    """A broken incremental view: it never sees anything after its first update."""

    def __init__(self, options: ViewOptions | None = None) -> None:
        super().__init__(options)
        self.first: list[ModelMessage] | None = None

    def update(self, history: History) -> Sequence[ModelMessage]:
        view = list(super().update(history))
        if self.first is None and view:
            self.first = view
        return self.first if self.first is not None else view


def test_check_live_view_matches_catches_an_incremental_view_that_falls_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(invariants_module, "LiveView", _StaleLiveView)
    recorded = _recorded(_session())
    history = History.rebuild("ses_test", recorded)
    with pytest.raises(InvariantViolation, match=r"after event seq \d+ \(PartAdded\)"):
        check_live_view_matches(history, recorded=recorded)


def test_check_live_view_matches_catches_a_live_view_that_differs_on_one_update(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Empty(LiveView):
        def update(self, history: History) -> Sequence[ModelMessage]:
            super().update(history)
            return []

    monkeypatch.setattr(invariants_module, "LiveView", Empty)
    history = History.rebuild("ses_test", _recorded(_session()))
    with pytest.raises(InvariantViolation, match="first update"):
        check_live_view_matches(history)


# --- check_prefix_stable --------------------------------------------------------------------


def _view(b: SessionBuilder) -> list[ModelMessage]:
    return model_view(History.rebuild(b.session_id, _recorded(b)))


def test_check_prefix_stable_passes_when_only_new_turns_follow() -> None:
    b = _session()
    before = _view(b)
    reply = b.assistant(b.user("fourth"))
    b.tool_result(b.tool_call(reply, "grep"), "found")
    b.finish(reply, "tool-calls")
    after = _view(b)
    assert len(after) > len(before)
    check_prefix_stable(before, after)
    check_prefix_stable(before, before)
    check_prefix_stable([], after)


def test_check_prefix_stable_catches_a_prune_changing_a_sent_message() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    call = b.tool_call(reply, "bash")
    b.tool_result(call, "output")
    b.finish(reply, "tool-calls")
    before = _view(b)
    b.prune([call])
    with pytest.raises(InvariantViolation, match=f"message 2 .*from {reply}.*other content"):
        check_prefix_stable(before, _view(b))


def test_check_prefix_stable_catches_a_compaction_reshaping_the_view() -> None:
    b = SessionBuilder()
    first = b.user("first")
    before = _view(b)
    b.compact("## Goal\nsummary")
    with pytest.raises(InvariantViolation, match=f"message 0 .*from {first}"):
        check_prefix_stable(before, _view(b))


def test_check_prefix_stable_catches_a_shrinking_view() -> None:
    before = [_user("a", "msg_1"), _user("b", "msg_2")]
    with pytest.raises(InvariantViolation, match=r"shrank from 2 to 1 .*msg_2"):
        check_prefix_stable(before, before[:1])


# --- check_snapshot_matches (compares state and index facts, not bytes) ---------------------


def test_check_snapshot_matches_compares_the_restored_state_and_index() -> None:
    history = History.rebuild("ses_test", _recorded(_session()))
    check_snapshot_matches(history)
    history.index.memory_pinned = True  # an index fact no event established
    with pytest.raises(InvariantViolation, match="validation index"):
        check_snapshot_matches(history)
