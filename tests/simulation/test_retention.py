"""Retention, measured on the recorded trajectory: which facts the agent used again, and
whether the requests a strategy sent held them."""

from __future__ import annotations

from contextledger.events._parts import TextPart, ToolCompleted, ToolPart
from contextledger.simulation import (
    FactMemo,
    RecordedCall,
    RecordedNote,
    RecordedTurn,
    RetentionCounter,
    facts_in,
    simulate_trace,
)
from contextledger.simulation._retention import RECENT_CALLS
from contextledger.simulation._synthetic import synthetic_session
from contextledger.testing._builder import SessionBuilder
from contextledger.vocabulary._messages import ModelMessage, ModelText, ModelToolResult


def test_facts_are_paths_names_identifiers_numbers_and_errors_on_token_boundaries() -> None:
    text = (
        "Open src/app/main_loop.py and README.md: parse_args raised TypeError at line 1234 "
        "(version 1.2.3), see self.retryCount. Plain words and 42 are not facts; "
        "xparse_args stays whole."
    )
    assert facts_in(text) == {
        "src/app/main_loop.py",
        "README.md",
        "parse_args",
        "TypeError",
        "1234",
        "1.2.3",
        "self.retryCount",
        "xparse_args",
    }
    assert facts_in("words only, and 42.") == set()
    assert facts_in("bump to 1.2.3-rc1, react 18.3.0-rc.1, then 2.0.") == {"2.0"}


def _call(n: int, text: str = "", tool_input: str = "", output: str = "") -> RecordedCall:
    parts: list[TextPart | ToolPart] = []
    if text:
        parts.append(TextPart(id=f"t{n}", message_id=f"m{n}", text=text))
    if tool_input or output:
        state = ToolCompleted(input={"command": tool_input}, output=output)
        parts.append(
            ToolPart(
                id=f"p{n}",
                message_id=f"m{n}",
                call_id=f"c{n}",
                tool="bash",
                state=state,
            )
        )
    return RecordedCall(f"m{n}", n, tuple(parts), "tool-calls", None, 10)


def _sent(*texts: str) -> list[ModelMessage]:
    return [ModelMessage(role="user", content=(ModelText(text=t),), source_id="x") for t in texts]


def _turn(*calls: RecordedCall, text: str = "Fix the failing test.") -> RecordedTurn:
    return RecordedTurn(time_ms=0, text=text, files=(), calls=list(calls))


def _counts(counter: RetentionCounter) -> tuple[int, int, int, int]:
    r = counter.result
    return r.needed, r.retained, r.needed_older, r.retained_older


def test_a_fact_from_before_the_recent_calls_used_again_counts_in_both_measures() -> None:
    quiet = [_call(n, text="working") for n in range(1, RECENT_CALLS + 1)]
    use = _call(RECENT_CALLS + 1, tool_input="pytest tests/test_parser_core.py")
    turns = [
        _turn(_call(0, output="FAILED tests/test_parser_core.py"), *quiet, use),
    ]
    kept, lost = RetentionCounter(turns), RetentionCounter(turns)
    for number in range(RECENT_CALLS + 2):
        kept.observe(number, _sent("a summary: FAILED tests/test_parser_core.py"))
        lost.observe(number, _sent("a summary that lost it"))
    assert _counts(kept) == (1, 1, 1, 1) and kept.result.share == kept.result.share_older == 1
    assert _counts(lost) == (1, 0, 1, 0) and lost.result.share == lost.result.share_older == 0


def test_a_fact_from_the_previous_calls_output_is_needed_but_not_older() -> None:
    """The agent reads the newest output and uses a fact from it: a request cut to the first
    500 characters of that output, the newest included, did not hold it. Only ``retention``
    sees the loss; ``older`` counts facts last mentioned more than ``RECENT_CALLS`` back."""
    turns = [
        _turn(
            _call(0, output="FAILED tests/test_parser_core.py"),
            _call(1, tool_input="pytest tests/test_parser_core.py"),
            _call(2, tool_input="cat src/brand_new.py"),  # never seen before: not needed
        )
    ]
    cut, whole = RetentionCounter(turns), RetentionCounter(turns)
    for number in range(3):
        cut.observe(number, _sent("the output, cut before the failure"))
        whole.observe(number, _sent("FAILED tests/test_parser_core.py"))
    assert _counts(cut) == (1, 0, 0, 0) and cut.result.share == 0
    assert _counts(whole) == (1, 1, 0, 0) and whole.result.share == 1
    assert cut.result.share_older is None


def test_a_fact_in_the_user_message_opening_the_call_is_not_needed() -> None:
    """The user names the file: the call that answers the message has just been told it, the
    next one uses it again."""
    turns = [
        _turn(
            _call(0, tool_input="cat src/parser_core.py"),
            _call(1, tool_input="pytest src/parser_core.py"),
            text="Fix src/parser_core.py.",
        )
    ]
    counter = RetentionCounter(turns)
    counter.observe(0, _sent("Fix src/parser_core.py."))
    assert _counts(counter) == (0, 0, 0, 0)
    counter.observe(1, _sent("Fix src/parser_core.py."))
    assert _counts(counter) == (1, 1, 0, 0)


