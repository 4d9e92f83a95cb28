"""The simulate_scaling benchmark times the simulation at growing sizes and reports its keys."""

from __future__ import annotations

from contextledger.bench import _simulate_scaling as simulate_scaling
from contextledger.bench._common import Options


def test_the_scaling_benchmark_reports_its_keys() -> None:
    result = simulate_scaling.run(Options(events=200))
    sizes = [r["size"] for r in result["runs"]]
    assert sizes == [50, 100, 200]
    messages = [r["messages"] for r in result["runs"]]
    assert messages == sorted(messages) and messages[0] > 0
    assert all(r["calls"] > 0 and r["seconds"] > 0 for r in result["runs"])
    assert result["time_growth_200_vs_50"] > 0 and result["linear_growth"] == 4
    assert result["peak_mb_200"] >= result["runs"][0]["peak_rss_mb"] > 0
    assert "time_growth_200_vs_50" in simulate_scaling.render(result)
