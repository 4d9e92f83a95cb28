"""Specification of ``contextledger.policy._prune``: opencode's prune planner, MiMo's pressure
tiers and the cost-aware mode.

Scenario ids name their source: ``9.2#n`` is opencode-kilo.md §9.2 (opencode's
``compaction.test.ts``); the algorithm is §6.1. The ``mimo`` tests adapt MiMo's
``compaction-prune.test.ts`` and ``prune.test.ts`` (mimo-pi.md §3 and §6).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, cast

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest import approx

from contextledger.config import Config, PruneConfig, PruneMode
from contextledger.events import (
    MAIN_AGENT,
    Event,
    FilePart,
    ModelRef,
    PartsStripped,
    ReasoningPart,
    RecordedEvent,
    ToolOutputCleared,
    ToolOutputTrimmed,
    is_media,
)
from contextledger.events._catalogue import PruneReason
from contextledger.events._parts import TextPart, ToolCompleted, ToolPart, Usage
from contextledger.history import History, validate_events
from contextledger.history._projection import Message
from contextledger.history._validation import SessionIndex
from contextledger.history._view import (
    CLEARED_OUTPUT,
    ViewOptions,
    is_real_user,
    model_view,
    soft_trimmed,
    view_messages,
)
from contextledger.policy._overflow import pressure_level
from contextledger.policy._prune import (
    PROTECTED_TURNS,
    CostComparison,
    Plan,
    PrunePlan,
    StripPlan,
    TrimPlan,
    cache_cold,
    output_tokens,
    plan_after_turn,
    plan_batch,
    plan_cost,
    plan_events,
    plan_prune,
    plan_strip,
    plan_tiers,
    prune_candidates,
    prune_pays,
    trimmed_tokens,
)
from contextledger.prices._multipliers import DEFAULT_PRICE, Price, price_for
from contextledger.testing import check_tool_pairs, session_events
from contextledger.testing._builder import SessionBuilder
from contextledger.vocabulary._messages import ModelMessage, ModelToolResult
from contextledger.vocabulary._models import Model, ModelLimits

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NOW = 10_000_000
COLD = NOW - 300_001  # the last assistant message finished more than five minutes ago
WARM = NOW - 300_000


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


@pytest.mark.parametrize(("tool", "compacted"), [("bash", NOW), ("skill", None)])
def test_9_2_13_14_applying_the_prune_compacts_the_bash_output_but_never_the_skill_output(
    tool: str, compacted: int | None
) -> None:
    b, call = _opencode_session(tool)
    plans: list[Plan] = [p for p in [plan_prune(_view(b))] if p is not None]
    b.events.extend(plan_events(plans, session_id=b.session_id, time_ms=NOW))
    history = _history(b.events)
    assert _compacted_ms(history, call) == compacted
    assert _output(history, call) == "x" * 200_000


def test_9_4_78_the_prune_reaches_the_tail_a_compaction_kept_and_clears_only_it() -> None:
    """Kilo's prune projection: tail, tail_reply (a retained tool output), the compaction
    keeping from tail, its summary, then next and current (with many outputs). The walk goes
    through the kept tail (it follows the summary in the view) and clears exactly its output;
    the summarised output before it is not in the view and is left alone."""
    b = SessionBuilder()
    (summarised,) = _turn(b, "summarised", ("bash", _tokens(60_000)))
    tail = b.user("tail")
    tail_reply = b.assistant(tail)
    retained = b.tool_call(tail_reply, "read")
    b.tool_result(retained, _tokens(60_000))
    b.finish(tail_reply, "tool-calls")
    b.compact("## Goal\nthe summary", tail_start_id=tail)
    _turn(b, "next")
    _turn(b, "current", *[("bash", _tokens(30_000))] * 4)
    view = _view(b)
    assert tail_reply in [m.id for m in view]
    plan = plan_prune(view, reason="post-compaction")
    assert plan == PrunePlan((retained,), 60_000, "post-compaction")
    b.events.extend(plan_events([plan], session_id=b.session_id, time_ms=NOW))
    history = _history(b.events)
    assert [_compacted_ms(history, p) for p in (retained, summarised)] == [NOW, None]
    sent = model_view(history)
    check_tool_pairs(sent)
    outputs = [c.output for m in sent for c in m.content if isinstance(c, ModelToolResult)]
    assert outputs[0] == CLEARED_OUTPUT and _tokens(60_000) not in outputs


def _completed(history: History, part_id: str) -> ToolCompleted:
    part = history.part(part_id)
    assert isinstance(part, ToolPart) and isinstance(part.state, ToolCompleted)
    return part.state


def _compacted_ms(history: History, part_id: str) -> int | None:
    return _completed(history, part_id).compacted_ms


def _output(history: History, part_id: str) -> str:
    return _completed(history, part_id).output


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


def test_a_synthetic_user_message_starts_no_protected_turn() -> None:
    # An attachment the client sent after the previous turn's work (a changed file, a hook's
    # output) belongs to that turn: the previous turn's output stays protected.
    b = SessionBuilder()
    (previous,) = _turn(b, "previous", ("bash", _tokens(60_000)))
    b.user("[edited_text_file] src/app.py", synthetic=True)
    b.user("[diagnostics] src/app.py:3: unused import", synthetic=True)
    _turn(b, "current")
    assert plan_prune(_view(b)) is None
    _turn(b, "next")
    assert plan_prune(_view(b)) == PrunePlan((previous,), 60_000, "normal")


def test_a_message_of_runtime_text_only_starts_no_protected_turn() -> None:
    # A compaction's "continue" message: a user message whose only text is synthetic.
    b = SessionBuilder()
    _turn(b, "previous", ("bash", _tokens(60_000)))
    b.text(b.user(), "Continue if you have next steps.", synthetic=True)
    _turn(b, "current")
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


def _last_turns(messages: Sequence[Message], turns: int) -> Sequence[Message]:
    """The messages of the last ``turns`` turns: from the ``turns``-th newest user message a
    person wrote on (all of them when there are fewer)."""
    users = [i for i, m in enumerate(messages) if is_real_user(m)]
    return messages[users[-turns] if len(users) >= turns else 0 :]


def _turn_parts(messages: Sequence[Message], turns: int) -> set[str]:
    """The parts of the last ``turns`` turns."""
    return {p.id for m in _last_turns(messages, turns) for p in m.parts}


@st.composite
def _sessions(draw: st.DrawFn) -> list[Event]:
    """A generated session, sometimes a turn with an image, reasoning, a bash output and a
    skill output (something for every tier to act on), then up to four plain turns, so that
    tool outputs fall out of the protected turns more often."""
    events = draw(session_events())
    later = SessionBuilder(started=False, start_ms=max(e.time_ms for e in events) + 1000)
    later._calls = 10_000  # call ids after the generated session's
    work = draw(st.booleans())
    if work:
        size = draw(st.sampled_from([10, 1_000, 3_000]))
        _media_and_reasoning_turn(later, "old work", size)
        _turn(later, "old skill", ("skill", _tokens(size)))
    for n in range(draw(st.integers(2 if work else 0, 4))):
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
    assert not set(plan.part_ids) & _turn_parts(messages, PROTECTED_TURNS)
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


def _synthetic_user(n: int) -> Message:
    """A user message the client sent on its own (one text part)."""
    message_id = f"msg_note{n:04d}"
    text = TextPart(id=f"prt_note{n:04d}", message_id=message_id, text=f"note {n} src/a.py")
    return Message(
        id=message_id, role="user", agent="build", agent_id=MAIN_AGENT, synthetic=True, parts=[text]
    )


@PROPERTY
@given(_sessions(), st.lists(st.integers(0, 200), max_size=6), st.integers(0, 5_000))
def test_synthetic_user_messages_change_no_prune_or_strip_plan(
    events: list[Event], at: list[int], protect_tokens: int
) -> None:
    messages = view_messages(_history(events), ViewOptions())
    noted = list(messages)
    for n, index in enumerate(sorted(at, reverse=True)):
        noted.insert(min(index, len(noted)), _synthetic_user(n))
    for protected_turns in (2, 3, 5):
        assert plan_strip(noted, protected_turns=protected_turns) == plan_strip(
            messages, protected_turns=protected_turns
        )
    assert plan_prune(noted, protect_tokens=protect_tokens, minimum_tokens=0) == plan_prune(
        messages, protect_tokens=protect_tokens, minimum_tokens=0
    )


# --- MiMo's tiers: compaction-prune.test.ts and prune.test.ts (mimo-pi.md §3, §6) ----------------

MIMO = PruneConfig(enabled=True, mode="mimo")


def _tiers(b: SessionBuilder, level: int, last: int | None = COLD, **config: Any) -> list[Plan]:
    return plan_tiers(
        _view(b),
        level=level,
        now_ms=NOW,
        last_finished_ms=last,
        config=msgspec.structs.replace(MIMO, **config),
    )


def _mimo_session(tool: str = "read") -> tuple[SessionBuilder, str, str]:
    """compaction-prune.test.ts: a 200,000-character ``tool`` output more than two user turns
    back, then a recent ``edit`` with the output "small"; the two tool part ids."""
    b = SessionBuilder()
    (old,) = _turn(b, "first", (tool, "x" * 200_000))
    (recent,) = _turn(b, "second", ("edit", "small"))
    _turn(b, "third")
    return b, old, recent


def test_mimo_an_old_200k_read_output_is_trimmed_at_level_1_and_cleared_at_level_2() -> None:
    b, old, _ = _mimo_session()
    assert _tiers(b, 1) == [TrimPlan(old, 1536, 1536)]
    assert _tiers(b, 2) == [PrunePlan((old,), 50_000, "pressure")]
    assert _tiers(b, 3) == _tiers(b, 2)


def test_mimo_a_recent_small_edit_output_is_kept() -> None:
    b, old, recent = _mimo_session()
    planned = {i for plan in _tiers(b, 1) + _tiers(b, 2) for i in _ids(plan)}
    assert old in planned and recent not in planned


def test_mimo_a_protected_skill_output_is_kept() -> None:
    b, _, _ = _mimo_session("skill")
    assert _tiers(b, 1) == [] and _tiers(b, 2) == []


def test_mimo_a_tiny_session_is_unchanged() -> None:
    b = SessionBuilder()
    _turn(b, "hi", ("read", "small"))
    assert _tiers(b, 1) == [] and _tiers(b, 3) == []


def test_mimo_a_warm_cache_changes_nothing() -> None:
    b, old, _ = _mimo_session()
    assert _tiers(b, 1, WARM) == [] and _tiers(b, 3, WARM) == []
    assert _tiers(b, 1, WARM, cache_ttl_ms=299_999) == [TrimPlan(old, 1536, 1536)]


def test_mimo_no_pressure_changes_nothing() -> None:
    b, _, _ = _mimo_session()
    assert _tiers(b, 0) == [] and _tiers(b, 0, None) == []


def test_mimo_with_no_finished_assistant_the_cache_counts_as_cold() -> None:
    b, old, _ = _mimo_session()
    assert _tiers(b, 1, None) == [TrimPlan(old, 1536, 1536)]


def test_mimo_prune_test_a_planned_prune_leaves_the_output_in_the_log() -> None:
    """prune.test.ts: a 100K/32K model at 80K tokens with an old 200,000-character bash output;
    the output stays as it was (here it is only sent as a placeholder from now on)."""
    model = Model(provider_id="x", model_id="y", limits=ModelLimits(context=100_000, output=32_000))
    level = pressure_level(model, Usage(input=80_000), Config())
    b, old, _ = _mimo_session("bash")
    plans = _tiers(b, level)
    b.events.extend(plan_events(plans, session_id=b.session_id, time_ms=NOW))
    part = _history(b.events).part(old)
    assert isinstance(part, ToolPart) and isinstance(part.state, ToolCompleted)
    assert part.state.output == "x" * 200_000 and part.state.compacted_ms == NOW


def test_cache_cold_boundaries() -> None:
    assert not cache_cold(1_000, 700, 300)
    assert cache_cold(1_001, 700, 300)
    assert cache_cold(0, None, 300)


def test_mimo_level_1_trims_only_outputs_over_4096_chars_to_1536_and_1536() -> None:
    b = SessionBuilder()
    (at,) = _turn(b, "at the threshold", ("bash", "a" * 4096))
    (over,) = _turn(b, "over it", ("bash", "b" * 4097))
    _turn(b, "fills the protected 40,000 tokens", ("bash", _tokens(40_000)))
    _turn(b, "previous")
    _turn(b, "current")
    assert prune_candidates(_view(b)).part_ids == (at, over)
    assert _tiers(b, 1) == [TrimPlan(over, 1536, 1536)]


def test_mimo_an_output_trimmed_as_much_or_more_already_is_not_trimmed_again() -> None:
    b, old, _ = _mimo_session()
    b.trim(old, 1536, 1536)
    assert _tiers(b, 1) == []
    b, old, _ = _mimo_session()
    b.trim(old, 3000, 72)
    assert _tiers(b, 1) == []
    b, old, _ = _mimo_session()
    b.trim(old, 2000, 1536)
    assert _tiers(b, 1) == [TrimPlan(old, 1536, 1536)]


def test_mimo_level_1_keeps_outputs_that_trimming_would_not_shorten() -> None:
    b, _, _ = _mimo_session()
    assert _tiers(b, 1, trim_keep_chars=100_000) == []


def _media_and_reasoning_turn(b: SessionBuilder, text: str, output_tokens: int) -> list[str]:
    """A user message with an image and a reply with reasoning and one bash output; the
    image, reasoning and tool part ids."""
    user = b.user(text, files=[("image/png", f"{text}.png")])
    image = _history(b.events).message(user).parts[-1].id
    reply = b.assistant(user)
    thought = b.reasoning(reply, f"thinking about {text}")
    call = b.tool_call(reply, "bash")
    b.tool_result(call, _tokens(output_tokens))
    b.finish(reply, "tool-calls")
    return [image, thought, call]


def test_mimo_level_2_clears_over_20000_and_strips_media_and_reasoning_older_than_3_turns() -> None:
    b = SessionBuilder()
    image, thought, old = _media_and_reasoning_turn(b, "oldest", 30_000)
    _media_and_reasoning_turn(b, "kept by the 40,000", 40_000)
    _media_and_reasoning_turn(b, "previous", 10)
    _media_and_reasoning_turn(b, "current", 10)
    assert _tiers(b, 2) == [
        PrunePlan((old,), 30_000, "pressure"),
        StripPlan((image, thought), "pressure"),
    ]


def test_mimo_level_2_never_strips_within_the_last_3_turns() -> None:
    b = SessionBuilder()
    for text in ("third newest", "previous", "current"):
        _media_and_reasoning_turn(b, text, 10)
    assert _tiers(b, 2) == []
    assert plan_strip(_view(b), protected_turns=2) is not None


def test_mimo_level_2_strips_even_when_clearing_would_free_too_little() -> None:
    b = SessionBuilder()
    image, thought, _ = _media_and_reasoning_turn(b, "oldest", 20_000)
    _media_and_reasoning_turn(b, "kept by the 40,000", 40_000)
    _media_and_reasoning_turn(b, "previous", 10)
    _media_and_reasoning_turn(b, "current", 10)
    assert _tiers(b, 2) == [StripPlan((image, thought), "pressure")]


def test_strip_never_touches_the_last_two_turns_even_when_configured_to_protect_one() -> None:
    b = SessionBuilder()
    image, thought, _ = _media_and_reasoning_turn(b, "third newest", 10)
    _media_and_reasoning_turn(b, "previous", 10)
    _media_and_reasoning_turn(b, "current", 10)
    assert plan_strip(_view(b), protected_turns=1) == StripPlan((image, thought), "pressure")
    assert _tiers(b, 2, strip_protected_turns=1) == [StripPlan((image, thought), "pressure")]


def test_strip_counts_turns_from_user_messages_a_person_wrote() -> None:
    b = SessionBuilder()
    image, thought, _ = _media_and_reasoning_turn(b, "oldest", 10)
    kept = _media_and_reasoning_turn(b, "third newest", 10)[:2]
    b.user("[skill_listing] - review: review a change", synthetic=True)
    _media_and_reasoning_turn(b, "previous", 10)
    b.user("[diagnostics] src/app.py:3: unused import", synthetic=True)
    _media_and_reasoning_turn(b, "current", 10)
    plan = plan_strip(_view(b))
    assert plan == StripPlan((image, thought), "pressure")
    assert not set(kept) & set(plan.part_ids)


def test_strip_skips_parts_stripped_already_non_media_files_and_assistant_files() -> None:
    b = SessionBuilder()
    user = b.user("old", files=[("image/png", "a.png"), ("text/plain", "notes.txt")])
    image, text_file = (p.id for p in _history(b.events).message(user).parts[1:])
    reply = b.assistant(user)
    first = b.reasoning(reply, "one")
    second = b.reasoning(reply, "two")
    b.finish(reply)
    b.strip([first])
    for n in range(3):
        b.user(f"turn {n}")
    assert plan_strip(_view(b)) == StripPlan((image, second), "pressure")
    assert text_file not in plan_strip(_view(b)).part_ids  # type: ignore[union-attr]


def test_the_walk_is_shared_by_every_mode() -> None:
    b, old, _ = _mimo_session()
    candidates = prune_candidates(_view(b))
    assert candidates.part_ids == (old,) and candidates.tokens == 50_000
    assert plan_prune(_view(b)) == PrunePlan(candidates.part_ids, candidates.tokens, "normal")


# --- cost mode ----------------------------------------------------------------------------------

SONNET = price_for("anthropic", "claude-sonnet-4")  # $3 / MTok, read 0.1x, write 1.25x
GPT_5 = price_for("openai", "gpt-5")  # $1.25 / MTok, read 0.1x, no write fee


def _pays(warm: bool, turns: int, freed: int = 50_000, price: Price = SONNET) -> CostComparison:
    """A 100,000-token prompt whose first change is 20,000 tokens in."""
    return prune_pays(
        prompt_tokens=100_000,
        cut_tokens=20_000,
        freed_tokens=freed,
        warm=warm,
        turns=turns,
        price=price,
    )


def _expect(pays: bool, keep: float, prune: float) -> CostComparison:
    """A comparison equal to any whose costs are approximately ``keep`` and ``prune``."""
    return CostComparison(pays, cast(float, approx(keep)), cast(float, approx(prune)))


def test_cost_warm_cache_long_remaining_session_prunes() -> None:
    # keep:  10 x 0.1 x 100,000 = 100,000 token-prices = $0.30
    # prune: 0.1 x 20,000 + 1.25 x 30,000 + 9 x 0.1 x 50,000 = 84,500 = $0.2535
    assert _pays(warm=True, turns=10) == _expect(True, 0.30, 0.2535)


def test_cost_warm_cache_one_turn_left_keeps() -> None:
    # keep: 0.1 x 100,000 = $0.03; prune: 0.1 x 20,000 + 1.25 x 30,000 = 39,500 = $0.1185
    assert _pays(warm=True, turns=1) == _expect(False, 0.03, 0.1185)


def test_cost_cold_cache_prunes_whenever_something_is_freed() -> None:
    # keep: 1.25 x 100,000 = $0.375; prune: 1.25 x 99,999 = $0.37499625
    assert _pays(warm=False, turns=1, freed=1) == _expect(True, 0.375, 0.37499625)
    assert _pays(warm=False, turns=1, freed=0) == _expect(False, 0.375, 0.375)


def test_cost_without_a_write_fee_rewriting_is_cheaper() -> None:
    # keep: n x 0.1 x 100,000; prune: 0.1 x 20,000 + 1.0 x 30,000 + (n - 1) x 0.1 x 50,000
    assert _pays(warm=True, turns=2, price=GPT_5) == _expect(False, 0.025, 0.04625)
    assert _pays(warm=True, turns=10, price=GPT_5) == _expect(True, 0.125, 0.09625)


def test_cost_freed_tokens_never_exceed_what_follows_the_cut() -> None:
    assert _pays(warm=True, turns=10, freed=500_000) == _pays(warm=True, turns=10, freed=80_000)


@given(
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.booleans(),
    st.integers(1, 50),
    st.sampled_from([SONNET, GPT_5, price_for("deepseek", "deepseek-chat"), DEFAULT_PRICE]),
)
def test_cost_more_remaining_turns_never_turn_a_prune_into_a_keep(
    prompt: int, cut: int, freed: int, warm: bool, turns: int, price: Price
) -> None:
    def pays(n: int) -> CostComparison:
        return prune_pays(
            prompt_tokens=prompt,
            cut_tokens=cut,
            freed_tokens=freed,
            warm=warm,
            turns=n,
            price=price,
        )

    if pays(turns).pays:
        assert pays(turns + 1).pays
    if freed == 0 or cut >= prompt:
        assert not pays(turns).pays
    if not warm and freed > 0 and cut < prompt:
        assert pays(turns).pays


def _cost_session() -> tuple[list[Message], str, dict[str, int]]:
    """An old 60,000-token bash output, a previous turn whose reply is 30,000 tokens and the
    current turn; part estimates set by hand (everything else 0)."""
    b = SessionBuilder()
    (old,) = _turn(b, "old", ("bash", _tokens(60_000)))
    reply = b.assistant(b.user("previous"))
    text = b.text(reply, "answer")
    b.finish(reply)
    _turn(b, "current")
    messages = _view(b)
    tokens = {p.id: 0 for m in messages for p in m.parts}
    tokens.update({old: 60_000, text: 30_000})
    return messages, old, tokens


def _plan_cost(warm: bool, turns: int) -> PrunePlan | None:
    messages, _, tokens = _cost_session()
    return plan_cost(
        messages,
        config=PruneConfig(enabled=True, mode="cost", expected_turns=turns),
        prompt_tokens=130_000,
        warm=warm,
        price=SONNET,
        part_tokens=tokens,
    )


def test_cost_plan_warm_cache_long_remaining_session_prunes() -> None:
    # P = 130,000, cut c = 130,000 - 90,000 = 40,000, F = 60,000:
    # keep 10 x 13,000 = 130,000 > prune 0.1 x 40,000 + 1.25 x 30,000 + 9 x 0.1 x 70,000
    # = 104,500 (token-prices)
    _, old, _ = _cost_session()
    assert _plan_cost(warm=True, turns=10) == PrunePlan((old,), 60_000, "cost")


def test_cost_plan_warm_cache_one_turn_left_keeps() -> None:
    # keep 13,000 < prune 41,500
    assert _plan_cost(warm=True, turns=1) is None


def test_cost_plan_cold_cache_prunes() -> None:
    # keep 1.25 x 130,000 > prune 1.25 x 70,000
    _, old, _ = _cost_session()
    assert _plan_cost(warm=False, turns=1) == PrunePlan((old,), 60_000, "cost")


def test_cost_plan_has_nothing_to_weigh_without_candidates() -> None:
    b = SessionBuilder()
    _turn(b, "only", ("bash", _tokens(100_000)))
    plan = plan_cost(_view(b), config=PruneConfig(mode="cost"), prompt_tokens=200_000, warm=False)
    assert plan is None


# --- the entry point ----------------------------------------------------------------------------


def _after_turn(b: SessionBuilder, last: int | None, **config: Any) -> list[Plan]:
    return plan_after_turn(
        _view(b), config=PruneConfig(**config), level=2, now_ms=NOW, last_finished_ms=last
    )


def _cost_after_turn(last: int | None, price: Price = SONNET, **config: Any) -> list[Plan]:
    messages, _, tokens = _cost_session()
    return plan_after_turn(
        messages,
        config=PruneConfig(mode="cost", expected_turns=1, **config),
        level=0,
        now_ms=NOW,
        last_finished_ms=last,
        prompt_tokens=130_000,
        price=price,
        part_tokens=tokens,
    )


def test_after_turn_the_normal_prune_is_off_by_default() -> None:
    b, _, _ = _mimo_session()
    for mode in ("opencode", "mimo", "cost"):
        assert _after_turn(b, COLD, mode=mode) == []
    assert _cost_after_turn(COLD) == []


def test_after_turn_each_mode_plans_its_own_way() -> None:
    b, old, _ = _mimo_session()
    assert _after_turn(b, WARM, enabled=True) == [PrunePlan((old,), 50_000, "normal")]
    assert _after_turn(b, WARM, enabled=True, mode="mimo") == []
    assert _after_turn(b, COLD, enabled=True, mode="mimo") == [
        PrunePlan((old,), 50_000, "pressure")
    ]
    _, old, _ = _cost_session()
    assert _cost_after_turn(WARM, enabled=True) == []
    assert _cost_after_turn(COLD, enabled=True) == [PrunePlan((old,), 60_000, "cost")]


def test_after_turn_the_cost_mode_uses_the_prices_cache_lifetime() -> None:
    _, old, _ = _cost_session()
    deepseek = price_for("deepseek", "deepseek-chat")  # an hour
    assert _cost_after_turn(COLD, deepseek, enabled=True) == []
    expired = NOW - deepseek.ttl_s * 1000 - 1
    assert _cost_after_turn(expired, deepseek, enabled=True) == [PrunePlan((old,), 60_000, "cost")]


def test_plan_events_stamps_each_plan() -> None:
    plans: list[Plan] = [
        PrunePlan(("prt_1",), 30_000, "pressure"),
        TrimPlan("prt_2", 1536, 1536),
        StripPlan(("prt_3", "prt_4"), "pressure"),
    ]
    assert plan_events(plans, session_id="ses_x", time_ms=5, agent_id="explore") == [
        ToolOutputCleared(
            session_id="ses_x",
            agent_id="explore",
            time_ms=5,
            part_ids=("prt_1",),
            reason="pressure",
        ),
        ToolOutputTrimmed(
            session_id="ses_x",
            agent_id="explore",
            time_ms=5,
            part_id="prt_2",
            head_chars=1536,
            tail_chars=1536,
        ),
        PartsStripped(
            session_id="ses_x",
            agent_id="explore",
            time_ms=5,
            part_ids=("prt_3", "prt_4"),
            reason="pressure",
        ),
    ]


# --- properties of every mode ---------------------------------------------------------------------


def _ids(plan: Plan) -> tuple[str, ...]:
    return (plan.part_id,) if isinstance(plan, TrimPlan) else plan.part_ids


_CONFIGS = st.builds(
    PruneConfig,
    enabled=st.just(True),
    protect_tokens=st.integers(0, 2_000),
    minimum_tokens=st.integers(0, 500),
    trim_threshold_chars=st.integers(1, 6_000),
    trim_keep_chars=st.integers(1, 2_000),
    strip_protected_turns=st.integers(1, 4),
    expected_turns=st.integers(1, 20),
)


_MODES: list[PruneMode] = ["opencode", "mimo", "cost"]
_SLICES = st.sampled_from([None, MAIN_AGENT, "explore"])
_VIEW_OPTIONS = st.builds(
    ViewOptions,
    model=st.sampled_from([None, ModelRef(provider_id="openai", model_id="gpt-5")]),
    strip_media=st.booleans(),
    historical_media=st.sampled_from(["compaction", "latest-user", "keep"]),
    agent_id=_SLICES,
)


class _AfterTurn(NamedTuple):
    """A generated session, the slice it was planned on, its view messages, the config and
    the plans of the after-turn prune."""

    events: list[Event]
    history: History
    options: ViewOptions
    messages: list[Message]
    config: PruneConfig
    plans: list[Plan]

    def applied(self) -> History:
        """The history once the plans' events (checked valid) are appended."""
        events = plan_events(
            self.plans,
            session_id="ses_test",
            time_ms=NOW,
            agent_id=self.options.agent_id or MAIN_AGENT,
        )
        validate_events(self.history.index, events)
        return _history([*self.events, *events])


