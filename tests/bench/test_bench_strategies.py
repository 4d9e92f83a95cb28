"""The strategies benchmark prices and scores pi's strategies, last-N and ours on each trace
set, and counts ``default``'s verdicts on the test set."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contextledger.bench import _strategies as strategies
from contextledger.bench._common import Options
from contextledger.bench._estimation import DEFAULT_TRACES
from contextledger.bench._sets import TRACE_SETS, set_files
from contextledger.cachesim import sim_request
from contextledger.events._parts import ModelRef
from contextledger.simulation import trace_result
from contextledger.vocabulary._messages import ModelMessage, ModelText
from contextledger.vocabulary._requests import Request


def test_the_strategies_benchmark_reports_its_keys() -> None:
    if not set_files(DEFAULT_TRACES, "test"):
        pytest.skip(f"shared/traces not present: {DEFAULT_TRACES} has no test traces")
    result = strategies.run(Options(events=120))
    expected = [
        *strategies.PI,
        strategies.LAST_N,
        "default",
        strategies.EXTRACTIVE,
        strategies.TAIL_ONLY,
    ]
    assert result["available"] and result["strategies"] == expected
    assert set(result["sets"]) == {"test"}
    for name, per_set in result["sets"].items():
        assert set(per_set["windows"]) == {"200000", "32000"}
        for figures in per_set["windows"].values():
            assert len(figures["traces"]) >= len(set_files(DEFAULT_TRACES, name))
            for by_strategy in figures["traces"].values():
                for strategy in expected:
                    for provider in ("anthropic", "openai"):
                        summary = by_strategy[strategy][provider]
                        assert summary["cost"] >= summary["billed_input_cost"]
                        for key in ("retention", "retention_older"):
                            assert summary[key] is None or 0 <= summary[key] <= 1
                        assert summary["summarizer"] == strategies.VARIANTS.get(strategy, "model")
                        endings = summary.get("endings")
                        if strategy in strategies.OURS:  # compared with baseline at each call
                            assert endings == summary["calls"]
                            assert summary["mean_ending_cost_vs_baseline"] > 0
                        else:
                            assert endings is None
            for provider in ("anthropic", "openai"):
                totals = figures["providers"][provider]
                for strategy in expected:
                    runs = [t[strategy][provider] for t in figures["traces"].values()]
                    assert totals[strategy]["cost"] == pytest.approx(sum(r["cost"] for r in runs))
                    assert totals[strategy]["failed"] == sum(
                        r["failed_at"] is not None for r in runs
                    )
                for verdict in totals["verdicts"].values():
                    assert 0 <= verdict["endings_above_baseline"] <= verdict["endings"]
                    for key in (
                        "cheaper_than_pi",
                        "above_baseline",
                        "above_baseline_on_average",
                        "dominated",
                        "dominated_older",
                    ):
                        assert set(verdict[key]) <= set(figures["traces"])
    for key in strategies.COUNTED:
        assert result[f"default_{key}"] >= 0 and f"tune_default_{key}" not in result
    text = strategies.render(result)
    assert "test set, 200,000-token window" in text and "dominated on" in text
    assert "retention (older)" in text and "default_dominated_older" in text


def test_the_json_output_holds_nothing_but_the_results() -> None:
    """The traces are simulated in worker processes, whose log lines go to stderr as the
    command's do: stdout parses as one JSON document."""
    if not set_files(DEFAULT_TRACES, "test"):
        pytest.skip(f"shared/traces not present: {DEFAULT_TRACES} has no test traces")
    command = [sys.executable, "-m", "contextledger.bench", "strategies", "--events", "120"]
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["available"]


def test_the_full_run_adds_the_tuning_set_and_kilo_and_mimo() -> None:
    if not set_files(DEFAULT_TRACES, "tune"):
        pytest.skip(f"shared/traces not present: {DEFAULT_TRACES} has no tuning traces")
    result = strategies.run(Options(events=40, full=True))
    assert set(result["sets"]) == set(TRACE_SETS)
    assert set(strategies.KILO_AND_MIMO) <= set(result["strategies"])
    for key in strategies.COUNTED:
        assert result[f"tune_default_{key}"] >= 0
    tune = result["sets"]["tune"]["windows"]["32000"]["traces"]
    assert len(tune) >= len(set_files(DEFAULT_TRACES, "tune"))


