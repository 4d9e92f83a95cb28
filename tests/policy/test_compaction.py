"""Specification of ``contextledger.policy._compaction``: the compaction planner.

Scenario ids name their source: ``9.2#n`` is opencode-kilo.md §9.2 (opencode's
``compaction.test.ts``), ``pi`` is mimo-pi.md §9 (pi's ``findCutPoint`` tests), ``mimo``
mimo-pi.md §2 (MiMo Code's compaction). Sessions are written with ``SessionBuilder``; the
requests are open ``CompactionRequested`` events, planned, then completed (or not) the way
the compactor shell does it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from contextledger.config import CompactionConfig, Config, OutputConfig, TokensConfig, ViewConfig
from contextledger.events import Event, RecordedEvent
from contextledger.events._catalogue import (
    AssistantFinished,
    CompactionCompleted,
    CompactionRequested,
    FileRange,
    MessageAdded,
    PartAdded,
)
from contextledger.events._ids import IdGenerator
from contextledger.events._parts import (
    CompactionPart,
    CompactionTrigger,
    FilePart,
    MessageError,
    TextPart,
    Usage,
)
from contextledger.history import History, Message, validate_events
from contextledger.history._validation import SessionIndex
from contextledger.history._view import (
    COMPACTION_PROMPT,
    ViewOptions,
    is_real_user,
    model_view,
    view_messages,
)
from contextledger.policy._compaction import (
    EXHAUSTED_DETAIL,
    CompactionPlan,
    NotACompactionRequest,
    Turn,
    arrived_since,
    arrived_tail,
    attempts_this_turn,
    chunk_budget,
    hide_compactions,
    is_repetitive,
    needs_chunks,
    plan_compaction,
    replay_target,
    rollback_reason,
    select_tail,
    split_chunks,
    tail_budget,
    text_tokens,
    turns,
    view_estimate,
)
from contextledger.policy._overflow import preflight_tokens, usable
from contextledger.policy._templates import OPENCODE, render_summary, summary_prompt
from contextledger.policy._transcript import (
    CONTINUE_TEXT,
    OVERFLOW_CONTEXT_NOTICE,
    OVERFLOW_NOTICE,
    wrap_summary,
)
from contextledger.testing import check_tool_pairs, session_events
from contextledger.testing._builder import SessionBuilder
from contextledger.vocabulary._models import Model, ModelLimits

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _history(events: list[Event]) -> History:
    return History.rebuild(
        "ses_test", [RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, 1)]
    )


def _config(**compaction: Any) -> Config:
    return Config(compaction=CompactionConfig(**compaction))


def _plan(
    b: SessionBuilder, request_id: str, *, usable_tokens: int = 100_000, **compaction: Any
) -> CompactionPlan:
    return plan_compaction(
        _history(b.events), request_id, config=_config(**compaction), usable_tokens=usable_tokens
    )


def _complete(b: SessionBuilder, plan: CompactionPlan, text: str = "the summary") -> str:
    """Write the summary and complete the compaction as the plan says; the summary's id."""
    summary_id = b.summary(plan.request_message_id, text)
    b.add(
        CompactionCompleted,
        request_message_id=plan.request_message_id,
        summary_message_id=summary_id,
        tail_start_id=plan.tail_start_id,
        projection=plan.projection(text),
    )
    return summary_id


def _view_ids(b: SessionBuilder) -> list[str]:
    return [m.id for m in view_messages(_history(b.events), ViewOptions())]


def _exchange(b: SessionBuilder, text: str, answer: str = "done") -> str:
    """A user message and a finished text answer; the user message's id."""
    user = b.user(text)
    reply = b.assistant(user)
    b.text(reply, answer)
    b.finish(reply)
    return user


# --- requests and plans ---------------------------------------------------------------------


def test_9_2_12_an_overflow_request_is_one_user_message_with_one_automatic_overflow_part() -> None:
    b = SessionBuilder()
    request = b.request_compaction(trigger="overflow")
    message = _history(b.events).message(request)
    assert message.role == "user"
    assert [type(p) for p in message.parts] == [CompactionPart]
    part = message.parts[0]
    assert isinstance(part, CompactionPart) and part.auto and part.overflow
    plan = _plan(b, request)
    assert (plan.trigger, plan.auto, plan.overflow) == ("overflow", True, True)
    assert plan.head_ids == () and plan.tail_start_id is None and plan.replay_id is None


def test_9_2_15_only_an_open_compaction_request_can_be_planned() -> None:
    b = SessionBuilder()
    user = b.user("hello")
    reply = b.assistant(user)
    b.finish(reply)
    with pytest.raises(NotACompactionRequest, match=reply):
        _plan(b, reply)
    done = b.compact("summary")
    with pytest.raises(NotACompactionRequest, match="completed already"):
        _plan(b, done)


