"""Specification of ``contextledger.policy.prune``: opencode's prune planner.

Scenario ids name their source: ``9.2#n`` is opencode-kilo.md §9.2 (opencode's
``compaction.test.ts``); the algorithm is §6.1.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.events import Event, RecordedEvent
from contextledger.events.catalogue import PruneReason
from contextledger.events.parts import ToolCompleted, ToolPart
from contextledger.history import History, validate_events
from contextledger.history.projection import Message
from contextledger.history.validation import SessionIndex
from contextledger.history.view import ViewOptions, view_messages
from contextledger.policy.prune import PrunePlan, output_tokens, plan_prune
from contextledger.testing import session_events
from contextledger.testing.builder import SessionBuilder

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _history(events: list[Event]) -> History:
    return History.rebuild(
        "ses_test", [RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, 1)]
    )


def _view(b: SessionBuilder) -> list[Message]:
    return view_messages(_history(b.events), ViewOptions())


def _turn(b: SessionBuilder, text: str, *outputs: tuple[str, str]) -> list[str]:
    """A user message and a reply calling each ``(tool, output)``; the tool part ids."""
    reply = b.assistant(b.user(text))
    calls = []
    for tool, output in outputs:
        call = b.tool_call(reply, tool)
        b.tool_result(call, output)
        calls.append(call)
    b.finish(reply, "tool-calls" if calls else "stop")
    return calls


def _tokens(count: int) -> str:
    """An output ``output_tokens`` counts as ``count`` tokens."""
    return "x" * (4 * count)


def _older_turns(*sizes: int) -> tuple[SessionBuilder, list[str]]:
    """One turn per size (oldest first), each with one bash output of that many tokens,
    then the two protected turns."""
    b = SessionBuilder()
    calls = [_turn(b, f"turn {n}", ("bash", _tokens(size)))[0] for n, size in enumerate(sizes)]
    _turn(b, "previous")
    _turn(b, "current")
    return b, calls


def _plan(
    *sizes: int, protect_tokens: int = 40_000, minimum_tokens: int = 20_000
) -> tuple[PrunePlan | None, list[str]]:
    """The plan for older turns of these output sizes, and their tool part ids."""
    b, calls = _older_turns(*sizes)
    plan = plan_prune(_view(b), protect_tokens=protect_tokens, minimum_tokens=minimum_tokens)
    return plan, calls


def _opencode_session(tool: str) -> tuple[SessionBuilder, str]:
    """9.2#13/#14: user "first", a reply with a 200,000-character output, users "second"
    and "third"."""
    b = SessionBuilder()
    (call,) = _turn(b, "first", (tool, "x" * 200_000))
    b.user("second")
    b.user("third")
    return b, call


# --- opencode's scenarios -----------------------------------------------------------------------


def test_a_large_old_bash_output_is_planned_for_clearing() -> None:
    """9.2#13"""
    b, call = _opencode_session("bash")
    assert plan_prune(_view(b)) == PrunePlan((call,), 50_000, "normal")


def test_a_skill_output_is_never_planned() -> None:
    """9.2#14"""
    b, _ = _opencode_session("skill")
    assert plan_prune(_view(b)) is None


# --- the walk -----------------------------------------------------------------------------------


def test_the_last_two_turns_are_never_touched() -> None:
    b = SessionBuilder()
    (old,) = _turn(b, "old", ("bash", _tokens(60_000)))
    _turn(b, "previous", ("bash", _tokens(60_000)))
    _turn(b, "current", ("bash", _tokens(60_000)))
    # The protected turns' outputs neither get cleared nor count towards the kept 40,000.
    assert plan_prune(_view(b)) == PrunePlan((old,), 60_000, "normal")


def test_nothing_is_planned_with_fewer_than_three_turns() -> None:
    b = SessionBuilder()
    _turn(b, "previous", ("bash", _tokens(100_000)))
    _turn(b, "current", ("bash", _tokens(100_000)))
    assert plan_prune(_view(b)) is None


def _with_summary_between(summary: bool) -> tuple[list[Message], str]:
    """An old large output, then an assistant message (a summary or not), then three turns;
    the whole history, as the view would already cut before a summary."""
    b = SessionBuilder()
    (call,) = _turn(b, "old", ("bash", _tokens(60_000)))
    reply = b.assistant(b.user("compact"), summary=summary)
    b.text(reply, "## Goal\nfix it")
    b.finish(reply)
    for text in ("a", "b", "c"):
        _turn(b, text)
    return _history(b.events).messages, call


def test_the_walk_stops_at_a_summary() -> None:
    messages, call = _with_summary_between(summary=False)
    assert plan_prune(messages) == PrunePlan((call,), 60_000, "normal")
    messages, _ = _with_summary_between(summary=True)
    assert plan_prune(messages) is None


def test_the_walk_stops_at_an_already_cleared_output() -> None:
    b = SessionBuilder()
    _turn(b, "oldest", ("bash", _tokens(60_000)))
    (cleared,) = _turn(b, "cleared", ("bash", _tokens(60_000)))
    (newer,) = _turn(b, "newer", ("bash", _tokens(60_000)))
    b.prune([cleared])
    _turn(b, "previous")
    _turn(b, "current")
    assert plan_prune(_view(b)) == PrunePlan((newer,), 60_000, "normal")