@st.composite
def _after_turn_cases(draw: st.DrawFn, mode: PruneMode) -> _AfterTurn:
    """The after-turn prune of ``mode`` planned on a generated session (every tier of
    ``mimo`` drawn: trims at level 1, clears and strips from level 2)."""
    events = draw(_sessions())
    history = _history(events)
    options = ViewOptions(agent_id=draw(_SLICES))
    messages = view_messages(history, options)
    config = msgspec.structs.replace(draw(_CONFIGS), mode=mode)
    plans = plan_after_turn(
        messages,
        config=config,
        level=draw(st.sampled_from([0, 1, 1, 2, 2, 3])),
        now_ms=NOW,
        last_finished_ms=draw(st.none() | st.integers(NOW - 4_000_000, NOW)),
        prompt_tokens=draw(st.integers(0, 2_000_000)),
        price=draw(st.sampled_from([SONNET, GPT_5, price_for("deepseek", "deepseek-chat")])),
        part_tokens=history.state.part_tokens,
    )
    return _AfterTurn(events, history, options, messages, config, plans)


@pytest.mark.parametrize("mode", _MODES)
@PROPERTY
@given(st.data())
def test_a_plan_after_a_turn_only_names_what_it_may_and_its_events_validate(
    mode: PruneMode, data: st.DataObject
) -> None:
    case = data.draw(_after_turn_cases(mode))
    history, messages, config = case.history, case.messages, case.config
    owners = {p.id: m for m in messages for p in m.parts}
    for plan in case.plans:
        named = [owners[part_id].parts for part_id in _ids(plan)]
        assert all(named)
        if isinstance(plan, StripPlan):
            assert not set(plan.part_ids) & _turn_parts(messages, config.strip_protected_turns)
            for part_id in plan.part_ids:
                message = owners[part_id]
                part = history.part(part_id)
                assert part_id not in message.stripped
                assert isinstance(part, ReasoningPart) or (
                    message.role == "user" and isinstance(part, FilePart) and is_media(part.mime)
                )
            continue
        assert not set(_ids(plan)) & _turn_parts(messages, PROTECTED_TURNS)
        for part_id in _ids(plan):
            part = history.part(part_id)
            assert isinstance(part, ToolPart) and part.tool not in config.protected_tools
            assert isinstance(part.state, ToolCompleted) and part.state.compacted_ms is None
    case.applied()


