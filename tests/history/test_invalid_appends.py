"""Property: an invalid event anywhere in a batch rejects the whole batch before anything is
written; the store's files stay byte-identical and the projection unchanged."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.events import (
    AssistantFinished,
    CompactionCompleted,
    CompactionProjection,
    Event,
    InvalidEvent,
    MessageAdded,
    PartAdded,
    PartUpdated,
    SessionStarted,
    TextPart,
    ToolCompleted,
    ToolOutputCleared,
    ToolOutputTrimmed,
    ToolStateChanged,
)
from contextledger.ledger import SessionLog
from contextledger.store import SQLiteStore
from contextledger.testing import session_events

_NO_MESSAGE = "msg_ffffffffffffffffff"
_NO_PART = "prt_ffffffffffffffffff"

_BAD_EVENTS: list[Event] = [
    ToolStateChanged(
        session_id="ses_test", message_id=_NO_MESSAGE, part_id=_NO_PART, state=ToolCompleted()
    ),
    ToolOutputCleared(session_id="ses_test", part_ids=(_NO_PART,), reason="normal"),
    ToolOutputTrimmed(session_id="ses_test", part_id=_NO_PART, head_chars=1, tail_chars=1),
    PartUpdated(
        session_id="ses_test", part=TextPart(id=_NO_PART, message_id=_NO_MESSAGE, text="x")
    ),
    PartAdded(
        session_id="ses_test",
        part=TextPart(id="prt_fffffffffffffffffe", message_id=_NO_MESSAGE, text="x"),
    ),
    AssistantFinished(session_id="ses_test", message_id=_NO_MESSAGE, finish="stop"),
    SessionStarted(session_id="ses_test"),
    MessageAdded(session_id="ses_other", message_id=_NO_MESSAGE, role="user"),
    CompactionCompleted(
        session_id="ses_test",
        request_message_id=_NO_MESSAGE,
        summary_message_id=_NO_MESSAGE,
        tail_start_id=None,
        projection=CompactionProjection(summary="s"),
    ),
]


def _backwards_ids(prefix: list[Event]) -> list[Event]:
    """A message and a part whose ids do not follow the greatest ones of ``prefix``."""
    messages = [e.message_id for e in prefix if isinstance(e, MessageAdded)]
    parts = [e.part for e in prefix if isinstance(e, PartAdded)]
    bad: list[Event] = []
    if messages:
        bad.append(MessageAdded(session_id="ses_test", message_id=messages[0], role="user"))
    if parts:
        old = parts[0]
        bad.append(
            PartAdded(
                session_id="ses_test",
                part=TextPart(id=old.id, message_id=old.message_id, text="again"),
            )
        )
    return bad


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.glob(path.name + "*"))}


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_events(), st.data())
def test_invalid_appends_leave_the_store_byte_identical(
    events: list[Event], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(events)), label="valid prefix")
    lead = data.draw(st.integers(0, len(events) - cut), label="valid events before the bad one")
    bad = data.draw(st.sampled_from(_BAD_EVENTS + _backwards_ids(events[:cut])), label="bad")
    batch = [*events[cut : cut + lead], bad]

    async def run(path: Path) -> None:
        async with SQLiteStore.open(path) as store:
            log = await SessionLog.open(store, "ses_test")
            await log.append(events[:cut])
            before_files = _files(path)
            before_state = log.history.snapshot()
            with pytest.raises(InvalidEvent) as caught:
                await log.append(batch)
            assert caught.value.index == lead
            assert _files(path) == before_files
            assert log.history.snapshot() == before_state
            assert await store.stream_version("ses_test") == cut

    with tempfile.TemporaryDirectory() as tmp:
        trio.run(run, Path(tmp) / "s.db")
