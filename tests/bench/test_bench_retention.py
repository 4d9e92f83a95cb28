"""The retention benchmark runs on a few events of each trace and reports its keys."""

from __future__ import annotations

import pytest

from contextledger.bench import retention
from contextledger.bench._common import Options
from contextledger.bench.estimation import DEFAULT_TRACES
from contextledger.events import MessageAdded
from contextledger.events.ids import parse_id
from contextledger.history import validate_events
from contextledger.history.validation import SessionIndex
from contextledger.testing.builder import SessionBuilder


def test_the_retention_benchmark_reports_its_keys() -> None:
    if not retention._traces(DEFAULT_TRACES):
        pytest.skip(f"shared/traces not present: no Claude Code traces under {DEFAULT_TRACES}")
    result = retention.run(Options(events=600))
    assert result["available"]
    for r in result["traces"].values():
        assert r["window"] == 32_000 and r["retained"] <= r["needed"]
    assert any(r["compactions"] for r in result["traces"].values())
    assert "retention_min" in retention.render(result)


def test_ids_are_respaced_in_order_with_room_between() -> None:
    b = SessionBuilder("ses_test")
    first = b.user("hi")
    b.finish(b.assistant(first))
    spread = retention.respaced(b.events)
    ids = [e.message_id for e in spread if isinstance(e, MessageAdded)]
    assert ids == sorted(ids) and len(set(ids)) == 2
    kind, time_ms, counter = parse_id(ids[0])
    assert (kind, time_ms) == parse_id(first)[:2] and counter == parse_id(first)[
        2
    ] * retention.ID_GAP
    validate_events(SessionIndex("ses_test"), spread)
