"""The cache-simulator validation runs on the Claude Code traces and reports its keys."""

from __future__ import annotations

import pytest

from contextledger.bench import _cachesim as cachesim
from contextledger.bench._common import Options
from contextledger.bench._estimation import DEFAULT_TRACES, trace_dir


def test_the_cachesim_validation_reports_its_keys() -> None:
    if not trace_dir(DEFAULT_TRACES).is_dir():
        pytest.skip(f"shared/traces not present: {DEFAULT_TRACES} does not exist")
    result = cachesim.run(Options(events=30))
    assert result["available"] and result["calls"] > 0
    for r in result["traces"].values():
        assert 0 <= r["median_error"] <= r["p90_error"]
    assert "median error" in cachesim.render(result)