def test_outputs_that_are_not_completed_are_skipped() -> None:
    b = SessionBuilder()
    (done,) = _turn(b, "old", ("bash", _tokens(60_000)))
    reply = b.assistant(b.user("errors"))
    b.tool_error(b.tool_call(reply, "bash"), "failed", partial_output=_tokens(60_000))
    b.tool_running(b.tool_call(reply, "bash"))
    b.finish(reply, "tool-calls")
    _turn(b, "previous")
    _turn(b, "current")
    assert plan_prune(_view(b)) == PrunePlan((done,), 60_000, "normal")


# --- thresholds ---------------------------------------------------------------------------------


def test_the_newest_40000_tokens_are_kept() -> None:
    plan, calls = _plan(30_000, 40_000)
    assert plan == PrunePlan((calls[0],), 30_000, "normal")


def test_one_token_over_40000_is_cleared() -> None:
    plan, calls = _plan(30_000, 40_001)
    assert plan == PrunePlan((calls[0], calls[1]), 70_001, "normal")


def test_nothing_is_done_unless_more_than_20000_tokens_are_freed() -> None:
    plan, _ = _plan(20_000, 40_000)
    assert plan is None
    plan, calls = _plan(20_001, 40_000)
    assert plan == PrunePlan((calls[0],), 20_001, "normal")


def test_custom_thresholds() -> None:
    plan, calls = _plan(50, 100, protect_tokens=100, minimum_tokens=49)
    assert plan == PrunePlan((calls[0],), 50, "normal")
    plan, _ = _plan(50, 100, protect_tokens=100, minimum_tokens=50)
    assert plan is None
    plan, _ = _plan(50, 100, protect_tokens=150, minimum_tokens=0)
    assert plan is None


def test_custom_protected_tools() -> None:
    b, call = _opencode_session("bash")
    assert plan_prune(_view(b), protected_tools=("bash",)) is None
    b, call = _opencode_session("skill")
    assert plan_prune(_view(b), protected_tools=()) == PrunePlan((call,), 50_000, "normal")


def test_the_reason_is_carried_through() -> None:
    b, call = _opencode_session("bash")
    plan = plan_prune(_view(b), reason="payload-limit")
    assert plan == PrunePlan((call,), 50_000, "payload-limit")


def test_part_ids_are_returned_oldest_first() -> None:
    b = SessionBuilder()
    older = _turn(b, "older", ("read", _tokens(30_000)), ("grep", _tokens(30_000)))
    old = _turn(b, "old", ("bash", _tokens(30_000)), ("edit", _tokens(40_000)))
    _turn(b, "previous")
    _turn(b, "current")
    plan = plan_prune(_view(b))
    assert plan == PrunePlan((*older, old[0]), 90_000, "normal")
    assert list(plan.part_ids) == sorted(plan.part_ids)


def test_output_tokens_is_four_characters_per_token() -> None:
    """9.2#35: 4000 characters are 1000 tokens, 20,000 are 5000, none are 0."""
    assert output_tokens("x" * 4000) == 1000
    assert output_tokens("y" * 20_000) == 5000
    assert output_tokens("") == 0
    assert output_tokens("xxxxx") == 1


def test_output_tokens_rounds_halves_up_like_opencode() -> None:
    """opencode's ``Token.estimate`` is ``Math.round(length / 4)``: halves round up."""
    assert [output_tokens("x" * n) for n in (2, 6, 10, 14)] == [1, 2, 3, 4]


# --- property -----------------------------------------------------------------------------------


_REASONS: list[PruneReason] = ["normal", "post-compaction", "payload-limit"]


def _protected_part_ids(messages: Sequence[Message]) -> set[str]:
    """The parts of the last two turns: from the second newest user message on."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    start = users[-2] if len(users) >= 2 else 0
    return {p.id for m in messages[start:] for p in m.parts}


@st.composite
def _sessions(draw: st.DrawFn) -> list[Event]:
    """A generated session followed by up to three plain turns, so that its tool outputs
    fall out of the protected turns more often."""
    events = draw(session_events())
    later = SessionBuilder(started=False, start_ms=max(e.time_ms for e in events) + 1000)
    for n in range(draw(st.integers(0, 3))):
        _turn(later, f"later {n}")
    return events + later.events


@PROPERTY
@given(_sessions(), st.integers(0, 5_000), st.integers(0, 1_000), st.sampled_from(_REASONS))
def test_a_plan_only_names_old_completed_uncleared_unprotected_outputs(
    events: list[Event], protect_tokens: int, minimum_tokens: int, reason: PruneReason
) -> None:
    validate_events(SessionIndex("ses_test"), events)
    messages = view_messages(_history(events), ViewOptions())
    plan = plan_prune(
        messages, reason=reason, protect_tokens=protect_tokens, minimum_tokens=minimum_tokens
    )
    if plan is None:
        return
    parts = {p.id: p for m in messages for p in m.parts}
    named = [parts[part_id] for part_id in plan.part_ids]
    assert not set(plan.part_ids) & _protected_part_ids(messages)
    assert list(plan.part_ids) == sorted(set(plan.part_ids))
    outputs = []
    for part in named:
        assert isinstance(part, ToolPart)
        assert part.tool != "skill"
        assert isinstance(part.state, ToolCompleted)
        assert part.state.compacted_ms is None
        outputs.append(part.state.output)
    assert plan.tokens == sum(output_tokens(o) for o in outputs) > minimum_tokens
    assert plan.reason == reason
