"""The retention benchmark runs on a few events of each trace and reports its keys."""

from __future__ import annotations

import pytest
import trio

from contextledger.bench import _retention as retention
from contextledger.bench._common import Options
from contextledger.bench._estimation import DEFAULT_TRACES
from contextledger.strategies import strategy


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
    for r in result["traces"].values():
        share = r["independent_retention"]
        assert r["facts_needed"] >= 0 and (share is None or 0 <= share <= 1)
    for suffix in ("", "_economic"):
        overall = result[f"independent_overall{suffix}"]
        assert overall is None or 0 <= overall <= 1
    assert "independent" in retention.render(result)
    assert all("failed_at" in r for r in result["traces"].values())
    assert result["failed"] == sum(
        r["failed_at"] is not None for r in result["traces"].values() if r["cadence"] == "window"
    )


def test_a_replay_that_cannot_send_a_call_is_reported_not_raised() -> None:
    # opencode's 65-call session under MiMo's policy (attempts counted per turn, no step
    # guard): a turn that outgrows a 32,000-token window again after each compaction that
    # policy allows; the replay stops there, and says where. (The runtime's own policy,
    # which counts attempts per step, gets through it.)
    path = DEFAULT_TRACES / "opencode-export" / "gatomia__0f1be78a364c-1__oc-1.14.30-gpt-5.4.json"
    if not path.is_file():
        pytest.skip(f"shared/traces not present: {path} does not exist")
    ((_, events),), unread = retention._sessions([path])
    assert not unread
    measure = trio.run(retention._replay, events, 32_000, strategy("mimo-tiers"))
    assert measure.failed_at is not None and measure.failed_at > 1
    assert measure.compactions > 0