def test_9_2_18_an_automatic_compaction_continues_with_the_continue_message() -> None:
    b = SessionBuilder()
    _exchange(b, "hello")
    plan = _plan(b, b.request_compaction())
    assert plan.continue_text == CONTINUE_TEXT
    assert plan.continue_text.startswith("Continue if you have next steps")
    assert _plan(b, b.request_compaction(trigger="manual")).continue_text is None


def test_9_2_19_the_tail_keeps_the_last_two_turns() -> None:
    b = SessionBuilder()
    b.user("first")
    second = b.user("second")
    b.user("third")
    plan = _plan(b, b.request_compaction(), tail_turns=2, preserve_recent_tokens=10_000)
    assert plan.tail_start_id == second


def test_9_2_20_the_tail_budget_follows_the_usable_window_with_a_capped_output() -> None:
    b = SessionBuilder()
    b.user("first")
    keep = b.user("x" * 12_000)
    b.user("third")
    config = Config(
        compaction=CompactionConfig(overflow_variant="kilo"), output=OutputConfig(max_tokens=2_000)
    )
    window = usable(
        Model(provider_id="test", model_id="m", limits=ModelLimits(context=20_000, output=10_000)),
        config,
    )
    assert window == 16_000
    assert tail_budget(window, config.compaction) == 4_000
    request = b.request_compaction()
    plan = plan_compaction(_history(b.events), request, config=config, usable_tokens=window)
    assert plan.tail_start_id == keep


def test_9_2_21_the_tail_shrinks_to_what_fits() -> None:
    b = SessionBuilder()
    b.user("first")
    b.user("x" * 2_000)
    keep = b.user("tiny")
    plan = _plan(b, b.request_compaction(), tail_turns=2, preserve_recent_tokens=100)
    assert plan.tail_start_id == keep


def test_9_2_22_a_turn_too_big_for_the_budget_is_summarised() -> None:
    b = SessionBuilder()
    b.user("first")
    b.user("y" * 2_000)
    plan = _plan(b, b.request_compaction(), tail_turns=1, preserve_recent_tokens=20)
    assert plan.tail_start_id is None
    assert "y" * 2_000 in plan.request_text


def _image_turn(b: SessionBuilder) -> None:
    b.user("older")
    recent = b.user("recent image turn")
    url = "data:image/png;base64," + "a" * 4_000
    b.part(
        FilePart(
            id=b.new_part_id(), message_id=recent, mime="image/png", url=url, filename="big.png"
        )
    )


def test_9_2_23_media_the_view_keeps_counts_against_the_tail_and_is_stripped_for_the_summary() -> (
    None
):
    b = SessionBuilder()
    _image_turn(b)
    request = b.request_compaction()
    config = Config(
        compaction=CompactionConfig(tail_turns=1, preserve_recent_tokens=100),
        view=ViewConfig(historical_media="keep"),
    )
    plan = plan_compaction(_history(b.events), request, config=config, usable_tokens=100_000)
    assert plan.tail_start_id is None
    assert "recent image turn" in plan.request_text
    assert "[Attached image/png: big.png]" in plan.request_text
    assert "aaaa" not in plan.request_text


def test_9_2_23_media_the_view_strips_after_compaction_costs_only_its_placeholder() -> None:
    b = SessionBuilder()
    _image_turn(b)
    plan = _plan(b, b.request_compaction(), tail_turns=1, preserve_recent_tokens=100)
    assert plan.tail_start_id is not None
    assert "older" in plan.transcript and "recent image turn" not in plan.transcript


def test_9_2_24_a_turn_that_does_not_fit_keeps_the_suffix_that_does() -> None:
    b = SessionBuilder()
    b.user("older")
    recent = b.user("recent turn")
    large = b.assistant(recent)
    b.text(large, "z" * 2_000)
    b.finish(large)
    keep = b.assistant(recent)
    b.text(keep, "keep tail")
    b.finish(keep)
    request = b.request_compaction()
    plan = _plan(b, request, tail_turns=1, preserve_recent_tokens=100)
    assert plan.tail_start_id == keep
    assert "z" * 2_000 in plan.request_text and "keep tail" not in plan.request_text
    summary = _complete(b, plan)
    view = view_messages(_history(b.events), ViewOptions())
    assert [m.id for m in view][:3] == [request, summary, keep]
    assert view[1].role == "assistant" and view[1].summary
    assert large not in [m.id for m in view]


def test_9_2_25_no_continue_message_when_autocontinue_is_off() -> None:
    b = SessionBuilder()
    _exchange(b, "hello")
    assert _plan(b, b.request_compaction(), autocontinue=False).continue_text is None


