"""Specification of ``contextledger.config``: one typed config, loaded from TOML or JSON, whose
every bad or unknown value is a ``ConfigError`` naming its dotted key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from contextledger.config import (
    CompactionConfig,
    Config,
    ConfigError,
    OutputConfig,
    PruneConfig,
    TokensConfig,
    ToolOutputConfig,
    WarnOnce,
)
from contextledger.events._errors import LedgerError

TOML = """
[compaction]
auto = true
reserved = 10_000
overflow_variant = "mimo"
trigger_ratio = "85%"
tail_turns = 3

[compaction.max_context]
"anthropic/claude-*" = "150K"
"openai/gpt-5*" = "50%"

[output]
max_tokens = 16_000

[tokens]
preflight_factor = 1.25

[tool_output]
direction = "tail"

[prune]
enabled = true
protected_tools = ["skill", "todo"]
"""

JSON = """
{
  "compaction": {"overflow_variant": "kilo", "threshold_percent": 80, "count": "upstream"},
  "output": {"budget_rule": "mimo", "min": 512},
  "tokens": {"counter": "calibrated", "chars_per_token": 3}
}
"""


def test_defaults_are_the_documented_values() -> None:
    cfg = Config()
    assert cfg.compaction == CompactionConfig(
        auto=True,
        reserved=None,
        threshold_percent=None,
        max_context=None,
        trigger_ratio=0.9,
        overflow_variant="mimo",
        count="full",
        tail_turns=2,
        preserve_recent_tokens=None,
    )
    assert cfg.output == OutputConfig(
        max_tokens=32_000,
        safety=2_048,
        min=1_024,
        media_reserve=2_048,
        completion_margin=1_024,
        budget_rule="kilo",
    )
    assert cfg.tokens == TokensConfig(counter="estimate", chars_per_token=4, preflight_factor=1.3)
    assert cfg.tool_output == ToolOutputConfig(max_lines=2_000, max_bytes=51_200, direction="head")
    assert cfg.prune == PruneConfig(
        enabled=False, protect_tokens=40_000, minimum_tokens=20_000, protected_tools=("skill",)
    )


def test_an_empty_document_is_the_defaults() -> None:
    assert Config.from_dict({}) == Config.from_toml("") == Config.from_json("{}") == Config()


def test_loads_toml() -> None:
    cfg = Config.from_toml(TOML)
    assert cfg.compaction.reserved == 10_000
    assert cfg.compaction.trigger_ratio == "85%"
    assert cfg.compaction.tail_turns == 3
    assert cfg.compaction.max_context == {"anthropic/claude-*": "150K", "openai/gpt-5*": "50%"}
    assert cfg.output.max_tokens == 16_000
    assert cfg.tokens.preflight_factor == 1.25
    assert cfg.tool_output.direction == "tail"
    assert cfg.prune.protected_tools == ("skill", "todo")
    assert cfg.prune.enabled


def test_loads_json() -> None:
    cfg = Config.from_json(JSON)
    assert cfg.compaction.overflow_variant == "kilo"
    assert cfg.compaction.threshold_percent == 80
    assert cfg.compaction.count == "upstream"
    assert cfg.output.budget_rule == "mimo"
    assert cfg.output.min == 512
    assert cfg.tokens.counter == "calibrated"
    assert cfg.tokens.chars_per_token == 3


@pytest.mark.parametrize(("name", "text"), [("policy.toml", TOML), ("policy.json", JSON)])
def test_load_reads_a_file_by_its_suffix(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    expected = Config.from_toml(text) if name.endswith(".toml") else Config.from_json(text)
    assert Config.load(path) == expected
    assert Config.load(str(path)) == expected


def test_load_refuses_other_suffixes(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("compaction: {}")
    with pytest.raises(ConfigError, match=r"\.toml or \.json"):
        Config.load(path)


def test_load_reports_a_missing_file_as_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        Config.load(tmp_path / "absent.toml")


@pytest.mark.parametrize(
    ("loader", "text"),
    [
        pytest.param(Config.from_toml, "[compaction", id="bad TOML"),
        pytest.param(Config.from_json, '{"compaction": ', id="bad JSON"),
        pytest.param(Config.from_json, "[1, 2]", id="JSON that is not an object"),
    ],
)
def test_bad_syntax_is_a_config_error_without_a_key(loader: Any, text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        loader(text)
    assert caught.value.key is None


def test_config_error_is_a_ledger_error() -> None:
    assert issubclass(ConfigError, LedgerError)


BAD_VALUES = [
    pytest.param(
        {"compaction": {"trigger_ratio": 1.5}},
        "compaction.trigger_ratio",
        "must be in (0, 1]",
        id="trigger_ratio above 1",
    ),
    pytest.param(
        {"compaction": {"trigger_ratio": "150%"}},
        "compaction.trigger_ratio",
        "got '150%'",
        id="trigger_ratio above 100%",
    ),
    pytest.param(
        {"compaction": {"trigger_ratio": 0}},
        "compaction.trigger_ratio",
        "must be in (0, 1]",
        id="trigger_ratio 0",
    ),
    pytest.param(
        {"compaction": {"trigger_ratio": "abc"}},
        "compaction.trigger_ratio",
        "got 'abc'",
        id="trigger_ratio text",
    ),
    pytest.param(
        {"compaction": {"auto": "yes"}}, "compaction.auto", "expected `bool`", id="auto not a bool"
    ),
    pytest.param(
        {"compaction": {"reserved": -1}},
        "compaction.reserved",
        "must be >= 0, got -1",
        id="negative reserved",
    ),
    pytest.param(
        {"compaction": {"threshold_percent": 0}},
        "compaction.threshold_percent",
        "must be > 0, got 0",
        id="threshold_percent 0",
    ),
    pytest.param(
        {"compaction": {"threshold_percent": 150}},
        "compaction.threshold_percent",
        "must be <= 100, got 150",
        id="threshold_percent above 100",
    ),
    pytest.param(
        {"compaction": {"max_context": "not-a-budget"}},
        "compaction.max_context",
        "got 'not-a-budget'",
        id="max_context text",
    ),
    pytest.param(
        {"compaction": {"max_context": -5}},
        "compaction.max_context",
        "got -5",
        id="max_context negative",
    ),
    pytest.param(
        {"compaction": {"max_context": "101%"}},
        "compaction.max_context",
        "got '101%'",
        id="max_context above 100%",
    ),
    pytest.param(
        {"compaction": {"max_context": {"test/a": "100G"}}},
        "compaction.max_context['test/a']",
        "got '100G'",
        id="max_context map value",
    ),
    pytest.param(
        {"compaction": {"max_context": {"gpt-5": "100K"}}},
        "compaction.max_context['gpt-5']",
        "provider/model",
        id="max_context pattern that can never match",
    ),
    pytest.param(
        {"compaction": {"max_context": {"test/a": 1.5}}},
        "compaction.max_context[...]",
        "expected `int | str`",
        id="max_context map value of the wrong type",
    ),
    pytest.param(
        {"compaction": {"max_context": "100K", "overflow_variant": "kilo"}},
        "compaction.max_context",
        'only with overflow_variant = "mimo"',
        id="max_context under another variant",
    ),
    pytest.param(
        {"compaction": {"overflow_variant": "kilocode"}},
        "compaction.overflow_variant",
        "must be one of 'kilo', 'mimo', 'opencode', got 'kilocode'",
        id="unknown overflow variant",
    ),
    pytest.param(
        {"compaction": {"count": "half"}},
        "compaction.count",
        "must be one of 'full', 'upstream'",
        id="unknown count rule",
    ),
    pytest.param(
        {"compaction": {"tail_turns": -1}},
        "compaction.tail_turns",
        "must be >= 0",
        id="negative tail_turns",
    ),
    pytest.param(
        {"compaction": {"preserve_recent_tokens": -1}},
        "compaction.preserve_recent_tokens",
        "must be >= 0",
        id="negative preserve_recent_tokens",
    ),
    pytest.param(
        {"output": {"max_tokens": 0}}, "output.max_tokens", "must be >= 1", id="max_tokens 0"
    ),
    pytest.param({"output": {"safety": -1}}, "output.safety", "got -1", id="negative safety"),
    pytest.param({"output": {"min": 0}}, "output.min", "must be >= 1", id="min 0"),
    pytest.param(
        {"output": {"min": 40_000}},
        "output.min",
        "must be <= output.max_tokens (32000), got 40000",
        id="min above max_tokens",
    ),
    pytest.param(
        {"output": {"media_reserve": -1}},
        "output.media_reserve",
        "got -1",
        id="negative media_reserve",
    ),
    pytest.param(
        {"output": {"completion_margin": -1}},
        "output.completion_margin",
        "got -1",
        id="negative completion_margin",
    ),
    pytest.param(
        {"output": {"budget_rule": "both"}},
        "output.budget_rule",
        "must be one of 'kilo', 'mimo'",
        id="unknown budget rule",
    ),
    pytest.param(
        {"tokens": {"counter": "bpe"}},
        "tokens.counter",
        "must be one of 'calibrated', 'estimate', 'tiktoken'",
        id="unknown counter",
    ),
    pytest.param(
        {"tokens": {"chars_per_token": 0}},
        "tokens.chars_per_token",
        "must be >= 1",
        id="chars_per_token 0",
    ),
    pytest.param(
        {"tokens": {"preflight_factor": 0}},
        "tokens.preflight_factor",
        "must be > 0",
        id="preflight_factor 0",
    ),
    pytest.param(
        {"tool_output": {"max_lines": 0}},
        "tool_output.max_lines",
        "must be >= 1",
        id="max_lines 0",
    ),
    pytest.param(
        {"tool_output": {"max_bytes": 0}},
        "tool_output.max_bytes",
        "must be >= 1",
        id="max_bytes 0",
    ),
    pytest.param(
        {"tool_output": {"direction": "middle"}},
        "tool_output.direction",
        "must be one of 'head', 'tail', got 'middle'",
        id="unknown direction",
    ),
    pytest.param(
        {"prune": {"enabled": "no"}}, "prune.enabled", "expected `bool`", id="enabled not a bool"
    ),
    pytest.param(
        {"prune": {"protect_tokens": -1}},
        "prune.protect_tokens",
        "got -1",
        id="negative protect_tokens",
    ),
    pytest.param(
        {"prune": {"minimum_tokens": -1}},
        "prune.minimum_tokens",
        "got -1",
        id="negative minimum_tokens",
    ),
    pytest.param(
        {"prune": {"protected_tools": ["skill", 1]}},
        "prune.protected_tools[1]",
        "expected `str`",
        id="protected tool not a name",
    ),
    pytest.param({"compaction": 3}, "compaction", "expected `object`", id="section not a table"),
]


@pytest.mark.parametrize(("data", "key", "message"), BAD_VALUES)
def test_every_bad_value_names_its_key(data: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Config.from_dict(data)
    assert caught.value.key == key
    assert str(caught.value).startswith(f"{key}: ")
    assert message in str(caught.value)


def test_the_trigger_ratio_message_reads_as_documented() -> None:
    with pytest.raises(ConfigError) as caught:
        Config.from_toml("[compaction]\ntrigger_ratio = 1.5\n")
    assert str(caught.value).startswith("compaction.trigger_ratio: must be in (0, 1]")
    assert str(caught.value).endswith("got 1.5")


@pytest.mark.parametrize(
    ("data", "key"),
    [
        pytest.param({"compactoin": {}}, "compactoin", id="unknown section"),
        pytest.param({"compaction": {"trigger": 0.8}}, "compaction.trigger", id="unknown key"),
        pytest.param({"prune": {"protect": 1}}, "prune.protect", id="unknown prune key"),
    ],
)
def test_unknown_keys_are_rejected(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match="unknown key") as caught:
        Config.from_dict(data)
    assert caught.value.key == key


def test_an_unknown_key_error_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"known: .*trigger_ratio"):
        Config.from_dict({"compaction": {"trigger": 0.8}})


@pytest.mark.parametrize(
    ("make", "key"),
    [
        pytest.param(lambda: CompactionConfig(trigger_ratio=1.5), "compaction.trigger_ratio"),
        pytest.param(lambda: CompactionConfig(reserved=-1), "compaction.reserved"),
        pytest.param(
            lambda: CompactionConfig(overflow_variant="x"),  # type: ignore[arg-type]
            "compaction.overflow_variant",
        ),
        pytest.param(lambda: OutputConfig(max_tokens=0), "output.max_tokens"),
        pytest.param(lambda: TokensConfig(preflight_factor=-1.0), "tokens.preflight_factor"),
    ],
)
def test_sections_built_in_python_are_checked_too(make: Any, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make()
    assert caught.value.key == key


@pytest.mark.parametrize("budget", [0, "0", "", {"test/m": 0}, {"test/m": "0"}])
def test_budget_reset_sentinels_are_valid(budget: Any) -> None:
    assert (
        Config.from_dict({"compaction": {"max_context": budget}}).compaction.max_context == budget
    )


@pytest.mark.parametrize("ratio", [1, 0.5, "0.75", "75%", " 100% "])
def test_trigger_ratio_accepts_decimals_and_percentages(ratio: Any) -> None:
    Config.from_dict({"compaction": {"trigger_ratio": ratio}})


configs = st.builds(
    Config,
    compaction=st.builds(
        CompactionConfig,
        auto=st.booleans(),
        reserved=st.none() | st.integers(0, 100_000),
        threshold_percent=st.none() | st.integers(1, 100).map(float),
        max_context=st.none() | st.sampled_from(["300K", "50%", 0, 200_000]),
        trigger_ratio=st.sampled_from([0.9, 0.75, "80%"]),
        tail_turns=st.integers(0, 5),
    ),
    output=st.builds(OutputConfig, max_tokens=st.integers(1_024, 64_000)),
    prune=st.builds(PruneConfig, protected_tools=st.lists(st.text(max_size=8)).map(tuple)),
)


@given(cfg=configs)
def test_a_config_survives_a_json_round_trip(cfg: Config) -> None:
    assert Config.from_json(msgspec.json.encode(cfg)) == cfg
    assert Config.from_dict(cfg.to_dict()) == cfg


def test_warn_once_logs_each_key_once() -> None:
    warnings = WarnOnce()
    with capture_logs() as logs:
        assert warnings.warn("budget:test/m", "compaction budget ignored", model="test/m")
        assert not warnings.warn("budget:test/m", "compaction budget ignored", model="test/m")
        assert warnings.warn("budget:other/m", "compaction budget ignored", model="other/m")
    assert [entry["model"] for entry in logs] == ["test/m", "other/m"]
    assert all(entry["log_level"] == "warning" for entry in logs)


def test_a_factor_must_be_finite() -> None:
    with pytest.raises(ConfigError, match=r"tokens.preflight_factor: must be <= 10, got inf"):
        Config.from_dict({"tokens": {"preflight_factor": float("inf")}})


def test_pressure_thresholds_must_increase_within_a_hundred() -> None:
    with pytest.raises(ConfigError, match=r"compaction.pressure_percents: must increase"):
        Config.from_dict({"compaction": {"pressure_percents": [70, 50, 85]}})


def test_pressure_thresholds_and_the_output_reserve_cap_are_used() -> None:
    from contextledger.events._parts import Usage
    from contextledger.policy._overflow import context_pressure_level, context_window
    from contextledger.vocabulary._models import Model, ModelLimits

    model = Model(provider_id="p", model_id="m", limits=ModelLimits(context=200_000, output=32_000))
    usage = Usage(input=95_000)
    assert context_pressure_level(model, usage, Config()) == 1
    earlier = Config.from_dict({"compaction": {"pressure_percents": [10, 20, 30]}})
    assert context_pressure_level(model, usage, earlier) == 3
    whole = Config.from_dict({"compaction": {"trigger_ratio": 1}})
    small_cap = Config.from_dict({"compaction": {"trigger_ratio": 1, "output_reserve_cap": 1_000}})
    assert context_window(model, whole).usable == 180_000
    assert context_window(model, small_cap).usable == 199_000


def test_the_view_section_sets_the_view_options() -> None:
    from contextledger.history._view import ViewOptions

    config = Config.from_dict({"view": {"environment": "latest", "summary_tool_output_chars": 500}})
    normal = ViewOptions.from_config(config)
    summary = ViewOptions.from_config(config, for_summary=True)
    assert normal.environment == "latest" and normal.tool_output_max_chars is None
    assert summary.strip_media and summary.tool_output_max_chars == 500
    with pytest.raises(ConfigError, match=r"view.environment"):
        Config.from_dict({"view": {"environment": "sometimes"}})


def test_the_economic_cadence_needs_attempts_per_step() -> None:
    with pytest.raises(ConfigError, match=r'compaction\.attempts_per: must be "step"'):
        Config.from_dict({"compaction": {"cadence": "economic", "attempts_per": "turn"}})
    config = Config.from_dict({"compaction": {"cadence": "economic", "attempts_per": "step"}})
    assert (config.compaction.cadence, config.compaction.attempts_per) == ("economic", "step")


@pytest.mark.parametrize("transform", ["keep", "pkg.mod:", ":f", "a b:c", "https://x/y:f"])
def test_a_view_transform_is_named_as_module_and_function(transform: str) -> None:
    with pytest.raises(ConfigError, match=r"view\.transform: must be"):
        Config.from_dict({"view": {"transform": transform}})
    named = Config.from_dict({"view": {"transform": "my_pkg.context:Keep.errors"}})
    assert named.view.transform == "my_pkg.context:Keep.errors"
