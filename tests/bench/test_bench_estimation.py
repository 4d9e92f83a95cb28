"""The estimation benchmark runs end to end on a tiny synthetic transcript and reports every
figure (no accuracy assertions: benchmarks are never pass/fail in tests)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from contextledger.bench._common import Options
from contextledger.bench._estimation import render, run

FIGURES = (
    "plain_median_error",
    "plain_p90_error",
    "calibrated_median_error",
    "calibrated_p90_error",
    "single_ratio_median_error",
    "single_ratio_p90_error",
)


def _usage(prompt: int) -> dict[str, int]:
    return {
        "input_tokens": 4,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": prompt - 204,
        "output_tokens": 50,
    }


def _transcript(prompts: list[int], models: list[str] | None = None) -> str:
    """A session of tool-calling steps whose calls report the given prompt sizes (by the
    given models, else all by one)."""
    lines: list[dict[str, Any]] = [
        {"type": "user", "uuid": "u0", "message": {"role": "user", "content": "go"}}
    ]
    for i, prompt in enumerate(prompts):
        for block in (
            {"type": "text", "text": f"step {i} " * 5},
            {"type": "tool_use", "id": f"toolu_{i}", "name": "Read", "input": {"n": i}},
        ):
            message: dict[str, Any] = {"id": f"msg_{i}", "role": "assistant"}
            model = models[i] if models else "claude-sonnet-4"
            message.update(model=model, content=[block], usage=_usage(prompt))
            lines.append({"type": "assistant", "uuid": f"a{i}{block['type']}", "message": message})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "x" * 400 * i}
        lines.append(
            {"type": "user", "uuid": f"r{i}", "message": {"role": "user", "content": [result]}}
        )
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def test_figures_on_a_synthetic_trace(tmp_path: Path) -> None:
    folder = tmp_path / "claude-code-jsonl"
    folder.mkdir()
    # Five calls: four growing steps and one that shrank (as after a compaction).
    (folder / "tiny.jsonl").write_text(_transcript([15_000, 15_120, 15_300, 14_000, 14_500]))
    result = run(["--json", "--traces", str(tmp_path)])
    json.dumps(result)  # JSON-ready
    assert result["available"] is True
    assert set(result["sets"]) == {"tune"}  # no test transcripts here
    tune = result["sets"]["tune"]
    assert tune["pairs"] == 3 and tune["excluded"] == 1
    for name in FIGURES:
        assert math.isfinite(tune[name]) and tune[name] >= 0, name
    assert result["tune_calibrated_median_error"] == tune["calibrated_median_error"]
    assert result["test_calibrated_median_error"] is None and result["target_met"] is None
    (trace,) = tune["traces"]
    assert trace["trace"] == "tiny.jsonl" and trace["api_calls"] == trace["main_calls"] == 5
    assert {name: trace[name] for name in FIGURES} == {name: tune[name] for name in FIGURES}
    assert "tiny.jsonl" in render(result)


def test_the_test_set_is_measured_apart_and_holds_the_target(tmp_path: Path) -> None:
    for folder, prompts in (
        ("claude-code-jsonl", [15_000, 15_120, 15_300]),
        ("claude-code-more", [15_000, 15_120, 15_300, 15_500]),
    ):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{folder}.jsonl").write_text(_transcript(prompts))
    result = run(["--traces", str(tmp_path)])
    assert result["sets"]["tune"]["pairs"] == 2 and result["sets"]["test"]["pairs"] == 3
    test_median = result["sets"]["test"]["calibrated_median_error"]
    assert result["test_calibrated_median_error"] == test_median
    assert result["target_met"] == (test_median <= result["target_calibrated_median_error"])


def test_pairs_are_calls_of_one_model_as_the_counter_learns_them(tmp_path: Path) -> None:
    """A call of another model in between (Claude Code's own ``<synthetic>`` notice, or a
    switch of model) ends no pair: the next call is paired with its own model's last."""
    folder = tmp_path / "claude-code-jsonl"
    folder.mkdir()
    models = ["claude-sonnet-4", "claude-sonnet-4", "<synthetic>", "claude-sonnet-4"]
    (folder / "tiny.jsonl").write_text(_transcript([15_000, 15_120, 15_150, 15_300], models))
    tune = run(["--traces", str(tmp_path)])["sets"]["tune"]
    assert (tune["pairs"], tune["excluded"]) == (2, 0)


def test_absent_traces_are_reported_not_raised(tmp_path: Path) -> None:
    result = run(["--traces", str(tmp_path / "nowhere")])
    assert result["available"] is False
    assert "no Claude Code traces" in result["reason"]
    assert "no Claude Code traces" in render(result)


def test_benchmark_options_mean_the_defaults() -> None:
    result = run(Options())
    assert isinstance(result["available"], bool)