def test_9_2_26_an_overflow_replays_the_last_user_message_with_its_media_as_text() -> None:
    b = SessionBuilder()
    _exchange(b, "root")
    replay = b.user("image", files=[("image/png", "cat.png")])
    request = b.request_compaction(trigger="overflow", parent_id=replay)
    plan = _plan(b, request)
    assert plan.replay_id == replay
    assert plan.replay_parts == ("image", "[Attached image/png: cat.png]")
    assert plan.continue_text is None
    assert plan.tail_start_id is None
    assert replay not in plan.head_ids and "root" in plan.transcript


def test_9_2_27_an_overflow_with_nothing_to_replay_explains_the_removed_media() -> None:
    b = SessionBuilder()
    current = b.user("current", files=[("image/png", "cat.png")])
    plan = _plan(b, b.request_compaction(trigger="overflow", parent_id=current))
    assert plan.replay_id is None
    assert plan.head_ids == (current,)
    assert plan.continue_text is not None
    assert "previous request exceeded the provider's size limit" in plan.continue_text
    assert plan.continue_text == f"{OVERFLOW_NOTICE}\n\n{CONTINUE_TEXT}"


def test_9_2_31_the_summary_input_holds_the_head_only() -> None:
    b = SessionBuilder()
    _exchange(b, "older context")
    _exchange(b, "keep this turn")
    _exchange(b, "and this one too")
    plan = _plan(b, b.request_compaction())
    assert "older context" in plan.request_text
    assert "keep this turn" not in plan.request_text
    assert "and this one too" not in plan.request_text
    assert COMPACTION_PROMPT not in plan.request_text


def test_9_2_32_a_second_compaction_updates_the_previous_summary() -> None:
    b = SessionBuilder()
    _exchange(b, "first task")
    first = _plan(b, b.request_compaction(), tail_turns=0)
    _complete(b, first, "summary one")
    _exchange(b, "second task")
    second = _plan(b, b.request_compaction(), tail_turns=0)
    assert second.previous_summary == "summary one"
    text = second.request_text
    assert "<previous-summary>" in text
    assert text.count("summary one") == 1
    assert "## Constraints & Preferences" in text and "## Progress" in text
    assert "second task" in second.transcript and "first task" not in second.transcript


def test_an_update_whose_messages_hold_the_previous_summary_points_to_it() -> None:
    above = summary_prompt(OPENCODE, "summary one", previous_above=True)
    assert "summary one" not in above and "<previous-summary>" not in above
    assert f'the latest answer to "{COMPACTION_PROMPT}"' in above
    assert above.endswith(summary_prompt(OPENCODE, "summary one").split("\n\n", 2)[-1])


def test_9_2_33_the_view_after_two_compactions() -> None:
    b = SessionBuilder()
    u1, u2, u3 = (_exchange(b, f"u{n}") for n in (1, 2, 3))
    first = _plan(b, b.request_compaction(), tail_turns=2, preserve_recent_tokens=10_000)
    assert first.tail_start_id == u2
    _complete(b, first, "summary one")
    u4 = _exchange(b, "u4")
    request = b.request_compaction()
    second = _plan(b, request, tail_turns=2, preserve_recent_tokens=10_000)
    assert second.tail_start_id == u3
    summary = _complete(b, second, "summary two")
    ids = _view_ids(b)
    assert u1 not in ids and u2 not in ids
    assert {u3, u4, request, summary} <= set(ids)
    assert ids[:3] == [request, summary, u3]


def test_9_2_34_an_old_summary_does_not_count_against_the_tail() -> None:
    # Here the view starts after the earlier compaction, so a turn comes between it and the
    # tail (a tail from the view's first message would keep everything: no tail).
    b = SessionBuilder()
    _exchange(b, "older")
    b.compact("summary " * 800)
    _exchange(b, "summarised this time")
    keep = _exchange(b, "keep this turn")
    _exchange(b, "and this one too")
    plan = _plan(b, b.request_compaction(), tail_turns=2, preserve_recent_tokens=500)
    assert plan.tail_start_id == keep
    assert plan.previous_summary == ("summary " * 800).strip()


# --- turns and the tail (pi's findCutPoint) -------------------------------------------------


def _tool_turns(b: SessionBuilder, count: int) -> list[str]:
    """``count`` turns of a user message and an answer calling a tool; the user ids."""
    users = []
    for n in range(count):
        users.append(b.user(f"question {n} " + "q" * 200))
        reply = b.assistant(users[-1])
        call = b.tool_call(reply, "bash", {"command": f"run {n}"})
        b.tool_result(call, "r" * 300)
        b.text(reply, "a" * 200)
        b.finish(reply)
    return users


