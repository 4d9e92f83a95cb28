"""``session_events`` draws valid sessions and reaches the shapes the view must handle: manual
summaries, compactions left open at the end, and assistant messages of several steps."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

from contextledger.events import (
    AssistantFinished,
    CompactionCompleted,
    CompactionRequested,
    CompactionRolledBack,
    Event,
    MessageAdded,
    PartAdded,
    StepStartPart,
    TextPart,
    ToolPart,
)
from contextledger.history import SessionIndex, validate_events
from contextledger.testing import session_events

# The first example found will do: shrinking it would only cost time (and an unshrunk
# session has a long repr, which hypothesis warns about).
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
_FIND = settings(
    max_examples=2000,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_events())
def test_every_generated_session_is_valid(events: list[Event]) -> None:
    validate_events(SessionIndex("ses_test"), events)


def _requests(events: list[Event]) -> set[str]:
    return {e.message_id for e in events if isinstance(e, CompactionRequested)}


def _finished_manual_summaries(events: list[Event]) -> list[str]:
    requests = _requests(events)
    summaries = {
        e.message_id
        for e in events
        if isinstance(e, MessageAdded) and e.summary and e.parent_id not in requests
    }
    return [
        e.message_id
        for e in events
        if isinstance(e, AssistantFinished) and e.message_id in summaries and e.error is None
    ]


def test_manual_summaries_answer_plain_user_messages() -> None:
    events = find(session_events(), lambda ev: bool(_finished_manual_summaries(ev)), settings=_FIND)
    summary_id = _finished_manual_summaries(events)[0]
    added = next(e for e in events if isinstance(e, MessageAdded) and e.message_id == summary_id)
    parent = next(
        e for e in events if isinstance(e, MessageAdded) and e.message_id == added.parent_id
    )
    assert parent.role == "user" and not parent.summary
    assert any(
        isinstance(e, PartAdded)
        and isinstance(e.part, TextPart)
        and e.part.message_id == summary_id
        for e in events
    )


def _open_stage(events: list[Event]) -> str | None:
    """How far the compaction left open at the end got, or None."""
    closed = {e.request_message_id for e in events if isinstance(e, CompactionCompleted)} | {
        e.request_message_id for e in events if isinstance(e, CompactionRolledBack)
    }
    open_requests = _requests(events) - closed
    if not open_requests:
        return None
    (request,) = open_requests
    summary = next(
        (e.message_id for e in events if isinstance(e, MessageAdded) and e.parent_id == request),
        None,
    )
    if summary is None:
        return "requested"
    finished = any(isinstance(e, AssistantFinished) and e.message_id == summary for e in events)
    return "summarised" if finished else "summarising"


def test_sessions_sometimes_end_with_a_compaction_still_open() -> None:
    for stage in ("requested", "summarising", "summarised"):
        events = find(
            session_events(), lambda ev, stage=stage: _open_stage(ev) == stage, settings=_FIND
        )
        # The open one is the newest request: it comes at the end.
        last_request = max(i for i, e in enumerate(events) if isinstance(e, CompactionRequested))
        assert not any(
            isinstance(e, CompactionRequested | CompactionCompleted | CompactionRolledBack)
            for e in events[last_request + 1 :]
        )


def _multi_step_with_tools(events: list[Event]) -> bool:
    steps: Counter[str] = Counter()
    for e in events:
        if isinstance(e, PartAdded):
            if isinstance(e.part, StepStartPart):
                steps[e.part.message_id] += 1
            elif isinstance(e.part, ToolPart) and steps[e.part.message_id] >= 2:
                return True
    return False


def test_assistant_messages_can_have_several_steps_with_tool_calls_after_the_first() -> None:
    find(session_events(), _multi_step_with_tools, settings=_FIND)
