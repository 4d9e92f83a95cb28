"""The public view invariants hold over generated sessions, used as a user's own property test
would use them."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from contextledger.events import (
    AssistantFinished,
    CompactionCompleted,
    CompactionRequested,
    CompactionRolledBack,
    EnvironmentCaptured,
    Event,
    InvalidEvent,
    MessageAdded,
    ModelRef,
    PartAdded,
    PartUpdated,
    RecordedEvent,
    ToolOutputCleared,
    ToolOutputTrimmed,
    ToolStateChanged,
)
from contextledger.history import History, SessionIndex, validate_events
from contextledger.history.view import ViewOptions, model_view
from contextledger.testing import (
    check_live_view_matches,
    check_prefix_stable,
    check_tool_pairs,
    check_view_deterministic,
    session_events,
)

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_OPTIONS = st.builds(
    ViewOptions,
    model=st.sampled_from(
        [
            None,
            ModelRef(provider_id="openai", model_id="gpt-5"),
            ModelRef(provider_id="x", model_id="y"),
        ]
    ),
    strip_media=st.booleans(),
    environment=st.sampled_from(["each", "latest", "none"]),
    historical_media=st.sampled_from(["compaction", "latest-user", "keep"]),
    agent_id=st.sampled_from([None, "main", "explore"]),
)


def _recorded(events: list[Event]) -> list[RecordedEvent]:
    return [RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, 1)]


@PROPERTY
@given(session_events(), _OPTIONS, st.data())
def test_every_view_pairs_calls_replays_exactly_and_matches_the_live_view(
    events: list[Event], options: ViewOptions, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(events)), label="events so far")
    recorded = _recorded(events[:cut])
    history = History.rebuild("ses_test", recorded)
    check_tool_pairs(model_view(history, options))
    check_view_deterministic(history, options, recorded=recorded)
    check_live_view_matches(history, options)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_events(), _OPTIONS)
def test_a_live_view_fed_one_event_at_a_time_matches_at_every_step(
    events: list[Event], options: ViewOptions
) -> None:
    recorded = _recorded(events)
    check_live_view_matches(History.rebuild("ses_test", recorded), options, recorded=recorded)


def _reshapes(event: Event, messages: set[str], parts: set[str], summaries: set[str]) -> bool:
    """Does ``event`` change a message already in the view, or say the view is reshaped (a
    compaction completing or rolled back, a summary finishing)?"""
    match event:
        case CompactionCompleted() | CompactionRolledBack():
            return True
        case PartAdded(part=part) | PartUpdated(part=part):
            return part.message_id in messages
        case AssistantFinished():
            return event.message_id in messages or event.message_id in summaries
        case ToolStateChanged():
            return event.message_id in messages
        case ToolOutputCleared():
            return any(p in parts for p in event.part_ids)
        case ToolOutputTrimmed():
            return event.part_id in parts
        case EnvironmentCaptured():
            return event.user_message_id in messages
        case _:
            return False


@PROPERTY
@given(session_events(), _OPTIONS, st.data())
def test_events_that_only_add_messages_keep_the_view_prefix(
    events: list[Event], options: ViewOptions, data: st.DataObject
) -> None:
    # Kilo's "latest" rules move with each new user message and so change earlier bytes.
    assume(options.environment != "latest" and options.historical_media != "latest-user")
    cut = data.draw(st.integers(1, len(events)), label="events so far")
    head = events[:cut]
    messages = {e.message_id for e in head if isinstance(e, MessageAdded | CompactionRequested)}
    parts = {e.part.id for e in head if isinstance(e, PartAdded)}
    summaries = {e.message_id for e in events if isinstance(e, MessageAdded) and e.summary}
    later = [e for e in events[cut:] if not _reshapes(e, messages, parts, summaries)]
    try:
        validate_events(SessionIndex("ses_test"), head + later)
    except InvalidEvent:
        assume(False)
    before = model_view(History.rebuild("ses_test", _recorded(head)), options)
    after = model_view(History.rebuild("ses_test", _recorded(head + later)), options)
    check_prefix_stable(before, after)