@pytest.mark.parametrize("budget", [0, 100, 250, 400, 700, 1_000, 1_500, 2_500])
def test_pi_the_tail_starts_on_a_user_or_assistant_message_never_a_tool_result(
    budget: int,
) -> None:
    b = SessionBuilder()
    _tool_turns(b, 10)
    request = b.request_compaction()
    plan = _plan(b, request, tail_turns=10, preserve_recent_tokens=budget)
    history = _history(b.events)
    if plan.tail_start_id is not None:
        assert history.message(plan.tail_start_id).role in ("user", "assistant")
    summary = _complete(b, plan)
    view = model_view(_history(b.events))
    check_tool_pairs(view)
    assert [m.source_id for m in view[:2]] == [request, summary]
    assert all(m.role != "tool" for m in view[2:3])


def test_pi_a_single_assistant_message_keeps_no_tail() -> None:
    reply = Message(id="msg_1", role="assistant", agent="main", agent_id="main")
    selection = select_tail([reply], tail_turns=2, budget=10_000)
    assert selection.tail_start_id is None and selection.head == (reply,)


def test_pi_when_everything_fits_everything_is_summarised() -> None:
    b = SessionBuilder()
    _tool_turns(b, 2)
    plan = _plan(b, b.request_compaction(), tail_turns=5, preserve_recent_tokens=50_000)
    assert plan.tail_start_id is None
    assert len(plan.head_ids) == 4


def test_pi_a_big_turn_is_split_at_an_assistant_message() -> None:
    b = SessionBuilder()
    b.user("before")
    user = b.user("big turn")
    replies = []
    for text in ("a" * 8_000, "b" * 800, "c" * 800):
        replies.append(b.assistant(user))
        b.text(replies[-1], text)
        b.finish(replies[-1])
    plan = _plan(b, b.request_compaction(), tail_turns=2, preserve_recent_tokens=700)
    assert plan.tail_start_id == replies[1]
    assert user in plan.head_ids and replies[0] in plan.head_ids


def test_turns_start_at_user_messages_that_are_not_compaction_requests() -> None:
    b = SessionBuilder()
    first = _exchange(b, "one")
    b.compact("summary")
    _exchange(b, "two")
    messages = _history(b.events).messages
    assert messages[0].id == first
    assert turns(messages) == [Turn(0, 4), Turn(4, 6)]


def test_turns_start_only_at_user_messages_a_person_wrote() -> None:
    b = SessionBuilder()
    b.user("[hook_additional_context] SessionStart", synthetic=True)
    _exchange(b, "one")
    b.user("[diagnostics] src/app.py:3: unused import", synthetic=True)
    b.text(b.user(), "Continue if you have next steps.", synthetic=True)  # runtime text only
    _exchange(b, "two")
    messages = _history(b.events).messages
    assert turns(messages) == [Turn(1, 5), Turn(5, 7)]


def test_a_second_compaction_in_one_long_turn_keeps_a_tail() -> None:
    """The first compaction summarised the turn's opening; the rest of the turn goes on from
    the compactor's "continue" note (or the request it sent again), so the next compaction
    still keeps the newest steps verbatim, whatever notes arrive meanwhile."""
    for resume in ("continue", "replay"):
        b = SessionBuilder()
        _tool_turns_after(b, b.user("Fix every failing test."), 3)
        resumed = b.user(synthetic=True)
        if resume == "continue":
            b.text(resumed, "Continue.", synthetic=True, metadata={"compaction_continue": True})
        else:
            b.text(resumed, "Fix every failing test.", metadata={"compaction_replay": True})
        b.user("[diagnostics] src/app.py:3: unused import", synthetic=True)
        _tool_turns_after(b, resumed, 4)
        rest = _history(b.events).messages[1:]  # the opening went into the first summary
        at = [m.id for m in rest].index(resumed)
        assert turns(rest) == [Turn(at, len(rest))]
        selection = select_tail(rest, tail_turns=2, budget=200)
        assert selection.tail and selection.tail[0].id > resumed


def test_an_attachment_in_the_last_turn_does_not_cut_the_tail_short() -> None:
    b = SessionBuilder()
    _exchange(b, "one")
    user = _exchange(b, "two")
    b.user("[edited_text_file] src/app.py", synthetic=True)
    reply = b.assistant(user)
    b.text(reply, "done again")
    b.finish(reply)
    plan = _plan(b, b.request_compaction(), tail_turns=1, preserve_recent_tokens=10_000)
    assert plan.tail_start_id == user


