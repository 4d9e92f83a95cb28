"""The model view before and after a strategy at one call, as a line diff."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.events._catalogue import Event, MessageAdded
from contextledger.simulation import recorded_turns, strategy_steps
from contextledger.simulation._synthetic import synthetic_session
from contextledger.simulation._viewdiff import (
    DiffLine,
    Elided,
    collapse,
    diff_lines,
    diff_views,
    summarize,
    turn_views,
    view_lines,
)
from contextledger.strategies import TRUNCATED_MARKER, estimate_view_tokens, strategy
from contextledger.vocabulary._messages import (
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)

VIEW = [
    ModelMessage(
        role="user",
        content=(
            ModelText(text="Fix the test.\nIt fails."),
            ModelFile(mime="image/png", url="data:image/png;base64,AAAA", filename="shot.png"),
        ),
        source_id="msg_1",
    ),
    ModelMessage(
        role="assistant",
        content=(
            ModelReasoning(text="Look first."),
            ModelText(text="Reading it."),
            ModelToolCall(call_id="call_1", tool="read", input={"path": "a.py", "limit": 5}),
            ModelToolCall(call_id="call_2", tool="bash", input={"command": "pytest"}),
        ),
        source_id="msg_2",
    ),
    ModelMessage(
        role="tool",
        content=(
            ModelToolResult(
                call_id="call_1",
                tool="read",
                output="1 x = 1\n2 y = 2",
                attachments=(ModelFile(mime="image/png", url="data:,"),),
            ),
            ModelToolResult(call_id="call_2", tool="bash", output="exit 1", is_error=True),
        ),
        source_id="msg_2",
    ),
    ModelMessage(
        role="user",
        content=(ModelText(text="What did we do so far?", synthetic=True),),
        source_id="msg_3",
        synthetic=True,
    ),
    ModelMessage(role="assistant", content=(ModelText(text="## Goal"),), source_id="msg_4"),
]


def test_view_lines_head_each_message_and_result_and_render_every_content() -> None:
    assert view_lines(VIEW, summaries={"msg_4"}) == [
        "=== USER ===",
        "Fix the test.",
        "It fails.",
        "[file image/png shot.png]",
        "=== ASSISTANT ===",
        "[reasoning]",
        "Look first.",
        "Reading it.",
        '[tool call read call_1] {"limit":5,"path":"a.py"}',
        '[tool call bash call_2] {"command":"pytest"}',
        "=== TOOL RESULT (read, call_1) ===",
        "1 x = 1",
        "2 y = 2",
        "[file image/png]",
        "=== TOOL ERROR (bash, call_2) ===",
        "exit 1",
        "=== USER (synthetic) ===",
        "What did we do so far?",
        "=== ASSISTANT (summary) ===",
        "## Goal",
    ]


def test_a_replaced_output_is_removed_then_added_between_identical_lines() -> None:
    after = [
        *VIEW[:2],
        ModelMessage(
            role="tool",
            content=(
                ModelToolResult(call_id="call_1", tool="read", output="1 x = 1"),
                VIEW[2].content[1],
            ),
            source_id="msg_2",
        ),
    ]
    lines = diff_views(VIEW[:3], after)
    changed = [line for line in lines if line.kind != "same"]
    assert changed == [
        DiffLine("removed", "2 y = 2"),
        DiffLine("removed", "[file image/png]"),
    ]
    assert diff_lines(["a", "b"], ["a", "c"]) == [
        DiffLine("same", "a"),
        DiffLine("removed", "b"),
        DiffLine("added", "c"),
    ]


def test_repeated_lines_are_matched_rather_than_treated_as_junk() -> None:
    # SequenceMatcher's autojunk would ignore a line repeated in over 1% of 200+ lines.
    before = ["=== USER ===", "x"] * 150
    after = [*before, "y"]
    assert [line.kind for line in diff_lines(before, after)] == ["same"] * 300 + ["added"]


@given(
    st.lists(st.sampled_from("abcde"), max_size=40),
    st.lists(st.sampled_from("abcde"), max_size=40),
)
def test_a_diff_reproduces_both_sides(before: list[str], after: list[str]) -> None:
    lines = diff_lines(before, after)
    assert [line.text for line in lines if line.kind != "added"] == before
    assert [line.text for line in lines if line.kind != "removed"] == after


@given(
    st.lists(st.sampled_from(["same", "same", "same", "removed", "added"]), max_size=60),
    st.integers(min_value=0, max_value=4),
)
def test_collapsing_keeps_every_change_and_counts_every_line(
    kinds: list[str], context: int
) -> None:
    lines = [DiffLine(kind, str(i)) for i, kind in enumerate(kinds)]  # type: ignore[arg-type]
    collapsed = collapse(lines, context)
    kept = [line for line in collapsed if isinstance(line, DiffLine)]
    assert [line for line in kept if line.kind != "same"] == [
        line for line in lines if line.kind != "same"
    ]
    assert len(kept) + sum(e.count for e in collapsed if isinstance(e, Elided)) == len(lines)
    assert [line.text for line in kept] == sorted((line.text for line in kept), key=int)


def test_collapse_keeps_context_around_changes_and_negative_context_keeps_all() -> None:
    lines = [DiffLine("same", str(i)) for i in range(10)]
    lines[5] = DiffLine("added", "new")
    assert collapse(lines, 2) == [Elided(3), *lines[3:8], Elided(2)]
    assert collapse(lines, 3) == [Elided(2), *lines[2:9], Elided(1)]
    assert collapse(lines, -1) == lines
    unchanged = [DiffLine("same", str(i)) for i in range(4)]
    assert collapse(unchanged, 3) == [Elided(4)]
    between = [DiffLine("added", "a"), *unchanged, DiffLine("removed", "b")]
    assert collapse(between, 2) == between
    assert collapse(between, 1) == [between[0], unchanged[0], Elided(2), unchanged[3], between[5]]


def test_summary_counts_lines_and_estimates_both_views() -> None:
    after = VIEW[:1]
    lines = diff_views(VIEW, after)
    summary = summarize(VIEW, after, lines)
    assert (summary.same, summary.added) == (4, 0)
    assert summary.removed == len(view_lines(VIEW)) - 4
    assert summary.tokens_before == estimate_view_tokens(VIEW)
    assert summary.tokens_after == estimate_view_tokens(after) < summary.tokens_before


@pytest.fixture(scope="module")
def session() -> list[Event]:
    return synthetic_session("ses_diff", seed=3, turns=1)


async def test_under_baseline_both_sides_are_identical(session: list[Event]) -> None:
    views = await turn_views(session, "baseline", 10)
    assert views.before == views.after
    assert views.before
    assert {line.kind for line in views.diff()} == {"same"}


async def test_truncation_replaces_long_tool_outputs(session: list[Event]) -> None:
    views = await turn_views(session, "truncate-500", 2)
    lines = views.diff()
    assert any(line.kind == "removed" for line in lines)
    added = [line.text for line in lines if line.kind == "added"]
    marker = re.compile(re.escape(TRUNCATED_MARKER.strip()).replace(r"\{omitted\}", r"\d+"))
    assert any(marker.fullmatch(text) for text in added)
    assert [line.text for line in lines if line.kind != "added"] == view_lines(views.before)
    assert (views.turn, views.calls, views.strategy) == (
        2,
        sum(len(turn.calls) for turn in recorded_turns(session)),
        "truncate-500",
    )


async def test_the_after_view_is_what_the_strategy_sent(session: list[Event]) -> None:
    views = await turn_views(session, "truncate-500", 3, provider="openai")
    steps = [s async for s in strategy_steps(session, strategy("truncate-500"), provider="openai")]
    step = steps[2]
    assert views.after == step.built.request.messages
    message_id = [c for t in recorded_turns(session) for c in t.calls][2].message_id
    assert isinstance(session[views.seq], MessageAdded)
    assert session[views.seq].message_id == message_id
    assert views.actions == step.actions


async def test_the_last_call_is_the_default(session: list[Event]) -> None:
    views = await turn_views(session, "baseline")
    assert views.turn == views.calls == sum(len(turn.calls) for turn in recorded_turns(session))


async def test_compaction_is_reported_and_its_summary_marked(session: list[Event]) -> None:
    views = await turn_views(session, "compact-at-1000", 2)
    assert views.actions == "compacted"
    added = [line.text for line in views.diff() if line.kind == "added"]
    assert "=== ASSISTANT (summary) ===" in added


@pytest.mark.parametrize("turn", [0, 64, -1])
async def test_a_turn_outside_the_session_is_refused(session: list[Event], turn: int) -> None:
    with pytest.raises(ValueError, match="the session has 63 model calls"):
        await turn_views(session, "baseline", turn)


async def test_an_unknown_strategy_or_provider_or_bad_window_is_refused(
    session: list[Event],
) -> None:
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        await turn_views(session, "nope", 1)
    with pytest.raises(ValueError, match="unknown provider"):
        await turn_views(session, "baseline", 1, provider="google")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="window"):
        await turn_views(session, "baseline", 1, window=0)
