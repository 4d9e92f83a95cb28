"""The agentloop benchmark runs its loops with both summarizers and reports its keys."""

from __future__ import annotations

from contextledger.bench import BENCHMARKS
from contextledger.bench import _agentloop as agentloop
from contextledger.bench._common import Options

KEYS = (
    "failed_sessions",
    "over_window_requests",
    "replay_mismatches",
    "cache_read_share",
    "cache_read_share_lower_bound",
    "loop_lag_p99_ms",
    "loop_lag_p99_own_ms",
    "runtime_cpu_share",
)


def test_the_agentloop_benchmark_reports_its_keys_for_both_summarizers() -> None:
    assert "agentloop" in BENCHMARKS
    result = agentloop.run(Options(events=300))
    assert (result["sessions"], result["steps"], result["issue_size"]) == (2, 3, False)
    for label in ("extractive", "model"):
        figures = result[label]
        assert set(KEYS) <= set(figures)
        # Two sessions of three steps and a final answer, a child and a slice besides.
        assert figures["requests"] >= 2 * 4
        # The provider reads only prefixes an earlier request sent: never above the bound.
        assert 0 < figures["cache_read_share"] <= figures["cache_read_share_lower_bound"] <= 1
        assert 0 < figures["runtime_cpu_share"] <= 1
        assert 0 <= figures["loop_lag_p99_own_ms"] <= figures["loop_lag_p99_ms"]
    assert {key: result[key] for key in KEYS} == {key: result["extractive"][key] for key in KEYS}
    text = agentloop.render(result)
    assert "loop_lag_p99_ms" in text and "<= 20" in text
