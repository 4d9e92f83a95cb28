"""``LocalLog`` checks, validates and applies a batch as ``SessionLog`` does, without a store."""

from __future__ import annotations

import pytest

from contextledger.events._catalogue import MessageAdded
from contextledger.events._errors import InvalidEvent
from contextledger.history._projection import History
from contextledger.ledger import SessionLog
from contextledger.simulation._local import LocalLog
from contextledger.simulation._synthetic import synthetic_session
from contextledger.store._memory import MemoryStore


async def test_a_local_log_records_and_projects_what_a_session_log_does() -> None:
    events = synthetic_session("local", seed=3, turns=4)
    local = LocalLog(History("local"))
    stored = await SessionLog.open(MemoryStore(), "local")
    for i in range(0, len(events), 29):
        batch = events[i : i + 29]
        assert await local.append(batch) == await stored.append(batch)
    assert local.history == stored.history and local.history.seq == len(events)


async def test_a_local_log_refuses_an_invalid_batch_and_applies_nothing() -> None:
    events = synthetic_session("local", seed=3, turns=1)
    local = LocalLog(History("local"))
    await local.append(events)
    repeated = next(e for e in events if isinstance(e, MessageAdded))
    with pytest.raises(InvalidEvent):
        await local.append([repeated])
    with pytest.raises(InvalidEvent):
        await local.append([MessageAdded(session_id="local", message_id=b"m", role="user")])  # type: ignore[arg-type]
    assert local.history.seq == len(events)
