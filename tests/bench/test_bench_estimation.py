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


def _transcript(prompts: list[int]) -> str:
    """A session of tool-calling steps whose calls report the given prompt sizes."""
    lines: list[dict[str, Any]] = [
        {"type": "user", "uuid": "u0", "message": {"role": "user", "content": "go"}}
    ]
    for i, prompt in enumerate(prompts):
        for block in (
            {"type": "text", "text": f"step {i} " * 5},
            {"type": "tool_use", "id": f"toolu_{i}", "name": "Read", "input": {"n": i}},
        ):
            message: dict[str, Any] = {"id": f"msg_{i}", "role": "assistant"}
            message.update(model="claude-sonnet-4", content=[block], usage=_usage(prompt))
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
    assert result["pairs"] == 3 and result["excluded"] == 1
    for name in FIGURES:
        assert math.isfinite(result[name]) and result[name] >= 0, name
    (trace,) = result["traces"]
    assert trace["trace"] == "tiny.jsonl" and trace["api_calls"] == trace["main_calls"] == 5
    assert {name: trace[name] for name in FIGURES} == {name: result[name] for name in FIGURES}
    assert "tiny.jsonl" in render(result)


def test_absent_traces_are_reported_not_raised(tmp_path: Path) -> None:
    result = run(["--traces", str(tmp_path / "nowhere")])
    assert result["available"] is False
    assert "no Claude Code traces" in result["reason"]
    assert "no Claude Code traces" in render(result)


def test_benchmark_options_mean_the_defaults() -> None:
    result = run(Options())
    assert isinstance(result["available"], bool)