@pytest.mark.parametrize("mode", _MODES)
@PROPERTY
@given(st.data())
def test_no_prune_of_any_mode_or_tier_separates_a_call_from_its_result(
    mode: PruneMode, data: st.DataObject
) -> None:
    case = data.draw(_after_turn_cases(mode))
    after = case.applied()
    check_tool_pairs(model_view(after, case.options))
    check_tool_pairs(model_view(after, data.draw(_VIEW_OPTIONS, label="another view")))


@pytest.mark.parametrize("mode", _MODES)
@PROPERTY
@given(st.data())
def test_no_prune_of_any_mode_or_tier_touches_the_last_two_turns_or_a_protected_tool(
    mode: PruneMode, data: st.DataObject
) -> None:
    case = data.draw(_after_turn_cases(mode))
    after = case.applied()
    last_two = {m.id for m in _last_turns(case.messages, PROTECTED_TURNS)}

    def sent(history: History) -> list[ModelMessage]:
        return [m for m in model_view(history, case.options) if m.source_id in last_two]

    assert sent(after) == sent(case.history)
    for message in case.messages:
        if message.id in last_two:
            assert after.message(message.id) == case.history.message(message.id)
        for part in message.parts:
            if isinstance(part, ToolPart) and part.tool in case.config.protected_tools:
                # Compared with the history's part: a view message may be a media-stripped copy.
                assert after.part(part.id) == case.history.part(part.id)


