"""The decision layer: what it derives from a history, and what it decides from it."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given, settings

from contextledger.config import CompactionConfig, Config, PruneConfig
from contextledger.events._catalogue import MAIN_AGENT, Event, RecordedEvent, RequestSent
from contextledger.events._parts import MessageError, StepStartPart, ToolPart, Usage
from contextledger.history._projection import History
from contextledger.history._view import model_view, soft_trimmed
from contextledger.policy._compaction import EXHAUSTED_DETAIL
from contextledger.policy._decisions import (
    DecisionViews,
    after_compaction,
    compaction_due,
    forced_prune,
    last_reported_prompt,
    output_cap,
    prune_plans,
    pruned_since,
    slice_facts,
    written_since,
)
from contextledger.policy._overflow import usable
from contextledger.policy._prune import plan_prune
from contextledger.policy._tokens import measure_messages
from contextledger.testing._builder import SessionBuilder
from contextledger.testing._strategies import session_events
from contextledger.vocabulary import Model, ModelLimits
from tests.strategies._sessions import MODEL, REF, history, session

#: Prune settings that make the few small outputs of a test session candidates.
EAGER = PruneConfig(enabled=True, protect_tokens=0, minimum_tokens=0)


def test_the_last_finished_step_is_the_time_it_finished_not_the_time_it_started() -> None:
    b = session(2)
    (*_, last) = (m for m in history(b.events).messages if m.role == "assistant")
    finished = next(
        e.time_ms
        for e in reversed(b.events)
        if type(e).__name__ == "AssistantFinished" and e.message_id == last.id  # type: ignore[attr-defined]
    )
    facts = slice_facts(history(b.events), Config(), MAIN_AGENT)
    assert facts.last_finished_ms == finished
    assert finished > last.created_ms


def test_a_failed_call_does_not_hide_the_usage_before_it() -> None:
    limit = usable(MODEL, Config())
    b = session(2, usage=lambda turn: Usage(input=limit))
    user = b.user("and now?")
    failed = b.assistant(user)
    b.finish(failed, "error", error=MessageError(name="APIError", message="overloaded"))
    h = history(b.events)
    facts = slice_facts(h, Config(), MAIN_AGENT)
    assert facts.answer is not None and facts.answer.id != failed
    assert compaction_due(h, MODEL, Config(), agent_id=MAIN_AGENT) == "overflow"


def test_overflow_is_not_decided_again_after_a_compaction() -> None:
    limit = usable(MODEL, Config())
    b = session(3, usage=lambda turn: Usage(input=limit))
    assert compaction_due(history(b.events), MODEL, Config(), agent_id=MAIN_AGENT) == "overflow"
    b.compact("what happened so far")
    assert compaction_due(history(b.events), MODEL, Config(), agent_id=MAIN_AGENT) is None


def test_below_the_limit_the_window_cadence_waits() -> None:
    limit = usable(MODEL, Config())
    b = session(3, usage=lambda turn: Usage(input=limit - 1))
    assert compaction_due(history(b.events), MODEL, Config(), agent_id=MAIN_AGENT) is None


def test_after_a_compaction_an_early_one_sends_and_an_exhausted_one_gives_up() -> None:
    assert after_compaction("economic", "rolled_back", "summary was empty") == "send"
    assert after_compaction("strategy", "completed", "") == "send"
    assert after_compaction("overflow", "completed", "") == "check"
    assert after_compaction("preflight", "rolled_back", "summary was empty") == "check"
    exhausted = EXHAUSTED_DETAIL.format(attempts=3)
    assert after_compaction("overflow", "rolled_back", exhausted) == "exhausted"


def test_no_prune_unless_enabled_or_forced() -> None:
    h = history(session(4).events)
    later = 10**13
    assert prune_plans(h, MODEL, Config(), agent_id=MAIN_AGENT, now_ms=later) == []
    eager = Config(prune=PruneConfig(protect_tokens=0, minimum_tokens=0))
    forced = prune_plans(h, MODEL, eager, agent_id=MAIN_AGENT, now_ms=later, force=True)
    assert forced
    enabled = prune_plans(h, MODEL, Config(prune=EAGER), agent_id=MAIN_AGENT, now_ms=later)
    assert enabled == forced


def _two_agents(outputs: int = 4_000) -> History:
    """The main agent's four turns and a sub-agent's four, each step's output ``outputs``
    characters long."""
    b = session(4, output=lambda turn, tool: "m" * outputs)
    for turn in range(4):
        user = b.user(f"Sub-step {turn}.", agent_id="task_1")
        assistant = b.assistant(user, agent_id="task_1")
        call = b.tool_call(assistant, "bash", {"command": f"ls {turn}"}, agent_id="task_1")
        b.tool_result(call, "s" * outputs, agent_id="task_1")
        b.finish(assistant, agent_id="task_1")
    return history(b.events)


@pytest.mark.parametrize("reason", ["post-compaction", "payload-limit"])
def test_the_forced_prune_clears_the_slice_s_old_outputs_whatever_the_prune_mode(
    reason: Literal["post-compaction", "payload-limit"],
) -> None:
    h = _two_agents()
    settings = PruneConfig(enabled=False, mode="mimo", protect_tokens=0, minimum_tokens=0)
    for agent in (MAIN_AGENT, "task_1"):
        plan = forced_prune(h, Config(prune=settings), agent_id=agent, reason=reason)
        assert plan is not None and plan.reason == reason
        owners = {h.message(h.part(part_id).message_id).agent_id for part_id in plan.part_ids}
        assert owners == {agent}
        assert plan == plan_prune(
            slice_facts(h, Config(), agent).messages,
            reason=reason,
            protect_tokens=0,
            minimum_tokens=0,
        )
    held = Config(prune=PruneConfig(minimum_tokens=10**6))
    assert forced_prune(h, held, agent_id=MAIN_AGENT, reason=reason) is None


def test_the_cost_prune_keeps_a_warm_cache_and_clears_a_cold_one() -> None:
    config = Config(
        prune=PruneConfig(enabled=True, mode="cost", protect_tokens=0, minimum_tokens=0)
    )
    h = history(session(4, output=lambda t, tool: "x" * 4_000).events)
    finished = slice_facts(h, config, MAIN_AGENT).last_finished_ms
    assert finished is not None
    warm = prune_plans(h, MODEL, config, agent_id=MAIN_AGENT, now_ms=finished + 1_000)
    cold = prune_plans(h, MODEL, config, agent_id=MAIN_AGENT, now_ms=finished + 3_600_000)
    assert warm == [] and cold


@settings(max_examples=40, deadline=None)
@given(session_events())
def test_decisions_are_pure_functions_of_the_history(events: list[Event]) -> None:
    h = history(events)
    config = Config(prune=EAGER)
    once = (
        compaction_due(h, MODEL, config, agent_id=MAIN_AGENT),
        prune_plans(h, MODEL, config, agent_id=MAIN_AGENT, now_ms=10**13),
    )
    again = (
        compaction_due(history(events), MODEL, config, agent_id=MAIN_AGENT),
        prune_plans(history(events), MODEL, config, agent_id=MAIN_AGENT, now_ms=10**13),
    )
    assert once == again


@settings(max_examples=40, deadline=None)
@given(session_events())
def test_a_live_decision_view_decides_as_a_view_built_from_scratch(events: list[Event]) -> None:
    config = Config(compaction=CompactionConfig(cadence="economic", attempts_per="step"))
    views = DecisionViews(config)
    h = History(events[0].session_id)
    for seq, event in enumerate(events, 1):
        h.apply(RecordedEvent(h.session_id, seq, seq, event))
        for agent in {MAIN_AGENT, event.agent_id}:
            live = compaction_due(h, SMALL, config, agent_id=agent, view=views.of(agent))
            assert live == compaction_due(h, SMALL, config, agent_id=agent)


def test_a_decision_view_of_another_slice_is_refused() -> None:
    h = history(session(2).events)
    views = DecisionViews(Config())
    with pytest.raises(ValueError, match="decision view"):
        compaction_due(h, MODEL, Config(), agent_id="helper", view=views.of(MAIN_AGENT))


SMALL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=32_000, output=32_000),
)


def test_the_output_cap_leaves_room_for_the_prompt() -> None:
    config = Config()
    lowered = output_cap(SMALL, config, requested=None, prompt_tokens=10_000)
    assert lowered == 32_000 - 10_000 - config.output.safety
    big = Model(provider_id="x", model_id="y", limits=ModelLimits(context=200_000, output=8_000))
    assert output_cap(big, config, requested=None, prompt_tokens=10_000) == 8_000
    assert output_cap(SMALL, config, requested=2_000, prompt_tokens=10_000) == 2_000
    # A prompt that fills the window alone asks for the least output: the provider refuses it
    # only if it is really too long (then the overflow compacts).
    assert output_cap(SMALL, config, requested=None, prompt_tokens=40_000) == config.output.min


def test_the_last_reported_prompt_is_a_floor_under_the_estimate_until_a_compaction() -> None:
    config = Config()
    b = SessionBuilder("ses_test", model=REF)
    step = b.assistant(b.user("Run the tests."))
    b.tool_result(b.tool_call(step, "bash", {"command": "pytest"}), "F" * 400)
    b.finish(step, "tool-calls", usage=Usage(input=15_000, cache_read=5_000))
    reported = last_reported_prompt(history(b.events), MAIN_AGENT)
    assert reported == 20_000
    assert last_reported_prompt(history(b.events), "explore") is None  # another slice's
    # An estimate below what the provider counted (a wire that leaves reasoning out of the
    # body, say) does not ask for output the window has no room for.
    room = 32_000 - 20_000 - config.output.safety
    cap = output_cap(SMALL, config, requested=None, prompt_tokens=15_000, reported=reported)
    assert cap == room
    more = output_cap(SMALL, config, requested=None, prompt_tokens=25_000, reported=reported)
    assert more == 32_000 - 25_000 - config.output.safety
    b.compact("## Goal\nthe summary")
    assert last_reported_prompt(history(b.events), MAIN_AGENT) is None


def _tool_step(finish: str, output_chars: int, *, reported: int) -> list[Event]:
    """A turn of one step that called ``bash`` and finished with ``finish``, reporting a
    prompt of ``reported`` tokens; the output has ``output_chars`` characters."""
    b = SessionBuilder("ses_test", model=REF)
    user = b.user("Run the tests.")
    step = b.assistant(user)
    b.tool_result(b.tool_call(step, "bash", {"command": "pytest"}), "F" * output_chars)
    b.finish(step, finish, usage=Usage(input=reported))
    return b.events


def test_a_tool_step_whose_results_reach_the_limit_is_compacted_before_the_next_call() -> None:
    limit = usable(SMALL, Config())
    due = compaction_due(
        history(_tool_step("tool-calls", 8_000, reported=limit - 2_000)),
        SMALL,
        Config(),
        agent_id=MAIN_AGENT,
    )
    assert due == "preflight"  # 2,000 tokens of output, 2,600 with the preflight factor
    unguarded = Config(compaction=CompactionConfig(step_guard=False))
    over = history(_tool_step("tool-calls", 8_000, reported=limit - 2_000))
    assert compaction_due(over, SMALL, unguarded, agent_id=MAIN_AGENT) is None
    fits = _tool_step("tool-calls", 4_000, reported=limit - 2_000)
    assert compaction_due(history(fits), SMALL, Config(), agent_id=MAIN_AGENT) is None
    # A step that did not end calling tools had its results in the prompt it reported.
    seen = _tool_step("stop", 8_000, reported=limit - 2_000)
    assert compaction_due(history(seen), SMALL, Config(), agent_id=MAIN_AGENT) is None


def test_written_since_counts_the_last_steps_calls_and_later_messages() -> None:
    b = SessionBuilder("ses_test", model=REF)
    first = b.assistant(b.user("Run the tests."))
    b.tool_result(b.tool_call(first, "bash", {"command": "ls"}), "a" * 400)
    b.part(StepStartPart(id=b.new_part_id(), message_id=first), MAIN_AGENT)
    b.tool_result(b.tool_call(first, "bash", {"command": "pytest"}), "b" * 800)
    b.finish(first, "tool-calls", usage=Usage(input=1_000))
    h = history(b.events)
    answer = h.message(first)
    (_, last_call) = [p for p in answer.parts if isinstance(p, ToolPart)]
    assert written_since(h, answer, MAIN_AGENT) == h.part_tokens(last_call.id)
    later = b.user("And the linter?")
    h = history(b.events)
    extra = sum(h.part_tokens(p.id) for p in h.message(later).parts)
    assert written_since(h, answer, MAIN_AGENT) == h.part_tokens(last_call.id) + extra


def test_opt_in_preflight_also_protects_a_step_inside_a_tool_round() -> None:
    config = Config(compaction=CompactionConfig(threshold_percent=5))
    mid_round = history(_tool_step("tool-calls", 8_000, reported=0))
    assert compaction_due(mid_round, SMALL, config, agent_id=MAIN_AGENT) == "preflight"


def _tool_loop(steps: int, *, usage: int) -> tuple[SessionBuilder, list[str]]:
    """One user turn whose tool loop reads a 40,000-character file a step, each request
    recorded (``RequestSent`` with its measure) and each answer reporting ``usage`` input
    tokens; the tool part ids."""
    b = session(0)
    user = b.user("read every file")
    calls = []
    for step in range(steps):
        measure = measure_messages(model_view(history(b.events)))
        b.add(
            RequestSent,
            provider_id="anthropic",
            model_id="claude-sonnet-4-5",
            prefix_hash="p",
            body_hash=f"b{step}",
            body_bytes=measure.chars,
            estimated_tokens=measure.chars // 4,
            measure=measure,
        )
        reply = b.assistant(user)
        call = b.tool_call(reply, "read", {"path": f"src/file_{step}.py"})
        b.tool_result(call, "x" * 40_000)
        b.finish(reply, "tool-calls", usage=Usage(input=usage))
        calls.append(call)
    return b, calls


@pytest.mark.parametrize("sub_agent", [False, True])
def test_a_trim_after_the_answer_lowers_the_prompt_the_window_checks_read(sub_agent: bool) -> None:
    """With ``sub_agent``, another agent's request is sent after the answer's: the answer's
    own request is still the one the trim is measured against."""
    limit = usable(MODEL, Config())
    b, calls = _tool_loop(4, usage=limit - 5_000)  # the last step's 10,000 tokens overflow
    if sub_agent:
        b.user("find the parser", agent_id="explore")
        b.add(
            RequestSent,
            "explore",
            provider_id="anthropic",
            model_id="claude-sonnet-4-5",
            prefix_hash="q",
            body_hash="explore",
            body_bytes=100,
            estimated_tokens=25,
            measure=measure_messages(()),
        )
    assert compaction_due(history(b.events), MODEL, Config(), agent_id=MAIN_AGENT) == "preflight"
    for call in calls[:3]:
        b.trim(call, 512, 512)  # 3 x 39,000 characters less than the answer's request held
    h = history(b.events)
    answer = slice_facts(h, Config(), MAIN_AGENT).answer
    assert answer is not None
    trimmed = len(soft_trimmed("x" * 40_000, (512, 512)))
    assert pruned_since(h, answer, model_view(h)) == 3 * (40_000 - trimmed) // 4
    assert compaction_due(h, MODEL, Config(), agent_id=MAIN_AGENT) is None


def test_the_batch_prune_runs_between_the_steps_of_a_tool_loop_and_the_others_do_not() -> None:
    b, calls = _tool_loop(8, usage=10_000)
    h = history(b.events)
    later = 10**13  # a cold cache: any trim pays
    batch = Config(prune=PruneConfig(enabled=True, mode="batch", protect_tokens=20_000))
    plans = prune_plans(h, MODEL, batch, agent_id=MAIN_AGENT, now_ms=later)
    assert [getattr(p, "part_id", None) for p in plans] == calls[:6]
    for mode in ("opencode", "cost"):
        other = Config(prune=PruneConfig(enabled=True, mode=mode, protect_tokens=0))
        assert prune_plans(h, MODEL, other, agent_id=MAIN_AGENT, now_ms=later) == []
