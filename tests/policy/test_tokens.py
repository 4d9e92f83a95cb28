"""Token counters: the plain estimate, the calibrated counter and the optional exact one."""

from __future__ import annotations

import re
import sys
import types
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.events._catalogue import RecordedEvent
from contextledger.history import History, model_view, part_chars
from contextledger.history._estimate import MEDIA_TOKENS
from contextledger.policy._tokens import (
    MAX_OVERHEAD,
    MAX_RATE,
    MIN_RATE,
    CalibratedCounter,
    Calibration,
    EstimateCounter,
    Observation,
    PromptMeasure,
    TiktokenCounter,
    TokenCounter,
    TokenizerUnavailable,
    calibrate,
    measure_messages,
    measure_part,
    measure_text,
    pieces,
)
from contextledger.testing._strategies import session_events
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
        content=(ModelText(text="x" * 40), ModelFile(mime="image/png", url="data:,")),
        source_id="m1",
    ),
    ModelMessage(
        role="assistant",
        content=(
            ModelReasoning(text="r" * 8),
            ModelToolCall(call_id="c1", tool="bash", input={"cmd": "ls"}),
        ),
        source_id="m2",
    ),
    ModelMessage(
        role="tool",
        content=(
            ModelToolResult(
                call_id="c1",
                tool="bash",
                output="o" * 100,
                attachments=(ModelFile(mime="image/png", url="data:,"),),
            ),
        ),
        source_id="m2",
    ),
]
#: ``bash`` + ``{"cmd":"ls"}``.
VIEW_INPUT_CHARS = 4 + 12
#: ``bash``; ``{"``, ``cmd``, ``":"``, ``ls``, ``"}``.
VIEW_INPUT_PIECES = 1 + 5


# --- the plain estimate ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chars", "tokens"),
    [(4000, 1000), (20000, 5000), (0, 0), (1, 0), (2, 1), (6, 2), (7, 2), (10, 3)],
)
def test_estimate_is_characters_over_four_rounded_half_up(chars: int, tokens: int) -> None:
    assert EstimateCounter().count("x" * chars) == tokens


def test_estimate_of_a_view_counts_every_text_and_charges_media() -> None:
    measure = measure_messages(VIEW)
    assert measure == PromptMeasure(
        text_chars=48,
        input_chars=VIEW_INPUT_CHARS,
        output_chars=100,
        tool_calls=1,
        media=2,
        text_pieces=2,
        input_pieces=VIEW_INPUT_PIECES,
        output_pieces=1,
    )
    expected = round((48 + VIEW_INPUT_CHARS + 100) / 4) + 2 * MEDIA_TOKENS
    assert EstimateCounter().count_messages(VIEW) == expected


def test_counters_satisfy_the_protocol() -> None:
    counters: list[TokenCounter] = [EstimateCounter(), CalibratedCounter()]
    assert [c.count("abcd") for c in counters] == [1, 1]


@settings(max_examples=50, deadline=None)
@given(session_events(max_moves=10))
def test_part_measure_has_the_characters_the_history_counts(events: list[Any]) -> None:
    history = History.rebuild(
        "ses_test", (RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, 1))
    )
    for message in history.messages:
        for part in message.parts:
            assert measure_part(part).chars == part_chars(part)


@settings(max_examples=50, deadline=None)
@given(session_events(max_moves=10))
def test_a_measure_without_pieces_is_the_measure_with_its_pieces_left_out(
    events: list[Any],
) -> None:
    history = History.rebuild(
        "ses_test", (RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, 1))
    )
    view = [*model_view(history), *VIEW]
    unpieced = msgspec.structs.replace(
        measure_messages(view), text_pieces=0, input_pieces=0, output_pieces=0
    )
    assert measure_messages(view, cut=False) == unpieced


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("", []),
        ("hello world", ["hello", " world"]),
        ("x = 12345;", ["x", " =", " 123", "45", ";"]),
        ("if (a):\n    return b", ["if", " (", "a", "):", "\n    ", "return", " b"]),
        ('{"path": "src/app.py"}', ['{"', "path", '":', ' "', "src", "/", "app", ".", "py", '"}']),
    ],
)
def test_pieces_are_words_digit_groups_punctuation_and_whitespace_runs(
    text: str, cut: list[str]
) -> None:
    assert "".join(cut) == text
    assert pieces(text) == len(cut)
    assert measure_text(text) == PromptMeasure(text_chars=len(text), text_pieces=len(cut))