# --- batch ----------------------------------------------------------------------------------------


def _loop(*sizes: int) -> tuple[SessionBuilder, list[str]]:
    """One user turn whose tool loop calls bash once a step, with outputs of these many tokens
    (oldest first); the tool part ids."""
    b = SessionBuilder()
    user = b.user("one long tool loop")
    calls = []
    for size in sizes:
        reply = b.assistant(user)
        call = b.tool_call(reply, "bash")
        b.tool_result(call, _tokens(size))
        b.finish(reply, "tool-calls")
        calls.append(call)
    return b, calls


def _batch(
    b: SessionBuilder,
    *,
    prompt: int,
    protect: int = 10_000,
    pressure: int = 100_000,
    relief: int = 60_000,
    warm: bool = True,
    turns: int = 10,
    keep: int = 512,
    compaction_due: Callable[[int], bool] | None = None,
) -> list[TrimPlan]:
    return plan_batch(
        _view(b),
        config=PruneConfig(enabled=True, mode="batch", trim_keep_chars=keep),
        protect_tokens=protect,
        prompt_tokens=prompt,
        pressure_tokens=pressure,
        relief_tokens=relief,
        warm=warm,
        turns=turns,
        price=SONNET,
        compaction_due=compaction_due,
    )


def test_batch_trims_every_old_output_of_a_tool_loop_at_once_under_pressure() -> None:
    # No turn is protected: the outputs of the loop's own older steps are trimmed, the newest
    # 10,000 tokens of tool output are kept.
    b, calls = _loop(20_000, 20_000, 20_000, 5_000, 5_000)
    assert _batch(b, prompt=100_000) == [TrimPlan(c, 512, 512) for c in calls[:3]]


