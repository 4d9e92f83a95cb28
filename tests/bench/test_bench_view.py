"""The view benchmark runs at a tiny size and reports every key."""

from __future__ import annotations

from contextledger.bench import _view as view
from contextledger.bench._common import Options


def test_the_view_benchmark_reports_its_keys() -> None:
    result = view.run(Options(events=500))
    for key in ("speedup_vs_rebuild_5000", "speedup_vs_trim_10000", "flatness_50000_vs_500"):
        assert result[key] is not None and result[key] > 0, key
    assert set(result["sizes"]) == {"10", "50", "100"}
    assert all(r["update_ms"] > 0 and r["rebuild_ms"] > 0 for r in result["sizes"].values())
    assert result["peer"]["available"]
    assert "speedup_vs_rebuild_5000" in view.render(result)