@PROPERTY
@given(session_events(), st.lists(st.integers(0, 200), max_size=6))
def test_synthetic_user_messages_start_no_turn(events: list[Event], at: list[int]) -> None:
    messages = view_messages(_history(events), ViewOptions())
    noted = list(messages)
    for n, index in enumerate(sorted(at, reverse=True)):
        message_id = f"msg_note{n:04d}"
        text = TextPart(id=f"prt_note{n:04d}", message_id=message_id, text=f"note {n}")
        note = Message(
            id=message_id, role="user", agent="build", agent_id="main", synthetic=True, parts=[text]
        )
        noted.insert(min(index, len(noted)), note)

    def starts(found: list[Message]) -> list[str]:
        return [found[t.start].id for t in turns(found)]

    assert starts(noted) == starts(messages)
    assert all(is_real_user(noted[t.start]) for t in turns(noted))


def test_hidden_compactions_give_the_newest_summary_unwrapped() -> None:
    b = SessionBuilder()
    _exchange(b, "one")
    b.compact("old")
    b.compact(wrap_summary("new", "auto", has_tail=False))
    messages = _history(b.events).messages
    visible, previous = hide_compactions(messages)
    assert previous == "new"
    assert visible == messages[:2]


def test_tail_budget_is_a_clamped_quarter_of_the_usable_window() -> None:
    assert tail_budget(4_000, CompactionConfig()) == 2_000
    assert tail_budget(20_000, CompactionConfig()) == 5_000
    assert tail_budget(200_000, CompactionConfig()) == 8_000
    assert tail_budget(200_000, CompactionConfig(preserve_recent_tokens=123)) == 123


def test_no_tail_when_tail_turns_is_zero() -> None:
    b = SessionBuilder()
    _exchange(b, "one")
    _exchange(b, "two")
    assert _plan(b, b.request_compaction(), tail_turns=0).tail_start_id is None


def test_the_tail_estimate_counts_tool_outputs_in_full() -> None:
    b = SessionBuilder()
    _exchange(b, "before")
    user = b.user("run it")
    reply = b.assistant(user)
    b.tool_result(b.tool_call(reply, "bash", {"command": "make"}), "o" * 40_000)
    b.finish(reply)
    plan = _plan(b, b.request_compaction(), tail_turns=1, preserve_recent_tokens=8_000)
    assert plan.tail_start_id is None
    assert plan.tail_tokens == 0
    assert "o" * 2_000 in plan.transcript and "o" * 2_001 not in plan.transcript


def test_view_estimate_is_four_characters_per_token_of_the_converted_json() -> None:
    b = SessionBuilder()
    b.user("x" * 400)
    message = _history(b.events).messages[0]
    tokens = view_estimate(ViewOptions())(message)
    assert 100 < tokens < 100 + 40
    assert text_tokens(4_000) == 1_000 and text_tokens(0) == 0 and text_tokens(2) == 1


# --- replay ---------------------------------------------------------------------------------


def test_replay_skips_runtime_written_and_synthetic_only_user_messages() -> None:
    b = SessionBuilder()
    _exchange(b, "real one")
    real = b.user("real two")
    continued = b.user()
    b.text(continued, CONTINUE_TEXT, synthetic=True)
    b.user("replayed by the runtime", synthetic=True)
    request = b.request_compaction(trigger="overflow")
    messages = _history(b.events).messages
    target = replay_target(messages, request)
    assert target is not None and target.id == real


def test_the_replay_takes_the_rest_of_its_turn_into_the_summary() -> None:
    b = SessionBuilder()
    _exchange(b, "root")
    replay = b.user("do the big thing")
    reply = b.assistant(replay)
    b.text(reply, "worked on it")
    b.finish(reply)
    request = b.request_compaction(trigger="overflow")
    plan = _plan(b, request)
    assert plan.replay_id == replay
    assert reply in plan.head_ids and replay not in plan.head_ids
    assert "worked on it" in plan.transcript


# --- guards ---------------------------------------------------------------------------------


def test_attempts_are_counted_since_the_last_real_user_message() -> None:
    b = SessionBuilder()
    _exchange(b, "earlier")
    for _ in range(2):
        b.roll_back(b.request_compaction(trigger="overflow"), "overflow")
    b.user("runtime continue", synthetic=True)
    third = b.request_compaction(trigger="overflow")
    plan = _plan(b, third)
    assert (plan.attempt, plan.exhausted) == (3, False)
    b.roll_back(third, "overflow")
    fourth = _plan(b, b.request_compaction(trigger="overflow"))
    assert (fourth.attempt, fourth.exhausted) == (4, True)
    assert "after 3 attempts" in EXHAUSTED_DETAIL.format(attempts=3)
    b.user("a new question")
    assert attempts_this_turn(_history(b.events).messages) == 0


