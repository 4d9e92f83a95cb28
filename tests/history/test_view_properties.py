"""Properties of the model view over generated sessions: determinism, call/result pairing,
and prefix stability."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from contextledger.events import (
    Event,
    InvalidEvent,
    ModelRef,
    RecordedEvent,
)
from contextledger.history import History, validate_events
from contextledger.history._live_view import LiveView
from contextledger.history._validation import SessionIndex
from contextledger.history._view import ViewOptions, model_view, tool_pairs_ok
from contextledger.testing import (
    appends_only,
    check_prefix_stable,
    session_events,
    split_batches,
)

PROPERTY = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_OPTIONS = st.builds(
    ViewOptions,
    model=st.sampled_from(
        [
            None,
            ModelRef(provider_id="anthropic", model_id="claude-sonnet-4"),
            ModelRef(provider_id="openai", model_id="gpt-5"),
            ModelRef(provider_id="deepseek", model_id="deepseek-chat"),
        ]
    ),
    strip_media=st.booleans(),
    tool_output_max_chars=st.none() | st.integers(0, 100),
    environment=st.sampled_from(["each", "latest", "none"]),
    historical_media=st.sampled_from(["compaction", "latest-user", "keep"]),
    agent_id=st.sampled_from([None, "main", "explore"]),
)


def _history(events: list[Event]) -> History:
    return History.rebuild(
        "ses_test", [RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, 1)]
    )


@PROPERTY
@given(session_events(), _OPTIONS)
def test_the_view_is_deterministic(events: list[Event], options: ViewOptions) -> None:
    assert model_view(_history(events), options) == model_view(_history(events), options)


@PROPERTY
@given(session_events(), _OPTIONS, st.data())
def test_no_view_ever_separates_a_call_from_its_result(
    events: list[Event], options: ViewOptions, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(events)), label="events so far")
    assert tool_pairs_ok(model_view(_history(events[:cut]), options))


@PROPERTY
@given(session_events(), _OPTIONS, st.data())
def test_appending_events_that_do_not_touch_earlier_messages_keeps_the_view_prefix(
    events: list[Event], options: ViewOptions, data: st.DataObject
) -> None:
    assume(options.environment != "latest" and options.historical_media != "latest-user")
    cut = data.draw(st.integers(1, len(events)), label="events so far")
    head = events[:cut]
    later = appends_only(head, events[cut:])
    try:
        validate_events(SessionIndex("ses_test"), head + later)
    except InvalidEvent:
        assume(False)
    before = model_view(_history(head), options)
    after = model_view(_history(head + later), options)
    check_prefix_stable(before, after)


@PROPERTY
@given(session_events(), _OPTIONS, st.data())
def test_the_live_view_equals_the_view_built_from_scratch(
    events: list[Event], options: ViewOptions, data: st.DataObject
) -> None:
    batches = data.draw(split_batches(events), label="batches")
    note(f"batch sizes: {[len(b) for b in batches]}")
    history = History("ses_test")
    live = LiveView(options)
    seq = 0
    for batch in batches:
        for event in batch:
            seq += 1
            history.apply(RecordedEvent("ses_test", seq, seq, event))
        assert list(live.update(history)) == model_view(history, options)


def test_one_live_view_fed_another_history_starts_over() -> None:
    from contextledger.testing._builder import SessionBuilder

    first, second = SessionBuilder(), SessionBuilder()
    first.user("from the first history")
    second.user("from the second history")
    live = LiveView()
    live.update(_history(first.events))
    assert list(live.update(_history(second.events))) == model_view(_history(second.events))
