"""The import benchmark measures one transcript of each format and reports its keys."""

from __future__ import annotations

import pytest

from contextledger.bench import _import as bench
from contextledger.bench._common import Options
from contextledger.bench._estimation import DEFAULT_TRACES
from contextledger.importers import FORMATS


def test_the_import_benchmark_reports_every_format() -> None:
    if not DEFAULT_TRACES.is_dir():
        pytest.skip(f"shared/traces not present: {DEFAULT_TRACES} does not exist")
    result = bench.run(Options(events=1))
    # The shared traces hold no OpenAI chat log (their README lists every file): one is made.
    assert set(result["formats"]) == set(FORMATS)
    assert result["formats"]["openai-chat"]["source"] == "generated/chat.json"
    for figures in result["formats"].values():
        assert figures["peak_mb"] > 0 and figures["mb_per_s"] > 0 and figures["events"] > 0
    counted = [f for f in result["formats"].values() if f["counted"]] or result["formats"].values()
    worst = result["formats"][result["worst_format"]]["peak_mb_per_input_mb"]
    assert worst == max(f["peak_mb_per_input_mb"] for f in counted)
    assert result["peak_mb_per_input_mb"] == worst
    assert result["target_met"] == (worst <= bench.PEAK_TARGET)
    assert "peak_mb_per_input_mb" in bench.render(result)


def test_without_traces_the_benchmark_says_so() -> None:
    result = bench.run(Options(events=1), traces=DEFAULT_TRACES / "absent")
    assert result == {"available": False, "reason": f"no traces under {DEFAULT_TRACES / 'absent'}"}
    assert "no traces" in bench.render(result)
