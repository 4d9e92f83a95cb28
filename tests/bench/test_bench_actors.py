"""The actors benchmark runs at a tiny size and reports every key."""

from __future__ import annotations

from contextledger.bench import BENCHMARKS
from contextledger.bench import _actors as actors
from contextledger.bench._common import Options


def test_the_actors_benchmark_reports_its_keys() -> None:
    result = actors.run(Options(events=400))
    assert (result["sessions"], result["turns"]) == actors.size(Options(events=400))
    assert result["issue_size"] is False
    for side in ("runtime", "core"):
        figures = result[side]
        assert figures["builds"] == 2 * result["sessions"] * result["turns"]
        assert figures["turns_per_s"] > 0 and figures["seconds"] > 0
        assert 0 < figures["build_ms_p50"] <= figures["build_ms_p99"]
    assert result["overhead_p50"] > 0 and result["overhead_p99"] > 0
    assert result["throughput_ratio"] > 0
    assert result["same_bytes"] is True
    assert result["target_overhead_p50"] == actors.TARGET_OVERHEAD
    assert isinstance(result["target_met"], bool)
    text = actors.render(result)
    assert "overhead_p50" in text and "scaled down" in text


def test_the_issue_size_is_the_full_run() -> None:
    assert actors.size(Options(full=True)) == (200, 50)
    assert actors.size(Options()) == (200, 50)
    assert BENCHMARKS["actors"] == "contextledger.bench._actors"


def test_a_script_is_the_same_for_a_seed() -> None:
    assert actors.script(3, 4) == actors.script(3, 4)
    turn = actors.script(3, 4)[0]
    assert 1 <= len(turn.calls) <= 2
    assert all(len(call.output) <= actors.OUTPUT_CAP for call in turn.calls)