@given(st.text(alphabet=st.sampled_from(' \n\tab9_-/.{}"é中')))
def test_pieces_cut_as_the_same_pattern_without_possessive_runs_does(text: str) -> None:
    plain = re.compile(r" ?[A-Za-z]+| ?\d{1,3}| ?[^\sA-Za-z\d]+|\s+")
    assert pieces(text) == len(plain.findall(text))


# --- calibration ---------------------------------------------------------------------------------

#: A made-up tokenizer: tokens per piece of text, tool input, tool output; per tool call.
TRUE_RATES = (1.2, 1.6, 0.9)
TRUE_OVERHEAD = 70.0
#: The system prompt and tool table: constant, so differences never see it.
BASE_TOKENS = 14_000


def true_tokens(m: PromptMeasure) -> int:
    return round(
        BASE_TOKENS
        + m.text_pieces * TRUE_RATES[0]
        + m.input_pieces * TRUE_RATES[1]
        + m.output_pieces * TRUE_RATES[2]
        + m.tool_calls * TRUE_OVERHEAD
        + m.media * MEDIA_TOKENS
    )


def sized(text: int = 0, inputs: int = 0, outputs: int = 0, calls: int = 0) -> PromptMeasure:
    """A measure of so many pieces of each kind, at four characters a piece."""
    return PromptMeasure(
        text_chars=4 * text,
        input_chars=4 * inputs,
        output_chars=4 * outputs,
        text_pieces=text,
        input_pieces=inputs,
        output_pieces=outputs,
        tool_calls=calls,
    )


def growing_prompt(steps: int) -> list[Observation]:
    """A session whose prompt grows by varied steps, as a coding agent's does."""
    measure = sized(text=125)
    observations = []
    for i in range(steps):
        observations.append(Observation(measure=measure, prompt_tokens=true_tokens(measure)))
        step = sized(
            text=10 + 9 * (i % 5),
            inputs=[8, 200, 30, 625, 15, 100][i % 6],
            outputs=[5, 750, 100, 3750, 38][i % 5],
            calls=1 + (i % 4 == 0) + (i % 7 == 0),
        )
        measure = measure + step
    return observations


def replay(observations: list[Observation]) -> Calibration:
    calibration = Calibration()
    for observation in observations:
        calibration = calibrate(calibration, observation)
    return calibration


def test_without_observations_the_calibrated_counter_is_the_plain_estimate() -> None:
    plain, calibrated = EstimateCounter(), CalibratedCounter()
    for chars in (0, 1, 2, 7, 4000):
        assert calibrated.count("y" * chars) == plain.count("y" * chars)
    assert calibrated.count_messages(VIEW) == plain.count_messages(VIEW)
    one_call = calibrated.observe(growing_prompt(1)[0])
    assert one_call.calibration.pairs == 0
    assert one_call.count_messages(VIEW) == plain.count_messages(VIEW)


def test_calibration_learns_the_rates_of_a_tokenizer() -> None:
    calibration = replay(growing_prompt(40))
    assert calibration.pairs == 39
    for learnt, true in zip(calibration.rates, TRUE_RATES, strict=True):
        assert learnt == pytest.approx(true, rel=0.02)
    assert calibration.overhead == pytest.approx(TRUE_OVERHEAD, rel=0.05)
    step = sized(text=75, inputs=50, outputs=1250, calls=2)
    predicted = CalibratedCounter(calibration).count_measure(step)
    assert predicted == pytest.approx(true_tokens(step) - BASE_TOKENS, rel=0.01)


def test_calibration_is_a_pure_function_so_replay_is_exact() -> None:
    observations = growing_prompt(12)
    first, second = replay(observations), replay(observations)
    assert first == second
    assert msgspec.msgpack.encode(first) == msgspec.msgpack.encode(second)
    before = replay(observations[:5])
    frozen = msgspec.msgpack.encode(before)
    calibrate(before, observations[5])
    assert msgspec.msgpack.encode(before) == frozen


