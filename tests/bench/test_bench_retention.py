"""The retention benchmark runs on a few events of each trace and reports its keys."""

from __future__ import annotations

import pytest

from contextledger.bench import retention
from contextledger.bench._common import Options
from contextledger.bench.estimation import DEFAULT_TRACES


def test_the_retention_benchmark_reports_its_keys() -> None:
    if not retention._traces(DEFAULT_TRACES):
        pytest.skip(f"shared/traces not present: no Claude Code traces under {DEFAULT_TRACES}")
    result = retention.run(Options(events=600))
    assert result["available"]
    for r in result["traces"].values():
        assert r["window"] == 32_000 and r["retained"] <= r["needed"]
    assert any(r["compactions"] for r in result["traces"].values())
    assert {r["cadence"] for r in result["traces"].values()} == {"window", "economic"}
    assert "retention_min" in retention.render(result)
