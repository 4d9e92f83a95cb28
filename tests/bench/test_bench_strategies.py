"""The strategies benchmark prices pi's four strategies and ours on the Claude Code traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextledger.bench import _strategies as strategies
from contextledger.bench._common import Options
from contextledger.bench._estimation import DEFAULT_TRACES, trace_dir


def test_the_strategies_benchmark_reports_its_keys() -> None:
    if not trace_dir(DEFAULT_TRACES).is_dir():
        pytest.skip(f"shared/traces not present: {DEFAULT_TRACES} does not exist")
    result = strategies.run(Options(events=200))
    expected = [*strategies.PI, "default", strategies.EXTRACTIVE]
    assert result["available"] and result["strategies"] == expected
    assert set(result["windows"]) == {"200000", "32000"}
    for figures in result["windows"].values():
        assert len(figures["traces"]) == 7
        for by_strategy in figures["traces"].values():
            for name in result["strategies"]:
                for provider in ("anthropic", "openai"):
                    summary = by_strategy[name][provider]
                    assert summary["billed_input_cost"] >= summary["lower_bound"] > 0
                    assert summary["cost"] >= summary["billed_input_cost"]
                    extractive = name == strategies.EXTRACTIVE
                    assert summary["summarizer"] == ("extractive" if extractive else "model")
        verdicts = [*figures["default"].values(), *figures[strategies.EXTRACTIVE].values()]
        for verdict in verdicts:
            assert verdict["max_cost_vs_lower_bound"] >= 1
            assert verdict["without_lower_bound"] == 0
            assert set(verdict["cheaper_than_pi"]) <= set(figures["traces"])
            assert set(verdict["above_baseline"]) <= set(figures["traces"])
            assert verdict["over_window_calls"] >= 0 and verdict["failed"] >= 0
    text = strategies.render(result)
    assert "200,000-token window" in text and "cheaper than each of pi's four" in text
    assert "over-window calls" in text


def test_without_traces_it_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(strategies, "DEFAULT_TRACES", tmp_path)
    result = strategies.run(Options())
    assert result == {"available": False, "reason": f"no Claude Code traces under {tmp_path}"}
    assert "not measured" in strategies.render(result)