def test_per_step_attempts_restart_after_each_successful_step() -> None:
    b = SessionBuilder()
    user = _exchange(b, "a long tool loop")
    for step in range(4):
        plan = _plan(b, b.request_compaction(trigger="auto"), attempts_per="step")
        assert (plan.attempt, plan.exhausted) == (1, False), step
        _complete(b, plan)
        reply = b.assistant(user)
        b.text(reply, f"step {step}")
        b.finish(reply)
    messages = _history(b.events).messages
    assert attempts_this_turn(messages) == 4  # per turn, the same compactions exhaust it
    assert attempts_this_turn(messages, "step") == 0
    b.roll_back(b.request_compaction(trigger="overflow"), "overflow")
    failed = b.assistant(user)
    b.finish(failed, finish="error", error=MessageError(name="APIError", message="boom"))
    b.roll_back(b.request_compaction(trigger="overflow"), "overflow")
    assert attempts_this_turn(_history(b.events).messages, "step") == 2  # an error is no success


def test_a_step_that_still_overflows_does_not_restart_the_count() -> None:
    b = SessionBuilder()
    user = _exchange(b, "a long tool loop")
    for step in range(4):
        plan = _plan(b, b.request_compaction(trigger="overflow"), attempts_per="step")
        assert plan.attempt == step + 1
        if plan.exhausted:
            break
        _complete(b, plan)
        reply = b.assistant(user)
        b.text(reply, f"step {step}")
        b.finish(reply, usage=Usage(input=190_000))  # succeeded, but still over the window
    assert plan.exhausted and plan.attempt == 4


def _real_summary() -> str:
    return render_summary(
        OPENCODE,
        {
            "Goal": ["Accept trailing commas in JSON5 input without breaking strict mode"],
            "Constraints & Preferences": ["Python 3.11", "No new dependencies"],
            "Done": [
                "Added `allow_trailing_commas` to `Parser.__init__` (src/json5/parser.py)",
                "Tests in tests/parser/test_commas.py (12 cases)",
                "Fixed off-by-one in `Lexer.peek`, src/json5/lexer.py:88",
            ],
            "In Progress": ["docs/usage.md: document the flag"],
            "Key Decisions": ["The flag defaults to False so strict mode is unchanged"],
            "Next Steps": ["Finish the docs", "Run `pytest -q`", "Open the PR"],
            "Critical Context": ["Old error: `ValueError: unexpected ',' at line 3 column 5`"],
            "Relevant Files": ["src/json5/parser.py: the flag", "src/json5/lexer.py: peek"],
        },
    )


def test_mimo_rollback_reasons() -> None:
    assert rollback_reason(_real_summary(), overflowed=True) == "overflow"
    assert rollback_reason("", overflowed=False) == "empty"
    assert rollback_reason("  \n\t ", overflowed=False) == "empty"
    assert rollback_reason("I will check the file. " * 40, overflowed=False) == "repetitive"
    assert rollback_reason(_real_summary(), overflowed=False) is None


def test_a_real_summary_is_not_repetitive() -> None:
    assert not is_repetitive(_real_summary())
    assert not is_repetitive(render_summary(OPENCODE, {}))
    assert not is_repetitive("## Goal\nShip it.")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("the " * 60, id="one word"),
        pytest.param(_real_summary() + "\n" + "Now I will run the tests. " * 30, id="looping end"),
        pytest.param(_real_summary() + "\n- Run the test suite again\n" * 8, id="repeated line"),
        pytest.param(
            ("Checked src/a.py and it is fine. " * 80) + "\n## Next Steps\n- ship",
            id="loop before a short ending",
        ),
    ],
)
def test_degenerate_loops_are_repetitive(text: str) -> None:
    assert is_repetitive(text)


# --- chunks ---------------------------------------------------------------------------------


def test_chunk_budget_is_a_share_of_the_usable_window_at_least_1000() -> None:
    assert chunk_budget(10_000, 0.6) == 6_000
    assert chunk_budget(1_000, 0.6) == 1_000
    assert chunk_budget(100_000, 0.7) == 70_000


def test_split_chunks_is_greedy_and_an_oversized_message_is_alone() -> None:
    b = SessionBuilder()
    for text in ("a", "b", "c", "big", "d", "e"):
        b.user(text)
    messages = _history(b.events).messages
    sizes = {"a": 40, "b": 40, "c": 40, "big": 500, "d": 10, "e": 10}

    def estimate(message: Message) -> int:
        part = message.parts[0]
        assert isinstance(part, TextPart)
        return sizes[part.text]

    chunks = split_chunks(messages, 100, estimate)
    assert [len(c) for c in chunks] == [2, 1, 1, 2]


def test_needs_chunks_inflates_the_head_by_1_3() -> None:
    assert not needs_chunks(10_000, 15_000, 2_000)
    assert needs_chunks(10_000, 14_999, 2_000)
    assert not needs_chunks(10, 13, 0)
    assert needs_chunks(10, 12, 0)


