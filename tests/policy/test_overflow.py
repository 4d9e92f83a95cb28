"""Specification of ``contextledger.policy._overflow``: the usable window, overflow, pressure,
preflight and output caps.

Scenario ids name their source: ``9.1#n`` and ``9.5#n`` are opencode-kilo.md §9 (opencode's
and Kilo's ``compaction.test.ts`` / error-policy tests); ``mimo`` ids are mimo-pi.md §6
(MiMo's ``overflow.test.ts``), whose numbers are the worked oracles of mimo-pi.md §1a.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.config import (
    CompactionConfig,
    Config,
    ConfigError,
    OutputConfig,
    TokensConfig,
)
from contextledger.events._parts import ToolSchema, Usage
from contextledger.policy._overflow import (
    COMPACTION_BUFFER,
    MEDIA_MARKER,
    OPAQUE_MARKER,
    PreflightMeasure,
    ReportedTurn,
    Window,
    cap_output_tokens,
    compaction_limit,
    compaction_reserve,
    completion_budget,
    context_pressure_level,
    context_window,
    effective_budget,
    effective_trigger_ratio,
    full_count,
    is_overflow,
    max_output_tokens,
    measure_preflight,
    mid_tool_round,
    output_budget,
    preflight_baseline,
    preflight_enabled,
    preflight_tokens,
    pressure_for,
    pressure_level,
    should_compact_preflight,
    token_count,
    upstream_count,
    usable,
)
from contextledger.vocabulary._defaults import DEFAULT_TRIGGER_RATIO, OUTPUT_TOKEN_MAX
from contextledger.vocabulary._messages import (
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._models import Model, ModelLimits
from contextledger.vocabulary._options import OverflowVariant
from contextledger.vocabulary._quantities import parse_quantity, parse_trigger_ratio

VARIANTS: tuple[OverflowVariant, ...] = ("opencode", "kilo", "mimo")


def model(
    context: int,
    output: int = 32_000,
    input: int | None = None,
    *,
    provider: str = "test",
    model_id: str = "test-model",
) -> Model:
    return Model(
        provider_id=provider,
        model_id=model_id,
        limits=ModelLimits(context=context, output=output, input=input),
    )


def config(
    variant: OverflowVariant = "mimo", *, output: OutputConfig | None = None, **compaction: Any
) -> Config:
    return Config(
        compaction=CompactionConfig(overflow_variant=variant, **compaction),
        output=output or OutputConfig(),
    )


def tokens(
    input: int = 0, output: int = 0, *, reasoning: int = 0, read: int = 0, write: int = 0
) -> Usage:
    return Usage(
        input=input, output=output, reasoning=reasoning, cache_read=read, cache_write=write
    )


# a 1M-class GPT shape: a 1.05M context with a smaller 922K input limit (mimo-pi §1a)
LARGE = model(1_050_000, 128_000, 922_000, model_id="gpt-5.6")


# --- opencode / Kilo isOverflow (§9.1) -----------------------------------------------------

SCENARIOS_9_1 = [
    pytest.param(model(100_000), tokens(75_000, 5_000), True, id="9.1#1 100k ctx: 80k overflows"),
    pytest.param(model(200_000), tokens(100_000, 10_000), False, id="9.1#2 200k ctx: 110k fits"),
    pytest.param(
        model(100_000),
        tokens(60_000, 10_000, read=10_000),
        True,
        id="9.1#3 cache read counts",
    ),
    pytest.param(
        model(400_000, 128_000, 272_000),
        tokens(271_000, 1_000, read=2_000),
        True,
        id="9.1#4 input limit 272k overflows",
    ),
    pytest.param(
        model(400_000, 128_000, 272_000),
        tokens(200_000, 20_000, read=10_000),
        False,
        id="9.1#5 within the 272k input limit",
    ),
    pytest.param(
        model(200_000, 10_000, 120_000),
        tokens(50_000, 9_999),
        False,
        id="9.1#6 output within limit with an input cap",
    ),
    pytest.param(
        model(200_000, 32_000, 200_000),
        tokens(180_000, 15_000, read=3_000),
        True,
        id="9.1#7 reserve subtracted from the input limit (198k)",
    ),
    pytest.param(
        model(200_000),
        tokens(180_000, 15_000, read=3_000),
        True,
        id="9.1#8 no input limit, same tokens",
    ),
    pytest.param(
        model(200_000, 32_000, 200_000),
        tokens(166_000, 10_000, read=5_000),
        True,
        id="9.1#9a 181k with an input limit",
    ),
    pytest.param(
        model(200_000),
        tokens(166_000, 10_000, read=5_000),
        True,
        id="9.1#9b 181k without an input limit",
    ),
    pytest.param(model(0), tokens(100_000, 10_000), False, id="9.1#10 context 0 never overflows"),
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("m", "usage", "expected"), SCENARIOS_9_1)
def test_opencode_overflow_scenarios_hold_in_every_variant(
    m: Model, usage: Usage, expected: bool, variant: OverflowVariant
) -> None:
    assert is_overflow(m, usage, config(variant)) is expected


@pytest.mark.parametrize("variant", VARIANTS)
def test_9_1_11_auto_off_never_overflows(variant: OverflowVariant) -> None:
    assert not is_overflow(model(100_000), tokens(75_000, 5_000), config(variant, auto=False))


# --- the usable window by variant ----------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "m", "expected"),
    [
        pytest.param("opencode", model(200_000), 168_000, id="opencode 200k-32k: context - output"),
        pytest.param("kilo", model(200_000), 148_000, id="kilo 200k-32k: also minus the reserve"),
        pytest.param("mimo", model(200_000), 180_000, id="mimo 200k-32k: 90 percent"),
        pytest.param(
            "opencode", model(400_000, 128_000, 272_000), 252_000, id="opencode input - reserve"
        ),
        pytest.param("kilo", model(400_000, 128_000, 272_000), 252_000, id="kilo input - reserve"),
        pytest.param("mimo", model(400_000, 128_000, 272_000), 244_800, id="mimo 90% of input"),
        pytest.param("opencode", model(8_192, 8_192), 0, id="opencode collapses on 8k-8k"),
        pytest.param("kilo", model(8_192, 8_192), 0, id="kilo collapses on 8k-8k"),
        pytest.param("mimo", model(8_192, 8_192), 4_096, id="mimo keeps half of 8k-8k"),
        pytest.param("kilo", model(0), 0, id="unknown window is 0"),
    ],
)
def test_usable_window_by_variant(variant: OverflowVariant, m: Model, expected: int) -> None:
    assert usable(m, config(variant)) == expected


def test_the_default_variant_is_mimo() -> None:
    assert Config().compaction.overflow_variant == "mimo"


def test_reserve_defaults_to_the_buffer_capped_by_the_output_limit() -> None:
    assert compaction_reserve(model(200_000, 32_000), config()) == COMPACTION_BUFFER
    assert compaction_reserve(model(200_000, 10_000), config()) == 10_000
    assert compaction_reserve(model(200_000, 10_000), config(reserved=5_000)) == 5_000


def test_configured_reserve_moves_the_opencode_windows() -> None:
    assert usable(model(200_000), config("kilo", reserved=5_000)) == 163_000
    assert usable(model(200_000, 32_000, 200_000), config("opencode", reserved=5_000)) == 195_000


def test_output_cap_bounds_the_output_reservation() -> None:
    capped = config("kilo", output=OutputConfig(max_tokens=2_000, min=1_024))
    # 20k - min(10k, 2k) output - min(20k, 2k) reserve
    assert usable(model(20_000, 10_000), capped) == 16_000


# --- counting a reported turn --------------------------------------------------------------


def test_full_count_includes_reasoning_and_both_cache_figures() -> None:
    usage = tokens(1_000, 500, reasoning=200, read=300, write=400)
    assert full_count(usage) == 2_400


def test_upstream_count_omits_reasoning() -> None:
    usage = tokens(1_000, 500, reasoning=200, read=300, write=400)
    assert upstream_count(usage) == 2_200


def test_upstream_count_prefers_the_provider_total() -> None:
    assert upstream_count(tokens(1_000, 500), total=9_999) == 9_999


def test_full_count_falls_back_to_the_provider_total_when_components_are_empty() -> None:
    assert full_count(tokens(), total=1_500) == 1_500
    assert full_count(tokens(1_000), total=1_500) == 1_000


def test_count_rule_is_configurable() -> None:
    usage = tokens(1_000, 500, reasoning=200)
    assert token_count(usage, config()) == 1_700
    assert token_count(usage, config(count="upstream")) == 1_500


def test_reasoning_tokens_can_tip_a_turn_into_overflow_only_under_the_full_count() -> None:
    usage = tokens(70_000, 5_000, reasoning=10_000)  # 85k full, 75k upstream; usable 80k
    m = model(100_000)
    assert is_overflow(m, usage, config("mimo", count="full"))
    assert not is_overflow(m, usage, config("mimo", count="upstream"))


# --- Kilo threshold_percent ----------------------------------------------------------------


def test_threshold_percent_lowers_the_limit_to_its_share_of_the_context() -> None:
    assert compaction_limit(model(200_000), config("kilo", threshold_percent=50)) == 100_000


def test_threshold_percent_never_raises_the_limit_above_usable() -> None:
    assert compaction_limit(model(200_000), config("kilo", threshold_percent=90)) == 148_000


def test_fractional_threshold_percent_is_exact() -> None:
    # 100_000 * 33.3 / 100 in floats is 33_299.999...
    assert compaction_limit(model(100_000), config(threshold_percent=33.3)) == 33_300


def test_threshold_percent_triggers_overflow_earlier() -> None:
    usage = tokens(100_000)
    assert not is_overflow(model(200_000), usage, config())
    assert is_overflow(model(200_000), usage, config(threshold_percent=50))


def test_threshold_percent_is_ignored_for_an_unknown_window() -> None:
    assert compaction_limit(model(0), config(threshold_percent=50)) == 0


# --- MiMo pressure levels (§6) -------------------------------------------------------------

MIMO_200K = model(200_000)
MIMO_200K_USABLE = 180_000


@pytest.mark.parametrize(
    ("percent", "level"),
    [
        pytest.param(30, 0, id="mimo pressure 30% of usable is 0"),
        pytest.param(60, 1, id="mimo pressure 60% of usable is 1"),
        pytest.param(80, 2, id="mimo pressure 80% of usable is 2"),
        pytest.param(90, 3, id="mimo pressure 90% of usable is 3"),
    ],
)
def test_pressure_level_rises_with_usage(percent: int, level: int) -> None:
    usage = tokens(MIMO_200K_USABLE * percent // 100)
    assert pressure_level(MIMO_200K, usage, config()) == level


def test_auto_off_silences_pressure_level_but_not_context_pressure() -> None:
    usage = tokens(MIMO_200K_USABLE * 90 // 100)
    assert pressure_level(MIMO_200K, usage, config(auto=False)) == 0
    assert context_pressure_level(MIMO_200K, usage, config(auto=False)) == 3


@pytest.mark.parametrize(
    ("percent", "level"),
    [
        pytest.param(50, 1, id="mimo exactly 50% is level 1"),
        pytest.param(70, 2, id="mimo exactly 70% is level 2"),
        pytest.param(85, 3, id="mimo exactly 85% is level 3"),
    ],
)
def test_context_pressure_boundaries_are_exact(percent: int, level: int) -> None:
    usage = tokens(MIMO_200K_USABLE * percent // 100)
    assert context_pressure_level(MIMO_200K, usage, config(auto=False)) == level


def test_unknown_window_has_no_pressure_and_never_overflows() -> None:
    usage = tokens(100_000)
    assert pressure_level(model(0), usage, config()) == 0
    assert context_pressure_level(model(0), usage, config()) == 0
    assert not is_overflow(model(0), usage, config())


# --- MiMo isOverflow (§6) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("m", "usage", "expected"),
    [
        pytest.param(model(100_000), tokens(88_000, 5_000), True, id="mimo 100k: 93k overflows"),
        pytest.param(model(200_000), tokens(100_000, 10_000), False, id="mimo 200k: 110k fits"),
        pytest.param(
            model(100_000), tokens(60_000, 10_000, read=25_000), True, id="mimo cache read counts"
        ),
        pytest.param(
            model(200_000), tokens(300, 400, write=180_000), True, id="mimo cache write counts"
        ),
        pytest.param(
            model(400_000, 128_000, 272_000),
            tokens(271_000, 1_000, read=2_000),
            True,
            id="mimo 272k input limit: 274k overflows",
        ),
        pytest.param(
            model(400_000, 128_000, 272_000),
            tokens(200_000, 20_000, read=10_000),
            False,
            id="mimo 272k input limit: 230k fits",
        ),
        pytest.param(
            model(200_000, 10_000, 120_000),
            tokens(50_000, 9_999),
            False,
            id="mimo 120k input limit: 59,999 fits",
        ),
        pytest.param(
            model(200_000, 32_000, 200_000),
            tokens(180_000, 15_000, read=3_000),
            True,
            id="mimo the flat ratio reserves headroom with an input limit",
        ),
        pytest.param(
            model(200_000, 32_000, 200_000),
            tokens(166_000, 10_000, read=5_000),
            True,
            id="mimo 181k with an input limit",
        ),
        pytest.param(
            model(200_000),
            tokens(166_000, 10_000, read=5_000),
            True,
            id="mimo 181k without an input limit",
        ),
    ],
)
def test_mimo_overflow_scenarios(m: Model, usage: Usage, expected: bool) -> None:
    assert is_overflow(m, usage, config("mimo")) is expected


def test_mimo_cache_write_turn_is_at_full_pressure() -> None:
    usage = tokens(300, 400, write=180_000)
    assert context_pressure_level(model(200_000), usage, config("mimo")) == 3


def test_mimo_auto_off_never_overflows() -> None:
    assert not is_overflow(model(100_000), tokens(75_000, 5_000), config("mimo", auto=False))


def test_input_limit_and_no_limit_models_trigger_at_the_same_point() -> None:
    with_limit = model(200_000, 32_000, 200_000)
    without = model(200_000)
    assert usable(with_limit, config("mimo")) == usable(without, config("mimo")) == 180_000


# --- MiMo usable (§6) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("m", "cfg", "expected"),
    [
        pytest.param(model(200_000), config(), 180_000, id="mimo usable 200k-32k"),
        pytest.param(model(131_072), config(), 111_072, id="mimo usable 131k: the reserve bites"),
        pytest.param(model(200_000, 8_000), config(), 180_000, id="mimo usable 200k-8k"),
        pytest.param(
            model(400_000, 128_000, 272_000), config(), 244_800, id="mimo usable 272k input"
        ),
        pytest.param(
            model(200_000, 64_000, model_id="claude-opus-4-5"),
            config(),
            180_000,
            id="mimo usable claude-opus-4-5 64k output",
        ),
        pytest.param(
            model(200_000, 64_000, model_id="gpt-4.1"),
            config(),
            180_000,
            id="mimo usable gpt-4.1 64k output",
        ),
        pytest.param(
            model(200_000, 64_000, model_id="mimo-pro"),
            config(),
            180_000,
            id="mimo usable mimo-pro 64k output",
        ),
        pytest.param(
            model(200_000, 8_000),
            config(reserved=5_000),
            180_000,
            id="mimo usable: reserved no longer shrinks the trigger",
        ),
    ],
)
def test_mimo_usable(m: Model, cfg: Config, expected: int) -> None:
    assert usable(m, cfg) == expected


def test_mimo_models_with_an_input_limit_are_not_further_reduced_by_the_output_reserve() -> None:
    # The provider already budgets output outside the input limit (MiMo's test comment);
    # MiMo's own numbers cannot show it, ratio 1 does.
    m = model(400_000, 128_000, 200_000)
    assert usable(m, config(trigger_ratio=1)) == 200_000
    assert usable(model(200_000), config(trigger_ratio=1)) == 180_000


# --- MiMo completionBudget (§6) ------------------------------------------------------------

WINDOW_131K = model(131_072)


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        pytest.param(50_000, 32_000, id="mimo completion passes through when there is room"),
        pytest.param(99_509, 30_539, id="mimo completion trimmed to the window (#2356)"),
        pytest.param(131_072, 1_024, id="mimo completion never below the floor"),
    ],
)
def test_completion_budget(prompt: int, expected: int) -> None:
    assert completion_budget(WINDOW_131K, 32_000, lambda: prompt, config()) == expected


def test_completion_budget_leaves_models_with_an_input_limit_alone() -> None:
    m = model(400_000, 128_000, 272_000)
    assert completion_budget(m, 128_000, lambda: 271_000, config()) == 128_000


def test_completion_budget_keeps_an_unset_request_unset() -> None:
    assert completion_budget(WINDOW_131K, None, lambda: 130_000, config()) is None


def test_completion_budget_does_not_estimate_when_the_model_cannot_need_it() -> None:
    calls: list[int] = []

    def estimate() -> int:
        calls.append(1)
        return 0

    completion_budget(model(400_000, 128_000, 272_000), 128_000, estimate, config())
    completion_budget(model(0), 128_000, estimate, config())
    assert calls == []


# --- MiMo trigger ratio (§6) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [
        pytest.param("0.75", 150_000, id="mimo ratio '0.75' moves the trigger"),
        pytest.param("75%", 150_000, id="mimo ratio '75%' equals the decimal"),
        pytest.param("1", 180_000, id="mimo ratio 1 still leaves the output reserve"),
        pytest.param(0.75, 150_000, id="mimo ratio as a number"),
    ],
)
def test_trigger_ratio_moves_the_trigger(ratio: float | str, expected: int) -> None:
    assert usable(model(200_000), config(trigger_ratio=ratio)) == expected


def test_trigger_ratio_applies_on_top_of_the_budget() -> None:
    cfg = config(trigger_ratio=0.5, max_context="100K")
    assert context_window(model(200_000), cfg) == Window(
        hard=200_000, effective=100_000, usable=50_000, source="config"
    )


@pytest.mark.parametrize("value", ["0", "-0.5", "1.5", "150%", "abc", ""])
def test_invalid_trigger_ratios_fall_back_to_0_9(value: str) -> None:
    # MiMo reads the ratio from the environment leniently; a Config refuses it outright.
    assert parse_trigger_ratio(value) is None
    assert effective_trigger_ratio(value) == DEFAULT_TRIGGER_RATIO
    lenient = config(trigger_ratio=effective_trigger_ratio(value))
    assert usable(model(200_000), lenient) == 180_000
    with pytest.raises(ConfigError, match=r"^compaction\.trigger_ratio: "):
        CompactionConfig(trigger_ratio=value)


def test_a_fractional_ratio_is_exact() -> None:
    # 100_000 * 0.7 in floats is 69_999.99...
    assert usable(model(100_000, 1_000), config(trigger_ratio=0.7)) == 70_000


# --- MiMo max_context (§6) -----------------------------------------------------------------


def test_no_budget_leaves_the_model_window() -> None:
    assert usable(LARGE, config()) == 829_800
    assert context_window(LARGE, config()) == Window(
        hard=922_000, effective=922_000, usable=829_800, source="model"
    )


def test_a_budget_lowers_the_trigger() -> None:
    cfg = config(max_context="300K")
    assert context_window(LARGE, cfg) == Window(
        hard=922_000, effective=300_000, usable=270_000, source="config"
    )
    assert is_overflow(LARGE, tokens(270_000), cfg)
    assert not is_overflow(LARGE, tokens(269_999), cfg)


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        pytest.param(500_000, 450_000, id="mimo budget as a plain count"),
        pytest.param("50%", 414_900, id="mimo budget as a percentage of the hard window"),
    ],
)
def test_a_budget_is_a_count_or_a_percentage(budget: int | str, expected: int) -> None:
    assert usable(LARGE, config(max_context=budget)) == expected


def test_a_budget_never_raises_the_window() -> None:
    cfg = config(max_context="1M")
    assert context_window(model(128_000, 16_384), cfg) == Window(
        hard=128_000, effective=128_000, usable=111_616, source="model"
    )


def test_budget_patterns_match_with_wildcards_and_the_longest_wins() -> None:
    cfg = config(max_context={"test/gpt-5*": "300K", "test/gpt-5.6": "200K"})
    assert usable(LARGE, cfg) == 180_000
    assert usable(model(1_050_000, 32_000, 922_000, model_id="gpt-5.4"), cfg) == 270_000


def test_budget_keys_matching_no_model_are_ignored_silently() -> None:
    window = context_window(LARGE, config(max_context={"openai/gpt-4o": "100K"}))
    assert window.usable == 829_800
    assert window.ignored_budget is None


def test_a_budget_that_leaves_no_room_for_the_reserve_is_ignored_with_a_reason() -> None:
    window = context_window(LARGE, config(max_context=20_000))
    assert window.usable == 829_800
    assert window.source == "model"
    assert window.ignored_budget is not None
    assert "leaves no room" in window.ignored_budget


def test_an_unparseable_budget_is_ignored_with_a_reason() -> None:
    # a Config refuses it at load time; the pure rule still never applies it
    effective, reason = effective_budget("not-a-budget", LARGE, 20_000)
    assert effective == 922_000
    assert reason is not None
    assert "not a token quantity" in reason
    with pytest.raises(ConfigError, match=r"^compaction\.max_context: "):
        CompactionConfig(max_context="not-a-budget")


def test_an_unknown_window_disables_the_budget() -> None:
    m = model(0, 0)
    cfg = config(max_context="300K")
    assert context_window(m, cfg) == Window(hard=0, effective=0, usable=0, source="model")
    assert not is_overflow(m, tokens(500_000), cfg)


def test_pressure_follows_the_budget() -> None:
    usage = tokens(250_000)
    assert pressure_level(LARGE, usage, config(max_context="300K")) == 3
    assert pressure_level(LARGE, usage, config()) == 0


@pytest.mark.parametrize(
    "budget",
    [
        pytest.param({"test/gpt-5.6": 0}, id="mimo reset: map value 0"),
        pytest.param({"test/gpt-5.6": "0"}, id="mimo reset: map value '0'"),
        pytest.param("", id="mimo reset: empty string"),
        pytest.param(0, id="mimo reset: 0"),
    ],
)
def test_reset_sentinels_restore_the_model_window(budget: Any) -> None:
    window = context_window(LARGE, config(max_context=budget))
    assert (window.usable, window.source, window.ignored_budget) == (829_800, "model", None)


def test_budget_wildcards_match_across_the_provider_separator() -> None:
    assert usable(LARGE, config(max_context={"*gpt-5.6": "200K"})) == 180_000


# --- MiMo parseQuantity (§6) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "base", "expected"),
    [
        pytest.param(300_000, None, 300_000, id="mimo quantity 300000"),
        pytest.param("300K", None, 300_000, id="mimo quantity '300K'"),
        pytest.param("1.5m", None, 1_500_000, id="mimo quantity '1.5m'"),
        pytest.param("50%", 1_000_000, 500_000, id="mimo quantity '50%' of 1M"),
        pytest.param(" 200k ", None, 200_000, id="mimo quantity ' 200k ' trimmed"),
        pytest.param("4.35k", None, 4_350, id="decimal arithmetic is exact"),
        pytest.param("100%", 1_000, 1_000, id="100% is the base"),
    ],
)
def test_parse_quantity_accepts(value: int | str, base: int | None, expected: int) -> None:
    assert parse_quantity(value, base) == expected


@pytest.mark.parametrize(
    ("value", "base"),
    [
        pytest.param("abc", None, id="mimo quantity 'abc'"),
        pytest.param("100G", None, id="mimo quantity '100G'"),
        pytest.param("", None, id="mimo quantity ''"),
        pytest.param("0%", 1_000, id="mimo quantity '0%'"),
        pytest.param("101%", 1_000, id="mimo quantity '101%'"),
        pytest.param("50%", None, id="mimo quantity '50%' without a base"),
        pytest.param(-5, None, id="mimo quantity -5"),
        pytest.param("-5", None, id="negative string"),
        pytest.param(True, None, id="a bool is not a count"),
        pytest.param(math.inf, None, id="infinity"),
    ],
)
def test_parse_quantity_rejects(value: Any, base: int | None) -> None:
    assert parse_quantity(value, base) is None


# --- MiMo small windows (§6) ---------------------------------------------------------------


def test_small_window_keeps_a_proportional_trigger() -> None:
    assert context_window(model(8_192, 8_192), config()) == Window(
        hard=8_192, effective=8_192, usable=4_096, source="model"
    )


def test_an_oversized_reserved_no_longer_zeroes_the_trigger() -> None:
    assert usable(model(200_000, 8_000), config(reserved=500_000)) == 180_000


# --- Kilo preflight ------------------------------------------------------------------------


def user(text: str, source: str = "u") -> ModelMessage:
    return ModelMessage(role="user", content=(ModelText(text=text),), source_id=source)


def assistant(text: str = "", *calls: str, source: str = "a") -> ModelMessage:
    requests = [ModelToolCall(call_id=call, tool="bash", input={"command": "ls"}) for call in calls]
    content = (ModelText(text=text), *requests)
    return ModelMessage(role="assistant", content=content, source_id=source)


def tool(call: str, output: str = "ok", source: str = "t") -> ModelMessage:
    result = ModelToolResult(call_id=call, tool="bash", output=output)
    return ModelMessage(role="tool", content=(result,), source_id=source)


def with_file(url: str) -> ModelMessage:
    content = (ModelText(text="see"), ModelFile(mime="image/png", url=url))
    return ModelMessage(role="user", content=content, source_id="f")


PREFLIGHT = config(threshold_percent=80)
DATA_URL = "data:image/png;base64," + "A" * 400_000


@pytest.mark.parametrize(
    ("m", "cfg", "enabled"),
    [
        pytest.param(model(200_000), config(), False, id="preflight is opt-in"),
        pytest.param(model(200_000), PREFLIGHT, True, id="threshold_percent turns it on"),
        pytest.param(
            model(200_000), config(threshold_percent=80, auto=False), False, id="auto off"
        ),
        pytest.param(model(0), PREFLIGHT, False, id="unknown window"),
    ],
)
def test_preflight_enabled_rule(m: Model, cfg: Config, enabled: bool) -> None:
    assert preflight_enabled(m, cfg) is enabled


def test_measure_inflates_the_estimate_by_1_3() -> None:
    short = measure_preflight([user("x")], config())
    long = measure_preflight([user("x" * 4_001)], config())
    assert abs((long.normalized - short.normalized) - 1_300) <= 2


def test_media_counts_as_a_marker_when_deciding_and_in_full_in_raw() -> None:
    heavy = measure_preflight([with_file(DATA_URL)], config())
    marker = measure_preflight([with_file(MEDIA_MARKER)], config())
    assert heavy.normalized == marker.normalized
    assert heavy.media == 1
    assert abs((heavy.raw - heavy.normalized) - 1.3 * (len(DATA_URL) / 4 - 4)) <= 2


def test_tool_result_attachments_count_as_media() -> None:
    def result(url: str) -> ModelMessage:
        attachment = ModelFile(mime="image/png", url=url)
        content = (ModelToolResult(call_id="c", tool="shot", output="", attachments=(attachment,)),)
        return ModelMessage(role="tool", content=content, source_id="t")

    heavy = measure_preflight([result(DATA_URL)], config())
    assert heavy.normalized == measure_preflight([result(MEDIA_MARKER)], config()).normalized
    assert heavy.media == 1
    assert heavy.raw > heavy.normalized


def test_encrypted_reasoning_counts_as_a_marker() -> None:
    def reasoning(secret: str) -> ModelMessage:
        part = ModelReasoning(
            text="", provider_metadata={"openai": {"reasoningEncryptedContent": secret}}
        )
        return ModelMessage(role="assistant", content=(part,), source_id="a")

    heavy = measure_preflight([reasoning("z" * 40_000)], config())
    assert heavy.normalized == measure_preflight([reasoning(OPAQUE_MARKER)], config()).normalized
    assert heavy.raw > heavy.normalized
    assert heavy.media == 0


def test_tail_is_the_messages_after_the_last_assistant_message() -> None:
    after = [tool("c1", "x" * 8_000), user("next")]
    full = measure_preflight([user("first"), assistant("", "c1"), *after], config())
    assert full.tail == measure_preflight(after, config()).tail
    assert full.tail < full.normalized


def test_without_an_assistant_message_the_tail_is_everything() -> None:
    messages = [user("x" * 4_000)]
    assert measure_preflight(messages, config()).tail >= 1_300


@given(
    text=st.text(max_size=60),
    per_token=st.integers(1, 8),
    factor=st.sampled_from([1.0, 1.1, 1.25, 1.3, 2.0]),
)
def test_preflight_tokens_is_the_estimate_the_preflight_tail_makes(
    text: str, per_token: int, factor: float
) -> None:
    """One inflated estimate: the characters at ``chars_per_token`` rounded half up, then times
    the factor rounded up exactly (not the characters times the factor in floats)."""
    cfg = Config(tokens=TokensConfig(chars_per_token=per_token, preflight_factor=factor))
    chars = len(msgspec.json.encode([user(text)]).decode())
    assert preflight_tokens(chars, cfg) == measure_preflight([user(text)], cfg).tail
    assert preflight_tokens(0, cfg) == 0


def test_preflight_tokens_rounds_the_estimate_before_inflating_it() -> None:
    # round(13 / 4) = 3 and 3 x 1.3 = 3.9: 4 tokens, where 13 / 4 x 1.3 = 4.225 would be 5.
    assert preflight_tokens(13, Config()) == 4
    assert preflight_tokens(6, Config()) == 3  # 2 x 1.3, where 6 / 4 x 1.3 = 1.95 would be 2


def test_overhead_is_tools_and_system_text_only() -> None:
    schema = ToolSchema(name="bash", description="run", input_schema={"type": "object"})
    system = ["s" * 4_000]
    bare = measure_preflight([], config(), tools=[schema])
    loaded = measure_preflight([user("x" * 8_000)], config(), tools=[schema], system=system)
    assert 1_300 <= loaded.overhead - bare.overhead <= 1_301
    assert loaded.normalized >= loaded.overhead + 2_600


@pytest.mark.parametrize(
    ("messages", "continuing"),
    [
        pytest.param([user("go"), assistant("", "c1"), tool("c1")], True, id="tool after user"),
        pytest.param(
            [user("go"), assistant("", "c1"), tool("c1"), assistant("done"), user("next")],
            False,
            id="tool round closed by a new user message",
        ),
        pytest.param([user("go"), assistant("hi")], False, id="no tool message"),
        pytest.param([], False, id="empty"),
    ],
)
def test_mid_tool_round(messages: list[ModelMessage], continuing: bool) -> None:
    assert mid_tool_round(messages) is continuing
    assert measure_preflight(messages, config()).continuation is continuing


def measure(
    normalized: int = 0, *, tail: int = 0, overhead: int = 0, continuation: bool = False
) -> PreflightMeasure:
    return PreflightMeasure(
        normalized=normalized,
        raw=normalized,
        tail=tail,
        overhead=overhead,
        continuation=continuation,
        media=0,
    )


def test_9_5_79_preflight_over_the_limit_compacts_instead_of_erroring() -> None:
    decision = should_compact_preflight(model(200_000), measure(170_000), PREFLIGHT)
    assert decision.compact
    assert decision.reason == "limit-reached"
    assert (decision.projected, decision.limit, decision.source) == (170_000, 160_000, "estimate")


def test_9_5_80_preflight_compacts_even_after_a_tool_ran() -> None:
    messages = [
        user("go"),
        assistant("", "c1"),
        tool("c1", "x" * 40_000),
        assistant("done"),
        user("next"),
    ]
    measured = measure_preflight(messages, PREFLIGHT)
    decision = should_compact_preflight(model(10_000), measured, PREFLIGHT)
    assert decision.compact


def test_preflight_never_compacts_mid_tool_round() -> None:
    decision = should_compact_preflight(
        model(200_000), measure(190_000, continuation=True), PREFLIGHT
    )
    assert not decision.compact
    assert decision.reason == "mid-tool-round"


def test_preflight_disabled_reports_numbers_but_never_compacts() -> None:
    decision = should_compact_preflight(model(200_000), measure(190_000), config())
    assert (decision.compact, decision.reason, decision.projected) == (False, "disabled", 190_000)


def test_preflight_compacts_at_exactly_the_limit() -> None:
    assert should_compact_preflight(model(200_000), measure(160_000), PREFLIGHT).compact
    under = should_compact_preflight(model(200_000), measure(159_999), PREFLIGHT)
    assert (under.compact, under.reason) == (False, "under-limit")


def test_preflight_projects_from_a_report_plus_what_is_new() -> None:
    measured = measure(10_000, tail=3_000, overhead=2_000)
    decision = should_compact_preflight(model(200_000), measured, PREFLIGHT, reported=156_000)
    assert (decision.projected, decision.source, decision.compact) == (161_000, "reported", True)


def test_preflight_without_a_positive_report_uses_the_estimate() -> None:
    measured = measure(10_000, tail=3_000, overhead=2_000)
    decision = should_compact_preflight(model(200_000), measured, PREFLIGHT, reported=0)
    assert (decision.projected, decision.source) == (10_000, "estimate")


def test_preflight_limit_is_the_threshold_share_of_the_context() -> None:
    decision = should_compact_preflight(model(200_000), measure(1), config(threshold_percent=25))
    assert decision.limit == 50_000


REPORT = ReportedTurn(message_id="a2", usage=tokens(100_000, 2_000, read=50_000))


def test_baseline_is_the_newest_finished_report() -> None:
    assert preflight_baseline("a2", REPORT, config()) == 152_000


@pytest.mark.parametrize(
    ("newest", "finished"),
    [
        pytest.param("a3", REPORT, id="an unfinished assistant trails the report"),
        pytest.param(
            "a2",
            ReportedTurn(message_id="a2", usage=REPORT.usage, summary=True),
            id="a summary turn",
        ),
        pytest.param(
            "a2", ReportedTurn(message_id="a2", usage=tokens(0, 500)), id="no prompt-side tokens"
        ),
        pytest.param(None, None, id="nothing finished yet"),
    ],
)
def test_baseline_is_withheld_when_the_report_under_counts(
    newest: str | None, finished: ReportedTurn | None
) -> None:
    assert preflight_baseline(newest, finished, config()) is None


# --- output caps ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "cap", "expected"),
    [
        pytest.param(128_000, OUTPUT_TOKEN_MAX, 32_000, id="capped at 32k"),
        pytest.param(8_000, OUTPUT_TOKEN_MAX, 8_000, id="a smaller model limit wins"),
        pytest.param(0, OUTPUT_TOKEN_MAX, 32_000, id="unknown output limit gets the cap"),
        pytest.param(10_000, 2_000, 2_000, id="a configured cap"),
    ],
)
def test_max_output_tokens(output: int, cap: int, expected: int) -> None:
    assert max_output_tokens(ModelLimits(context=200_000, output=output), cap) == expected


QWEN_32K = model(32_768, 32_768)


@pytest.mark.parametrize(
    ("configured", "m", "prompt", "expected"),
    [
        pytest.param(None, QWEN_32K, 0, None, id="no configured value stays unset"),
        pytest.param(0, QWEN_32K, 0, None, id="a non-positive value is dropped"),
        pytest.param(32_000, model(0), 10_000, 32_000, id="unknown window keeps configured"),
        pytest.param(32_000, model(200_000), 10_000, 32_000, id="room left keeps configured"),
        pytest.param(32_000, QWEN_32K, 20_000, 10_720, id="small window trims to what is left"),
        pytest.param(32_000, QWEN_32K, 30_000, 1_024, id="never below the minimum"),
        pytest.param(32_000, QWEN_32K, 40_000, 32_000, id="no room keeps configured"),
    ],
)
def test_cap_output_tokens(configured: int | None, m: Model, prompt: int, expected: int) -> None:
    assert cap_output_tokens(m, configured, measure(prompt), config()) == expected


def test_cap_output_tokens_never_raises_a_small_configured_value_to_the_minimum() -> None:
    assert cap_output_tokens(model(3_000), 512, measure(500), config()) == 512


def test_cap_output_tokens_reserves_for_each_media_item() -> None:
    with_media = PreflightMeasure(
        normalized=20_000, raw=90_000, tail=0, overhead=0, continuation=False, media=2
    )
    assert cap_output_tokens(QWEN_32K, 32_000, with_media, config()) == 10_720 - 4_096


def test_cap_output_tokens_trusts_a_larger_report() -> None:
    capped = cap_output_tokens(QWEN_32K, 32_000, measure(5_000), config(), reported=20_000)
    assert capped == 10_720


def test_output_budget_defaults_to_kilo_and_can_use_mimo() -> None:
    mimo = Config(output=OutputConfig(budget_rule="mimo"))
    assert output_budget(QWEN_32K, 32_000, measure(20_000), config()) == 10_720
    assert output_budget(QWEN_32K, 32_000, measure(20_000), mimo) == 32_768 - 20_000 - 1_024
    assert output_budget(QWEN_32K, 32_000, measure(40_000), mimo) == 1_024


# --- properties ----------------------------------------------------------------------------

counts = st.integers(min_value=0, max_value=4_000_000)
limits = st.builds(
    ModelLimits,
    context=st.integers(min_value=0, max_value=2_000_000),
    output=st.integers(min_value=0, max_value=256_000),
    input=st.one_of(st.none(), st.integers(min_value=0, max_value=2_000_000)),
)
budgets = st.one_of(
    st.none(),
    st.integers(min_value=0, max_value=3_000_000),
    st.integers(min_value=1, max_value=100).map(lambda p: f"{p}%"),
    st.integers(min_value=1, max_value=3_000).map(lambda k: f"{k}K"),
)
ratios = st.integers(min_value=1, max_value=100).map(lambda p: p / 100)


@given(a=counts, b=counts, limit=st.integers(min_value=1, max_value=2_000_000))
def test_pressure_is_monotone_in_tokens(a: int, b: int, limit: int) -> None:
    low, high = sorted((a, b))
    assert pressure_for(low, limit) <= pressure_for(high, limit)


@given(limits=limits, budget=budgets, ratio=ratios, reserved=st.none() | counts)
def test_usable_never_exceeds_effective_nor_effective_hard(
    limits: ModelLimits, budget: int | str | None, ratio: float, reserved: int | None
) -> None:
    m = Model(provider_id="p", model_id="m", limits=limits)
    window = context_window(m, config(max_context=budget, trigger_ratio=ratio, reserved=reserved))
    assert 0 <= window.usable <= window.effective <= window.hard
    assert (window.source == "config") == (window.effective < window.hard)


@given(limits=limits, variant=st.sampled_from(VARIANTS))
def test_every_variant_stays_within_the_provider_window(
    limits: ModelLimits, variant: OverflowVariant
) -> None:
    m = Model(provider_id="p", model_id="m", limits=limits)
    window = usable(m, config(variant))
    assert 0 <= window <= (limits.input or limits.context)


@given(n=st.integers(min_value=0, max_value=10**9), unit=st.sampled_from(["", "k", "K", "m", "M"]))
def test_parse_quantity_round_trips_formatted_counts(n: int, unit: str) -> None:
    scale = {"": 1, "k": 1_000, "m": 1_000_000}[unit.lower()]
    assert parse_quantity(f"{n}{unit}") == n * scale


@given(whole=st.integers(0, 10_000), tenths=st.integers(0, 9), unit=st.sampled_from(["k", "M"]))
def test_parse_quantity_reads_decimals_exactly(whole: int, tenths: int, unit: str) -> None:
    scale = 1_000 if unit == "k" else 1_000_000
    assert parse_quantity(f"{whole}.{tenths}{unit}") == whole * scale + tenths * scale // 10


@given(percent=st.integers(1, 100), base=st.integers(0, 10**7))
def test_parse_quantity_takes_percentages_of_the_base(percent: int, base: int) -> None:
    assert parse_quantity(f"{percent}%", base) == base * percent // 100


@given(
    configured=st.integers(1, 200_000),
    prompt=counts,
    reported=st.none() | counts,
    context=st.integers(0, 2_000_000),
)
def test_capped_output_never_exceeds_configured_nor_falls_below_the_minimum(
    configured: int, prompt: int, reported: int | None, context: int
) -> None:
    capped = cap_output_tokens(
        model(context), configured, measure(prompt), config(), reported=reported
    )
    assert capped is not None
    assert capped <= configured
    assert capped == configured or capped >= 1_024


@given(requested=st.integers(1, 200_000), prompt=counts, context=st.integers(1, 2_000_000))
def test_completion_budget_never_exceeds_the_request(
    requested: int, prompt: int, context: int
) -> None:
    budget = completion_budget(model(context), requested, lambda: prompt, config())
    assert budget is not None
    assert budget <= requested
    assert budget >= min(requested, 1_024)


texts = st.text(max_size=2_000)
messages = st.lists(
    st.one_of(
        texts.map(user),
        texts.map(assistant),
        texts.map(lambda t: tool("c", t)),
        texts.map(lambda t: with_file("data:image/png;base64," + t)),
    ),
    max_size=8,
)


@given(messages=messages, system=st.lists(texts, max_size=2))
def test_measure_orders_its_figures(messages: list[ModelMessage], system: list[str]) -> None:
    m = measure_preflight(messages, config(), system=system)
    assert m.raw >= m.normalized >= m.tail
    assert m.normalized >= m.overhead