def test_a_fact_a_synthetic_message_brought_in_counts_from_where_it_was_sent() -> None:
    # The client's note (a diagnostic) names a file the agent opens several calls later.
    diagnostic = "[diagnostics] src/parser_core.py:3: unused import"

    def needed(*at: int | None) -> tuple[int, int, int, int]:
        quiet = [_call(n, text="working") for n in range(RECENT_CALLS + 1)]
        turn = _turn(*quiet, _call(RECENT_CALLS + 1, tool_input="cat src/parser_core.py"))
        turn.notes.extend(RecordedNote(0, diagnostic, (), after) for after in at)
        counter = RetentionCounter([turn])
        for number in range(RECENT_CALLS + 2):
            counter.observe(number, _sent(diagnostic))
        return _counts(counter)

    assert needed(None) == needed(0) == (1, 1, 1, 1)  # before the prompt, or the first call
    assert needed(RECENT_CALLS) == (1, 1, 0, 0)  # a call before the use: recent
    assert needed(RECENT_CALLS + 1) == (0, 0, 0, 0)  # it opens the call that uses it
    assert needed() == (0, 0, 0, 0)  # no note: the agent came up with the path itself


def test_tool_results_as_sent_count_as_held() -> None:
    quiet = [_call(n, text="working") for n in range(1, RECENT_CALLS + 1)]
    turns = [
        _turn(
            _call(0, output="error in load_config"),
            *quiet,
            _call(RECENT_CALLS + 1, text="load_config again"),
        )
    ]
    counter = RetentionCounter(turns)
    result = ModelToolResult(call_id="c0", tool="bash", output="error in load_config")
    counter.observe(
        RECENT_CALLS + 1, [ModelMessage(role="tool", content=(result,), source_id="m0")]
    )
    assert _counts(counter) == (1, 1, 1, 1)


def test_truncate_500_loses_a_fact_of_the_newest_output_that_baseline_keeps() -> None:
    """The agent uses a name from beyond the 500th character of the output it just read:
    ``truncate-500`` cut that output, the newest included, before sending it."""
    b = SessionBuilder()
    reply = b.assistant(b.user("Why does the service not start?"))
    part = b.tool_call(reply, "bash", {"command": "cat service.log"})
    b.tool_result(part, "a line of the log\n" * 50 + "missing key worker_pool_size\n")
    b.finish(reply, "tool-calls")
    reply = b.assistant(reply)
    b.tool_call(reply, "bash", {"command": "grep -rn worker_pool_size conf"})
    b.finish(reply, "tool-calls")
    baseline, truncated = (
        simulate_trace(b.events, strategy_name=name) for name in ("baseline", "truncate-500")
    )
    assert baseline.calls == truncated.calls == 2
    assert (baseline.facts_needed, baseline.facts_retained) == (1, 1)
    assert (truncated.facts_needed, truncated.facts_retained) == (1, 0)
    assert truncated.retention == 0 and baseline.retention == 1
    assert truncated.facts_needed_older == baseline.facts_needed_older == 0
    assert truncated.retention_older is None


def test_a_strategy_that_drops_old_turns_retains_less_than_baseline() -> None:
    events = synthetic_session("ses_ret", seed=3, turns=6)
    baseline = simulate_trace(events, strategy_name="baseline")
    last = simulate_trace(events, strategy_name="last-4")
    assert baseline.facts_needed == last.facts_needed > 0
    assert last.facts_retained < baseline.facts_retained
    assert baseline.facts_needed_older == last.facts_needed_older > 0
    assert last.facts_retained_older < baseline.facts_retained_older
    summary = baseline.summary()
    assert (summary["retention"], summary["retention_older"]) == (
        baseline.retention,
        baseline.retention_older,
    )


def test_compactions_that_keep_only_the_tail_retain_no_more_than_with_a_summary() -> None:
    events = synthetic_session("ses_ret", seed=3, turns=8)
    summarized, tail_only = (
        simulate_trace(events, strategy_name="compact-at-6000", summarizer=name)
        for name in ("extractive", "tail-only")
    )
    assert tail_only.compactions > 0 and tail_only.summarizer == "tail-only"
    assert tail_only.summary_cost == 0 and tail_only.facts_needed == summarized.facts_needed
    assert tail_only.facts_retained < summarized.facts_retained


def test_a_fact_memo_finds_the_facts_of_each_text_once_and_as_facts_in_does() -> None:
    memo = FactMemo()
    texts = ["see parse_args in src/cli.py", "TypeError at 1234", "see parse_args in src/cli.py"]
    found = memo(texts)
    assert found == facts_in(texts[0]) | facts_in(texts[1])
    again = memo(texts[2:])
    assert again == facts_in(texts[2]) and again is not memo(texts[2:])  # a copy each time
    assert memo(()) == set()


def test_simulations_sharing_a_fact_memo_count_what_each_counts_alone() -> None:
    events = synthetic_session("ses_ret", seed=3, turns=6)
    memo = FactMemo()
    for name in ("baseline", "last-4", "baseline"):
        shared = simulate_trace(events, strategy_name=name, facts=memo)
        alone = simulate_trace(events, strategy_name=name)
        fields = ("facts_needed", "facts_retained", "facts_needed_older", "facts_retained_older")
        assert [getattr(shared, f) for f in fields] == [getattr(alone, f) for f in fields]