@given(
    chars=st.integers(0, 400_000),
    usable_tokens=st.integers(0, 200_000),
    output_tokens=st.integers(0, 8_000),
    factor=st.sampled_from([1.0, 1.1, 1.3, 1.5, 2.0]),
)
def test_the_chunk_check_inflates_the_head_as_the_preflight_estimate_does(
    chars: int, usable_tokens: int, output_tokens: int, factor: float
) -> None:
    config = Config(tokens=TokensConfig(preflight_factor=factor))
    estimate = preflight_tokens(chars, config)
    assert needs_chunks(text_tokens(chars), usable_tokens, output_tokens, factor) == (
        estimate + output_tokens > usable_tokens
    )


def test_a_head_too_big_for_one_request_is_planned_in_chunks() -> None:
    b = SessionBuilder()
    for n in range(6):
        _exchange(b, f"task {n} " + "t" * 2_000)
    plan = _plan(b, b.request_compaction(), usable_tokens=4_000, tail_turns=0)
    assert len(plan.chunks) > 1
    assert all(f"task {n}" in "".join(plan.chunks) for n in range(6))
    first = plan.chunk_request(0)
    assert first.startswith("<conversation>") and f"part 1 of {len(plan.chunks)}" in first
    merge = plan.merge_request(["one", "two"])
    assert '<partial-summary index="2">\ntwo\n</partial-summary>' in merge
    assert "## Relevant Files" in merge


def test_a_head_that_fits_has_no_chunks() -> None:
    b = SessionBuilder()
    _exchange(b, "small")
    assert _plan(b, b.request_compaction()).chunks == ()


# --- the projection -------------------------------------------------------------------------


def test_the_projection_records_the_head_range_and_the_manifest() -> None:
    b = SessionBuilder()
    user = b.user("fix it")
    reply = b.assistant(user)
    b.tool_result(b.tool_call(reply, "read", {"filePath": "src/a.py"}), "code")
    b.finish(reply)
    later = _exchange(b, "and then")
    plan = _plan(b, b.request_compaction(), tail_turns=0, manifest_files=3)
    projection = plan.projection("text")
    assert (projection.head_first_id, projection.summary) == (user, "text")
    assert projection.head_last_id is not None and projection.head_last_id > later
    assert projection.file_manifest == (FileRange(path="src/a.py", action="read"),)
    assert projection.template == "opencode"


def test_a_later_manifest_keeps_files_of_the_previous_one() -> None:
    b = SessionBuilder()
    reply = b.assistant(b.user("read a"))
    b.tool_result(b.tool_call(reply, "read", {"path": "a.py"}), "a")
    b.finish(reply)
    _complete(b, _plan(b, b.request_compaction(), tail_turns=0))
    reply = b.assistant(b.user("edit b"))
    b.tool_result(b.tool_call(reply, "edit", {"path": "b.py"}), "ok")
    b.finish(reply)
    second = _plan(b, b.request_compaction(), tail_turns=0)
    assert [f.path for f in second.file_manifest] == ["b.py", "a.py"]


# --- rounds that arrived while the summary was written --------------------------------------


def test_mimo_arrived_rounds_stay_within_budget_and_big_results_become_placeholders() -> None:
    b = SessionBuilder()
    _exchange(b, "before")
    request = b.request_compaction()
    old_user = b.user("arrived first")
    old = b.assistant(old_user)
    old_call = b.tool_call(old, "bash", {"command": "ls"})
    b.tool_result(old_call, "f" * 20_000)
    b.finish(old)
    new_user = b.user("arrived second")
    new = b.assistant(new_user)
    big = b.tool_call(new, "read", {"path": "a.py"})
    b.tool_result(big, "x" * 40_000)
    small = b.tool_call(new, "bash", {"command": "pwd"})
    b.tool_result(small, "/work")
    b.finish(new)
    arrived = arrived_since(_history(b.events), request)
    tail = arrived_tail(arrived, budget_tokens=2_000, result_max_tokens=8_000)
    assert tail.kept == (new_user, new)
    assert tail.over_budget == (old_user, old)
    assert tail.cleared == tuple(sorted((old_call, big)))
    roomy = arrived_tail(arrived, budget_tokens=100_000, result_max_tokens=8_000)
    assert roomy.kept == (old_user, old, new_user, new) and roomy.over_budget == ()
    assert roomy.cleared == (big,)


def test_arrived_rounds_leave_out_the_summary_being_written() -> None:
    b = SessionBuilder()
    request = b.request_compaction()
    b.assistant(request, summary=True, step_start=False)
    late = b.user("meanwhile")
    tail = arrived_tail(
        arrived_since(_history(b.events), request), budget_tokens=1_000, result_max_tokens=10
    )
    assert tail.kept == (late,) and tail.cleared == ()


# --- properties -----------------------------------------------------------------------------