def test_batch_leaves_to_the_compaction_a_trim_that_brings_too_little_relief() -> None:
    b, _ = _loop(20_000, 5_000, 5_000)
    assert _batch(b, prompt=100_000) == []  # 100,000 - 19,744 is over 60,000
    assert _batch(b, prompt=100_000, relief=81_000) != []


def test_batch_below_the_pressure_trims_only_when_the_rewrite_pays() -> None:
    # The whole prompt is written again (Anthropic reads its cache only near its breakpoints):
    # with a warm cache, trimming F of P pays over n calls when F (w + (n - 1) r) > P (w - r).
    b, calls = _loop(20_000, 5_000, 5_000)
    freed = 20_000 - output_tokens(soft_trimmed(_tokens(20_000), (512, 512)))
    paying = int(freed * (1.25 + 9 * 0.1) / (1.25 - 0.1))
    assert _batch(b, prompt=paying - 1) == [TrimPlan(calls[0], 512, 512)]
    assert _batch(b, prompt=paying + 1) == []
    assert _batch(b, prompt=paying + 1, warm=False) == [TrimPlan(calls[0], 512, 512)]


def test_batch_trims_in_place_of_an_early_compaction_only_when_the_trim_makes_it_not_due() -> None:
    b, calls = _loop(20_000, 5_000, 5_000)
    freed = trimmed_tokens(_tokens(20_000), 512)

    def over(limit: int) -> Callable[[int], bool]:
        return lambda tokens: 100_000 - tokens > limit  # due while the view is over limit

    spared = over(100_000 - freed)
    assert _batch(b, prompt=50_000, compaction_due=spared) == [TrimPlan(calls[0], 512, 512)]
    assert _batch(b, prompt=50_000, compaction_due=over(100_000 - freed - 1)) == []
    # Not due at all: the trim must pay on its own (19,730 tokens of 50,000 do not).
    assert _batch(b, prompt=50_000, compaction_due=over(100_000)) == []


