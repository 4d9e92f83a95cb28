"""Properties of the projection over generated sessions (hypothesis, 500 examples each)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.events import Event, RecordedEvent
from contextledger.history import History
from contextledger.ledger import SessionLog
from contextledger.store import MemoryStore, SQLiteStore
from contextledger.testing import (
    check_history,
    check_ids_increase,
    check_rebuild_matches,
    check_round_trip,
    check_snapshot_matches,
    session_events,
    split_batches,
)

PROPERTY = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _recorded(events: list[Event]) -> list[RecordedEvent]:
    return [RecordedEvent(e.session_id, i, i, e) for i, e in enumerate(events, 1)]


@PROPERTY
@given(session_events())
def test_incremental_apply_equals_rebuild(events: list[Event]) -> None:
    recorded = _recorded(events)
    live = History("ses_test")
    for r in recorded:
        live.validate([r.event])
        live.apply(r)
        check_history(live)
    check_rebuild_matches(live, recorded)


@PROPERTY
@given(session_events())
def test_every_event_round_trips_through_the_codec(events: list[Event]) -> None:
    check_round_trip(events)


@PROPERTY
@given(session_events())
def test_message_and_part_ids_strictly_increase(events: list[Event]) -> None:
    check_ids_increase(events)


@PROPERTY
@given(session_events(), st.data())
def test_snapshot_plus_tail_equals_full_rebuild(events: list[Event], data: st.DataObject) -> None:
    recorded = _recorded(events)
    cut = data.draw(st.integers(0, len(recorded)), label="snapshot at")
    # A live projection whose validation index was kept current event by event...
    head = History("ses_test")
    for r in recorded[:cut]:
        head.validate([r.event])
        head.apply(r)
    # ...and the one restored from its snapshot (index rebuilt from the state) must agree,
    # index included.
    check_snapshot_matches(head)
    resumed = History.from_snapshot(head.snapshot())
    for r in recorded[cut:]:
        resumed.validate([r.event])
        resumed.apply(r)
    assert resumed == History.rebuild("ses_test", recorded)


@PROPERTY
@given(session_events(), st.data())
def test_rebuild_from_sqlite_equals_live_projection(
    events: list[Event], data: st.DataObject
) -> None:
    batches = data.draw(split_batches(events), label="batches")
    snapshot_every = data.draw(st.integers(1, 50), label="snapshot_every")

    async def run(path: Path) -> None:
        async with SQLiteStore.open(path) as store:
            log = await SessionLog.open(store, "ses_test", snapshot_every=snapshot_every)
            for batch in batches:
                await log.append(batch)
            stored = await store.read("ses_test")
            check_rebuild_matches(log.history, stored)
            reopened = await SessionLog.open(store, "ses_test")
            assert reopened.history == log.history

    with tempfile.TemporaryDirectory() as tmp:
        trio.run(run, Path(tmp) / "s.db")


@PROPERTY
@given(session_events(), st.data())
def test_memory_store_log_equals_rebuild(events: list[Event], data: st.DataObject) -> None:
    batches = data.draw(split_batches(events), label="batches")

    async def run() -> None:
        store = MemoryStore()
        log = await SessionLog.open(store, "ses_test", snapshot_every=7)
        for batch in batches:
            await log.append(batch)
        check_rebuild_matches(log.history, await store.read("ses_test"))
        assert (await SessionLog.open(store, "ses_test")).history == log.history

    trio.run(run)