def test_above_baseline_and_dominated_follow_their_definitions() -> None:
    def run(
        cost: float,
        retention: float | None,
        failed: int | None = None,
        older: float = 0.5,
        mean: float = 0.9,
    ) -> dict[str, object]:
        return {
            "cost": cost,
            "retention": retention,
            "retention_older": older,
            "failed_at": failed,
            "cost_vs_lower_bound": 1.0,
            "cost_vs_calls_lower_bound": 1.0 + cost,
            "over_window_calls": 0,
            "endings": 10,
            "endings_above_baseline": 2,
            "max_ending_cost_vs_baseline": 1.0 + mean / 10,
            "mean_ending_cost_vs_baseline": mean,
        }

    def trace(ours: dict[str, object], **others: dict[str, object]) -> dict[str, object]:
        figures = {name: {"anthropic": run(1.0, 0.5)} for name in strategies.PI}
        figures.update({k.replace("_", "-"): {"anthropic": v} for k, v in others.items()})
        return {
            **figures,
            "default": {"anthropic": ours},
            strategies.EXTRACTIVE: {"anthropic": ours},
        }

    traces = {
        "cheap": trace(run(0.5, 0.6)),
        "dear": trace(run(1.5, 0.6)),
        "beaten": trace(run(0.5, 0.6), last_40=run(0.4, 0.7)),
        "beaten-by-a-failure": trace(run(0.5, 0.6), last_40=run(0.4, 0.7, failed=3)),
        "beaten-on-older-facts": trace(run(0.5, 0.6), last_40=run(0.4, 0.5, older=0.6)),
        "dear-on-average": trace(run(0.9, 0.6, mean=1.05)),
    }
    verdict = strategies._verdicts(traces, "default", "anthropic")
    assert verdict["above_baseline"] == ["dear"]
    # Cheaper in the end, but dearer had the session ended at a call chosen at random.
    assert verdict["above_baseline_on_average"] == ["dear-on-average"]
    assert verdict["endings_above_baseline"] == 2 * len(traces)
    assert verdict["endings"] == 10 * len(traces)
    assert verdict["max_ending_cost_vs_baseline"] == pytest.approx(1.105)
    assert verdict["dominated"] == ["beaten"]
    assert verdict["dominated_older"] == ["beaten-on-older-facts"]
    assert verdict["cheaper_than_pi"] == [
        "cheap",
        "beaten",
        "beaten-by-a-failure",
        "beaten-on-older-facts",
        "dear-on-average",
    ]
    assert verdict["max_cost_vs_lower_bound"] == 1.0
    assert verdict["max_cost_vs_calls_lower_bound"] == 2.5


def test_the_totals_count_retention_over_every_needed_fact_and_the_older_ones() -> None:
    def run(needed: int, retained: int, older: int, older_retained: int) -> dict[str, object]:
        return {
            "cost": 1.0,
            "summary_cost": 0.0,
            "cost_vs_lower_bound": 1.0,
            "facts_needed": needed,
            "facts_retained": retained,
            "facts_needed_older": older,
            "facts_retained_older": older_retained,
            "compactions": 0,
            "over_window_calls": 0,
            "failed_at": None,
        }

    totals = strategies._totals([run(10, 5, 4, 4), run(30, 30, 0, 0), run(0, 0, 0, 0)])
    assert (totals["retention"], totals["retention_older"]) == (35 / 40, 1.0)
    assert strategies._totals([run(3, 1, 0, 0)])["retention_older"] is None


def test_without_traces_it_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(strategies, "DEFAULT_TRACES", tmp_path)
    result = strategies.run(Options())
    assert result == {"available": False, "reason": f"no Claude Code traces under {tmp_path}"}
    assert "not measured" in strategies.render(result)


def test_endings_are_compared_only_when_both_runs_finished() -> None:
    request = Request(
        model=ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5"),
        session_id="s",
        system=(),
        tools=(),
        messages=(
            ModelMessage(role="user", content=(ModelText(text="x" * 9_000),), source_id="m"),
        ),
        marks=(),
    )
    calls = [sim_request(request, 1.0, 10)]
    done = trace_result("default", "anthropic", "claude-sonnet-4-5", calls, [""])
    failed = trace_result("baseline", "anthropic", "claude-sonnet-4-5", calls, [""], failed_at=2)
    assert strategies._endings(done, done) == {
        "endings": 1,
        "endings_above_baseline": 0,
        "max_ending_cost_vs_baseline": 1.0,
        "mean_ending_cost_vs_baseline": 1.0,
    }
    assert set(strategies._endings(done, failed).values()) == {None}
