"""SessionLog: validated appends, optimistic concurrency, snapshot + tail loading."""

from __future__ import annotations

import pytest

from contextledger.events import InvalidEvent, MessageAdded
from contextledger.history import SNAPSHOT_SCHEMA, History
from contextledger.ledger import SessionLog
from contextledger.store import ConcurrencyError, MemoryStore, Snapshot
from contextledger.testing.builder import SessionBuilder


def _turns(b: SessionBuilder, n: int) -> None:
    for i in range(n):
        reply = b.assistant(b.user(f"turn {i}"))
        call = b.tool_call(reply, "bash", {"command": f"echo {i}"})
        b.tool_result(call, str(i))
        b.finish(reply, "tool-calls")


async def test_a_new_session_opens_empty() -> None:
    log = await SessionLog.open(MemoryStore(), "ses_new")
    assert log.history.messages == [] and log.history.seq == 0


async def test_appends_are_applied_to_the_projection() -> None:
    b = SessionBuilder()
    _turns(b, 2)
    log = await SessionLog.open(MemoryStore(), b.session_id)
    recorded = await log.append(b.events)
    assert [r.seq for r in recorded] == list(range(1, len(b.events) + 1))
    assert log.history == History.rebuild(b.session_id, recorded)


async def test_an_invalid_batch_writes_nothing_and_changes_nothing() -> None:
    store = MemoryStore()
    b = SessionBuilder()
    _turns(b, 1)
    log = await SessionLog.open(store, b.session_id)
    await log.append(b.events)
    before = log.history.snapshot()
    bad = MessageAdded(session_id=b.session_id, message_id="msg_0", role="user")
    with pytest.raises(InvalidEvent):
        await log.append([bad])
    assert log.history.snapshot() == before
    assert await store.stream_version(b.session_id) == len(b.events)


async def test_a_second_writer_gets_a_concurrency_error_until_it_refreshes() -> None:
    store = MemoryStore()
    b = SessionBuilder()
    first = await SessionLog.open(store, b.session_id)
    await first.append(b.events)
    second = await SessionLog.open(store, b.session_id)
    user = b.user("from the first writer")
    await first.append(b.events[-2:])
    b2_event = MessageAdded(session_id=b.session_id, message_id=b.new_message_id(), role="user")
    with pytest.raises(ConcurrencyError):
        await second.append([b2_event])
    assert await second.refresh() == 2
    assert second.history.message(user).role == "user"
    await second.append([b2_event])


async def test_snapshots_are_written_every_n_events_and_used_on_open() -> None:
    store = MemoryStore()
    b = SessionBuilder()
    _turns(b, 10)
    log = await SessionLog.open(store, b.session_id, snapshot_every=25)
    for event in b.events:
        await log.append([event])
    snapshot = await store.load_snapshot(b.session_id)
    assert snapshot is not None
    assert snapshot.seq == 25 * (len(b.events) // 25)
    reopened = await SessionLog.open(store, b.session_id)
    assert reopened.history == log.history


async def test_a_snapshot_of_another_schema_is_ignored() -> None:
    store = MemoryStore()
    b = SessionBuilder()
    _turns(b, 2)
    log = await SessionLog.open(store, b.session_id)
    await log.append(b.events)
    await store.save_snapshot(Snapshot(b.session_id, 3, SNAPSHOT_SCHEMA + 1, b"garbage"))
    reopened = await SessionLog.open(store, b.session_id)
    assert reopened.history == log.history


def test_snapshot_every_must_be_positive() -> None:
    with pytest.raises(ValueError, match="snapshot_every"):
        SessionLog(MemoryStore(), History("s"), snapshot_every=0)
