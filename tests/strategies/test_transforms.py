"""The built-in view transforms on hand-built views, and over generated sessions."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.events import Event
from contextledger.history._view import model_view
from contextledger.strategies import (
    PLACEHOLDER,
    Transform,
    TransformContext,
    age_truncate,
    apply_transform,
    baseline,
    cap_tool_outputs,
    per_tool_keep_last,
    shorten,
    truncate,
)
from contextledger.testing import check_tool_pairs, session_events
from contextledger.vocabulary._messages import ModelMessage, ModelText, ModelToolCall
from tests.strategies._sessions import history, results, session, view_of

CONTEXT = TransformContext(usable_tokens=100_000, turn=3)


def test_baseline_is_the_identity() -> None:
    view = view_of(session())
    assert baseline(view, CONTEXT) == view


def test_truncate_keeps_the_last_n_messages_when_the_cut_is_clean() -> None:
    view = view_of(session())
    assert [m.role for m in view[-3:]] == ["user", "assistant", "tool"]
    assert truncate(3)(view, CONTEXT) == view[-3:]
    assert truncate(2)(view, CONTEXT) == view[-2:]


def test_truncate_moves_the_cut_past_a_tool_message() -> None:
    view = view_of(session())
    assert view[-4].role == "tool"
    kept = truncate(4)(view, CONTEXT)
    assert kept == view[-3:]
    check_tool_pairs(kept)


def test_truncate_moves_back_to_the_call_rather_than_return_nothing() -> None:
    view = view_of(session())
    kept = truncate(1)(view, CONTEXT)
    assert [m.role for m in kept] == ["assistant", "tool"]
    check_tool_pairs(kept)


def test_truncate_rejects_a_non_positive_window() -> None:
    with pytest.raises(ValueError, match="messages to keep must be >= 1, got 0"):
        truncate(0)


def test_age_truncate_keeps_the_newest_results_and_shortens_older_ones() -> None:
    view = view_of(session(5, output=lambda turn, tool: str(turn) * 50))
    out = age_truncate(10, 3)(view, CONTEXT)
    outputs = [r.output for r in results(out)]
    assert outputs[2:] == [str(t) * 50 for t in (2, 3, 4)]
    assert outputs[:2] == [shorten(str(t) * 50, 10) for t in (0, 1)]
    assert outputs[0] == "0" * 10 + "\n[... 40 more characters truncated]"
    check_tool_pairs(out)


def test_age_truncate_leaves_short_results_and_unchanged_messages_alone() -> None:
    view = view_of(session(4))
    out = age_truncate(500, 1)(view, CONTEXT)
    assert out == view
    assert all(a is b for a, b in zip(out, view, strict=True))


def test_cap_tool_outputs_shortens_every_result() -> None:
    view = view_of(session(3, output=lambda turn, tool: "x" * 30))
    out = cap_tool_outputs(5)(view, CONTEXT)
    assert [r.output for r in results(out)] == [shorten("x" * 30, 5)] * 3


def test_per_tool_keep_last_replaces_older_outputs_per_tool() -> None:
    view = view_of(session(4, tools=("bash", "read")))
    out = per_tool_keep_last(1)(view, CONTEXT)
    by_tool = {
        tool: [r.output for r in results(out) if r.tool == tool] for tool in ("bash", "read")
    }
    assert by_tool == {
        "bash": [PLACEHOLDER] * 3 + ["bash output 3"],
        "read": [PLACEHOLDER] * 3 + ["read output 3"],
    }
    assert sum(r.output == PLACEHOLDER for r in results(out)) == 6
    check_tool_pairs(out)


def test_per_tool_keep_last_counts_each_tool_on_its_own() -> None:
    b = session(3, tools=("bash",))
    user = b.user("Now read it.")
    assistant = b.assistant(user)
    b.tool_result(b.tool_call(assistant, "read", {"path": "a.py"}), "contents")
    b.finish(assistant)
    out = per_tool_keep_last(2)(view_of(b), CONTEXT)
    assert [r.output for r in results(out)] == [
        PLACEHOLDER,
        "bash output 1",
        "bash output 2",
        "contents",
    ]


def test_per_tool_keep_last_zero_clears_every_result() -> None:
    out = per_tool_keep_last(0)(view_of(session(2)), CONTEXT)
    assert [r.output for r in results(out)] == [PLACEHOLDER, PLACEHOLDER]


TRANSFORMS: list[Transform] = [
    baseline,
    truncate(1),
    truncate(2),
    truncate(5),
    age_truncate(0, 0),
    age_truncate(10, 2),
    cap_tool_outputs(3),
    per_tool_keep_last(0),
    per_tool_keep_last(1),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=session_events(), transform=st.sampled_from(TRANSFORMS))
def test_no_transform_separates_a_call_from_its_result(
    events: list[Event], transform: Transform
) -> None:
    view = model_view(history(events))
    out = apply_transform(transform, view, CONTEXT)
    check_tool_pairs(out)
    assert not out or out[0].role != "tool"
    assert len(out) <= len(view)
    calls = {c.call_id for m in out for c in m.content if isinstance(c, ModelToolCall)}
    assert calls == {r.call_id for r in results(out)}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=session_events(), n=st.integers(1, 8))
def test_truncate_keeps_a_suffix_of_at_most_n_messages_unless_only_a_round_fits(
    events: list[Event], n: int
) -> None:
    view = model_view(history(events))
    out = truncate(n)(view, CONTEXT)
    assert out == view[len(view) - len(out) :]
    if view:
        assert out
    if len(out) > n:
        assert [m.role for m in out] == ["assistant", "tool"]


def test_a_transform_that_splits_a_pair_is_refused_by_name() -> None:
    from contextledger.strategies import StrategyError

    def drop_results(view: list[ModelMessage], context: TransformContext) -> list[ModelMessage]:
        return [m for m in view if m.role != "tool"]

    view = view_of(session(2))
    with pytest.raises(StrategyError, match="'drop-results' separated a tool call"):
        apply_transform(drop_results, view, CONTEXT, name="drop-results")  # type: ignore[arg-type]
    with pytest.raises(StrategyError, match="'drop_results'"):
        apply_transform(drop_results, view)  # type: ignore[arg-type]


def test_placeholder_is_plain_text_of_a_result() -> None:
    out = per_tool_keep_last(0)(view_of(session(1)), CONTEXT)
    assert not any(
        isinstance(c, ModelText) and c.text == PLACEHOLDER for m in out for c in m.content
    )
