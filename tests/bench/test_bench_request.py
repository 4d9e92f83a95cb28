"""The request benchmark runs at a tiny size and reports every key."""

from __future__ import annotations

from contextledger.bench import _request as request
from contextledger.bench._common import Options


def test_the_request_benchmark_reports_its_keys() -> None:
    result = request.run(Options(events=300))
    assert result["time_vs_encode"] > 0
    assert result["speedup_vs_naive_5000"] > 0
    for session in result["sessions"].values():
        assert session["steps"] > 0 and session["ours_ms_median"] > 0
        assert session["encode_ms_sampled"] > 0 and session["naive_ms_sampled"] > 0
    assert "speedup_vs_naive_5000" in request.render(result)