def test_observe_returns_a_new_counter_and_leaves_the_old_one() -> None:
    observations = growing_prompt(3)
    counter = CalibratedCounter().observe(observations[0])
    later = counter.observe(observations[1]).observe(observations[2])
    assert counter.calibration.pairs == 0 and later.calibration.pairs == 2
    assert later.calibration == replay(observations)


def test_a_shrinking_prompt_teaches_nothing_and_becomes_the_baseline() -> None:
    observations = growing_prompt(6)
    learnt = replay(observations)
    compacted = Observation(measure=sized(text=225), prompt_tokens=BASE_TOKENS + 300)
    after = calibrate(learnt, compacted)
    assert after.pairs == learnt.pairs
    assert after.rates == learnt.rates and after.overhead == learnt.overhead
    assert after.last == compacted


def test_a_pair_that_gained_no_pieces_teaches_nothing() -> None:
    first = Observation(measure=sized(text=25), prompt_tokens=1000)
    same = Observation(measure=sized(text=25), prompt_tokens=1040)
    assert calibrate(calibrate(Calibration(), first), same).pairs == 0


def test_a_measure_recorded_before_pieces_were_counted_teaches_nothing() -> None:
    old = [
        Observation(
            measure=PromptMeasure(text_chars=o.measure.chars), prompt_tokens=o.prompt_tokens
        )
        for o in growing_prompt(6)
    ]
    assert replay(old).pairs == 0
    # Nor the pair between an old report and the first new one; the new ones teach as usual.
    assert replay([*old, *growing_prompt(6)[3:]]).pairs == 2


