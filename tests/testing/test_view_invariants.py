"""The public view invariants hold over generated sessions, used as a user's own property test
would use them."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.events import (
    Event,
    ModelRef,
    RecordedEvent,
)
from contextledger.history import History
from contextledger.history._view import ViewOptions, model_view
from contextledger.testing import (
    check_live_view_matches,
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