def _with_request(events: list[Event], trigger: CompactionTrigger) -> tuple[list[Event], str]:
    now = max(e.time_ms for e in events) + 1_000_000
    request = CompactionRequested(
        session_id="ses_test",
        time_ms=now,
        message_id=IdGenerator("msg").next(now),
        part_id=IdGenerator("prt").next(now),
        auto=trigger != "manual",
        overflow=trigger == "overflow",
        trigger=trigger,
    )
    return [*events, request], request.message_id


def _completed(events: list[Event], plan: CompactionPlan) -> tuple[list[Event], str]:
    now = max(e.time_ms for e in events) + 1_000_000
    summary_id = IdGenerator("msg").next(now)
    request_id = plan.request_message_id
    done: list[Event] = [
        MessageAdded(
            session_id="ses_test",
            message_id=summary_id,
            role="assistant",
            parent_id=request_id,
            summary=True,
        ),
        PartAdded(
            session_id="ses_test",
            part=TextPart(id=IdGenerator("prt").next(now), message_id=summary_id, text="sum"),
        ),
        AssistantFinished(session_id="ses_test", message_id=summary_id, finish="stop"),
        CompactionCompleted(
            session_id="ses_test",
            request_message_id=request_id,
            summary_message_id=summary_id,
            tail_start_id=plan.tail_start_id,
            projection=plan.projection("sum"),
        ),
    ]
    return [*events, *done], summary_id


_SETTINGS = st.fixed_dictionaries(
    {
        "tail_turns": st.integers(0, 4),
        "preserve_recent_tokens": st.none() | st.integers(0, 3_000),
    }
)
_TRIGGERS = st.sampled_from(["auto", "manual", "overflow"])


@PROPERTY
@given(session_events(), _TRIGGERS, _SETTINGS, st.integers(1_000, 60_000))
def test_head_and_tail_are_exactly_the_view_before_the_request(
    events: list[Event],
    trigger: CompactionTrigger,
    compaction: dict[str, Any],
    usable_tokens: int,
) -> None:
    events, request = _with_request(events, trigger)
    history = _history(events)
    plan = plan_compaction(
        history, request, config=_config(**compaction), usable_tokens=usable_tokens
    )
    before = [m for m in view_messages(history, ViewOptions()) if m.id < request]
    shown, previous = hide_compactions(before)
    visible = [m.id for m in shown]
    note(f"visible {visible}, head {plan.head_ids}, tail {plan.tail_start_id}")
    assert plan.previous_summary == previous
    assert previous is None or f"<previous-summary>\n{previous}" in plan.prompt
    if plan.replay_id is not None:
        assert plan.tail_start_id is None
        assert plan.head_ids == tuple(i for i in visible if i != plan.replay_id)
        return
    tail = [] if plan.tail_start_id is None else visible[visible.index(plan.tail_start_id) :]
    assert [*plan.head_ids, *tail] == visible
    assert plan.tail_start_id is None or plan.tail_start_id != visible[0]


@PROPERTY
@given(session_events(), _TRIGGERS, _SETTINGS, st.integers(1_000, 60_000))
def test_a_completed_plan_is_valid_and_its_view_is_request_summary_and_tail(
    events: list[Event],
    trigger: CompactionTrigger,
    compaction: dict[str, Any],
    usable_tokens: int,
) -> None:
    events, request = _with_request(events, trigger)
    history = _history(events)
    plan = plan_compaction(
        history, request, config=_config(**compaction), usable_tokens=usable_tokens
    )
    before = [m for m in view_messages(history, ViewOptions()) if m.id < request]
    visible = [m.id for m in hide_compactions(before)[0]]
    tail = [] if plan.tail_start_id is None else visible[visible.index(plan.tail_start_id) :]
    after, summary = _completed(events, plan)
    validate_events(SessionIndex("ses_test"), after)
    completed = _history(after)
    assert [m.id for m in view_messages(completed, ViewOptions())] == [request, summary, *tail]
    check_tool_pairs(model_view(completed))


def test_an_overflow_without_media_blames_the_conversation_not_media() -> None:
    b = SessionBuilder()
    current = b.user("current, a long question without attachments")
    plan = _plan(b, b.request_compaction(trigger="overflow", parent_id=current))
    assert plan.replay_id is None and plan.continue_text is not None
    assert plan.continue_text == f"{OVERFLOW_CONTEXT_NOTICE}\n\n{CONTINUE_TEXT}"


def _tool_turns_after(b: SessionBuilder, parent: str, count: int) -> None:
    for n in range(count):
        reply = b.assistant(parent)
        call = b.tool_call(reply, "bash", {"command": f"pytest -k case_{n}"})
        b.tool_result(call, f"case_{n} " * 40)
        b.finish(reply)