def test_batch_stops_at_an_output_already_trimmed_and_skips_outputs_a_trim_would_not_shorten() -> (
    None
):
    b, calls = _loop(20_000, 100, 20_000, 5_000, 5_000)
    b.trim(calls[0], 512, 512)
    assert _batch(b, prompt=100_000, relief=100_000) == [TrimPlan(calls[2], 512, 512)]


def test_batch_never_trims_a_protected_tool() -> None:
    b = SessionBuilder()
    user = b.user("read the skill")
    for tool in ("skill", "bash", "bash"):
        reply = b.assistant(user)
        b.tool_result(b.tool_call(reply, tool), _tokens(20_000))
        b.finish(reply, "tool-calls")
    skill, bash, _ = (p.id for m in _view(b) for p in m.parts if isinstance(p, ToolPart))
    assert _batch(b, prompt=100_000, relief=100_000, protect=20_000) == [TrimPlan(bash, 512, 512)]
    assert skill != bash


@PROPERTY
@given(
    sizes=st.lists(st.integers(0, 30_000), min_size=1, max_size=8),
    prompt=st.integers(0, 300_000),
    protect=st.integers(0, 60_000),
    keep=st.integers(1, 4_000),
)
def test_batch_trims_only_unprotected_outputs_it_shortens(
    sizes: list[int], prompt: int, protect: int, keep: int
) -> None:
    b, calls = _loop(*sizes)
    plans = _batch(b, prompt=prompt, protect=protect, keep=keep, relief=prompt)
    trimmed = {plan.part_id for plan in plans}
    newest = 0
    for call, size in reversed(list(zip(calls, sizes, strict=True))):
        newest += output_tokens(_tokens(size))
        if newest <= protect:
            assert call not in trimmed
    for plan in plans:
        assert (plan.head_chars, plan.tail_chars) == (keep, keep)
        size = sizes[calls.index(plan.part_id)]
        assert trimmed_tokens(_tokens(size), keep) > 0
