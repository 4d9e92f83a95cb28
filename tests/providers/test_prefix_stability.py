"""Byte stability of every wire format: for consecutive steps with no event that changes an
earlier message or the prefix, request N's bytes up to its last message are the same span of
request N+1. Cache marks are the one thing allowed to move (Anthropic and Bedrock match the
cached prefix without them); with marks the bytes agree up to the first message whose mark
changed, and with the native policy that happens only when a new user message arrives."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from contextledger.events import Event, InvalidEvent, ModelRef, RecordedEvent
from contextledger.events._parts import ToolSchema
from contextledger.history import History, validate_events
from contextledger.history._live_view import LiveView
from contextledger.history._validation import SessionIndex
from contextledger.history._view import ViewOptions
from contextledger.policy._cache import place_marks
from contextledger.providers import WIRE_FORMATS
from contextledger.providers._base import EncodedRequest, WireFormat
from contextledger.testing import appends_only, session_events
from contextledger.vocabulary._messages import ModelMessage
from contextledger.vocabulary._requests import CacheMark, CachePolicy, Request

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODEL = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4")
SYSTEM = ("You are a careful engineer.", "<env>\n  Platform: linux\n</env>")
TOOLS = (
    ToolSchema(name="bash", description="Run a command.", input_schema={"type": "object"}),
    ToolSchema(name="read", description="Read a file.", input_schema={"type": "object"}),
)


def _history(events: Sequence[Event]) -> History:
    return History.rebuild(
        "ses_test", [RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, 1)]
    )


def _request(
    messages: Sequence[ModelMessage], policy: CachePolicy | None, max_tokens: int
) -> Request:
    marks: tuple[CacheMark, ...] = ()
    if policy is not None:
        marks = place_marks(policy, tools=len(TOOLS), system_blocks=len(SYSTEM), messages=messages)
    return Request(
        model=MODEL,
        session_id="ses_test",
        system=SYSTEM,
        tools=TOOLS,
        messages=tuple(messages),
        marks=marks,
        max_output_tokens=max_tokens,
    )


def _stable_span(before: Request, encoded: EncodedRequest, after: Request) -> int:
    """The bytes of ``before`` that ``after`` must repeat: up to its last message, or to the
    first message whose mark differs."""
    span = encoded.message_offsets[-1] if encoded.message_offsets else encoded.messages_end
    old, new = before.message_marks(), after.message_marks()
    for index, offset in enumerate(encoded.message_offsets):
        if old.get(index) != new.get(index):
            return min(span, offset)
    return span


POLICIES = st.sampled_from([None, CachePolicy(), CachePolicy(mode="ai-sdk")])


@pytest.mark.parametrize("name", sorted(WIRE_FORMATS))
@PROPERTY
@given(events=session_events(), policy=POLICIES, data=st.data())
def test_request_bytes_before_the_last_message_never_change_between_steps(
    name: str, events: list[Event], policy: CachePolicy | None, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(events)), label="events so far")
    head = events[:cut]
    later = appends_only(head, events[cut:], keep_prefix=True)
    try:
        validate_events(SessionIndex("ses_test"), head + later)
    except InvalidEvent:
        assume(False)
    wire: WireFormat = WIRE_FORMATS[name]()
    view = LiveView(ViewOptions(model=MODEL))
    history = _history(head)
    before = _request(view.update(history), policy, 1024)
    assume(before.messages)
    encoded_before = wire.encode(before)
    # The same history and view carry on, so unchanged messages reuse their fragments.
    history.apply_all(
        RecordedEvent("ses_test", i, i, e) for i, e in enumerate(later, len(head) + 1)
    )
    after = _request(view.update(history), policy, 4096)
    encoded_after = wire.encode(after)
    span = _stable_span(before, encoded_before, after)
    assert encoded_after.body[:span] == encoded_before.body[:span]
    # The memo is an optimisation only: a fresh encoder gives the same bytes.
    assert WIRE_FORMATS[name]().encode(after).body == encoded_after.body
    if policy is not None and policy.mode == "auto" and not _new_user_message(before, after):
        # Within a turn the native policy's marks stay put: the whole span is stable.
        assert span == encoded_before.message_offsets[-1]


def _new_user_message(before: Request, after: Request) -> bool:
    new = after.messages[len(before.messages) :]
    return any(m.role == "user" and not m.synthetic for m in new)