def test_media_are_charged_at_the_fixed_rate_and_not_learnt() -> None:
    with_image = [
        Observation(
            measure=o.measure + PromptMeasure(media=i // 3),
            prompt_tokens=o.prompt_tokens + (i // 3) * MEDIA_TOKENS,
        )
        for i, o in enumerate(growing_prompt(30))
    ]
    assert replay(with_image).rates == pytest.approx(replay(growing_prompt(30)).rates)


def test_absurd_usage_is_clamped_to_a_sane_range() -> None:
    huge = [
        Observation(measure=sized(text=10 * i, calls=i), prompt_tokens=10**6 * i)
        for i in range(1, 6)
    ]
    calibration = replay(huge)
    assert all(MIN_RATE <= r <= MAX_RATE for r in calibration.rates)
    assert 0 <= calibration.overhead <= MAX_OVERHEAD
    tiny = [Observation(measure=sized(outputs=10**6 * i), prompt_tokens=i) for i in range(1, 6)]
    assert replay(tiny).rates[2] == MIN_RATE


# --- tiktoken ------------------------------------------------------------------------------------


def _local_tiktoken() -> TiktokenCounter:
    try:
        return TiktokenCounter()
    except TokenizerUnavailable as e:
        pytest.skip(e.reason)


def test_tiktoken_counts_exactly() -> None:
    counter = _local_tiktoken()
    assert counter.count("hello world") == 2
    assert counter.count("") == 0
    assert counter.count("<|endoftext|>") > 1  # special-token text counts as text
    assert counter.count_messages(VIEW) > 2 * MEDIA_TOKENS


def test_tiktoken_not_installed_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # makes the import fail
    with pytest.raises(TokenizerUnavailable) as raised:
        TiktokenCounter()
    assert raised.value.reason == "tiktoken is not installed"


def test_tiktoken_without_a_local_encoding_is_a_typed_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = types.ModuleType("tiktoken")
    fake.list_encoding_names = lambda: ["cl100k_base", "o200k_base"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    with pytest.raises(TokenizerUnavailable) as raised:
        TiktokenCounter()
    assert raised.value.reason.startswith("no local tiktoken encoding 'cl100k_base'")


class _CharEncoding:
    """A stand-in encoding: one token per character."""

    name = "chars"

    def encode(self, text: str, *, disallowed_special: Any = ()) -> list[int]:
        return [ord(c) for c in text]


def test_tiktoken_counter_over_a_given_encoding_counts_every_content() -> None:
    counter = TiktokenCounter(_CharEncoding())
    assert counter.count("abc") == 3
    assert counter.count_messages(VIEW) == 48 + VIEW_INPUT_CHARS + 100 + 2 * MEDIA_TOKENS


def test_the_config_names_the_counter() -> None:
    from contextledger.config import Config
    from contextledger.policy._tokens import CalibratedCounter, EstimateCounter, counter_for

    assert isinstance(counter_for(Config().tokens), EstimateCounter)
    calibrated = Config.from_dict({"tokens": {"counter": "calibrated"}}).tokens
    assert isinstance(counter_for(calibrated), CalibratedCounter)


def test_a_session_calibrates_from_its_usage_reports() -> None:
    from contextledger.events import ModelRef, RecordedEvent, Usage, UsageReported
    from contextledger.history import History
    from contextledger.policy._tokens import calibrate, calibration_from_usage
    from contextledger.testing._builder import SessionBuilder

    model = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4")
    other = ModelRef(provider_id="openai", model_id="gpt-5")
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    b.finish(reply)
    steps = [(1000, 300), (3000, 850), (9000, 2400), (12000, 3300)]
    expected = Calibration()
    for chars, tokens in steps:
        measure = sized(text=chars // 4, calls=chars // 1000)
        b.add(
            UsageReported, message_id=reply, usage=Usage(input=tokens), measure=measure, model=model
        )
        expected = calibrate(expected, Observation(measure=measure, prompt_tokens=tokens))
    b.add(
        UsageReported,
        message_id=reply,
        usage=Usage(input=99_999),
        measure=PromptMeasure(text_chars=10),
        model=other,
    )
    b.add(UsageReported, message_id=reply, usage=Usage(input=5))  # no measure: not learnt from
    history = History.rebuild(
        b.session_id, [RecordedEvent(b.session_id, i, i, e) for i, e in enumerate(b.events, 1)]
    )
    learnt = calibration_from_usage(history.state.usage_reports, model)
    assert learnt == expected
    assert learnt.pairs == len(steps) - 1
    assert CalibratedCounter(learnt).count("x" * 4000) != EstimateCounter().count("x" * 4000)


def test_usage_reports_are_learnt_the_same_all_at_once_or_as_they_arrive() -> None:
    from contextledger.events import ModelRef, Usage, UsageReported
    from contextledger.policy._tokens import calibration_from_usage

    model = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4")
    reports = [
        UsageReported(
            session_id="s",
            message_id="m",
            usage=Usage(input=tokens),
            measure=sized(text=chars // 4, outputs=chars // 8),
            model=model,
        )
        for chars, tokens in [(1000, 400), (5000, 1700), (6000, 2100), (20000, 6500)]
    ]
    at_once = calibration_from_usage(reports, model)
    folded = calibration_from_usage(reports[:2], model)
    folded = calibration_from_usage(reports[2:], model, folded)
    assert folded == at_once and at_once.pairs == 3


# --- a whole request ------------------------------------------------------------------------------


def _request() -> Any:
    from contextledger.events._parts import ModelRef, ToolSchema
    from contextledger.vocabulary._requests import Request

    tool = ToolSchema(name="bash", description="Run.", input_schema={"type": "object"})
    return Request(
        model=ModelRef(provider_id="anthropic", model_id="m"),
        session_id="s",
        system=("s" * 30, "t" * 10),
        tools=(tool,),
        messages=tuple(VIEW),
    )


def test_a_request_measures_its_system_and_tool_table_beside_its_messages() -> None:
    from contextledger.policy._tokens import measure_request

    request = _request()
    tool = msgspec.json.encode(request.tools[0])
    assert measure_request(request) == measure_messages(VIEW) + PromptMeasure(
        text_chars=40, text_pieces=2, input_chars=len(tool), input_pieces=pieces(tool.decode())
    )


def test_a_request_is_counted_by_the_counter_given() -> None:
    from contextledger.policy._tokens import count_request, measure_request

    request = _request()
    measure = measure_request(request)
    assert count_request(EstimateCounter(), request) == EstimateCounter().count_measure(measure)
    learnt = CalibratedCounter(Calibration(rates=(0.5, 0.25, 0.1), overhead=20.0, pairs=1))
    assert count_request(learnt, request) == learnt.count_measure(measure)
    # Any other counter counts the messages, each system block and the tool table's JSON.
    tools = len(msgspec.json.encode(request.tools))
    exact = TiktokenCounter(_CharEncoding())
    assert count_request(exact, request) == exact.count_messages(VIEW) + 30 + 10 + tools
