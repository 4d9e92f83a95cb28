"""Invariants every session log and projection must keep, callable from users' own tests.

Each ``check_*`` raises ``InvariantViolation`` (an ``AssertionError``) naming what broke, so
it works in pytest, in hypothesis properties and in a stateful test's ``@invariant``.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.events.catalogue import (
    CompactionRequested,
    Event,
    MessageAdded,
    PartAdded,
    RecordedEvent,
)
from contextledger.events.codec import DEFAULT_CODEC, EventCodec
from contextledger.events.parts import CompactionPart
from contextledger.history.projection import History


class InvariantViolation(AssertionError):
    """A session log or projection broke one of the invariants."""


def _fail(message: str) -> None:
    raise InvariantViolation(message)


def check_ids_increase(events: Sequence[Event]) -> None:
    """Message ids, and part ids, strictly increase in the order they are created."""
    last_message = last_part = ""
    for i, event in enumerate(events):
        new_messages: list[str] = []
        new_parts: list[str] = []
        if isinstance(event, MessageAdded):
            new_messages.append(event.message_id)
        elif isinstance(event, CompactionRequested):
            new_messages.append(event.message_id)
            new_parts.append(event.part_id)
        elif isinstance(event, PartAdded):
            new_parts.append(event.part.id)
        for message_id in new_messages:
            if message_id <= last_message:
                _fail(f"event {i}: message id {message_id} does not follow {last_message}")
            last_message = message_id
        for part_id in new_parts:
            if part_id <= last_part:
                _fail(f"event {i}: part id {part_id} does not follow {last_part}")
            last_part = part_id


def check_history(history: History) -> None:
    """The projection is well formed: messages and parts in id order, each part in its own
    message with a token estimate, compaction tails before their requests, summaries
    answering their requests, and only rolled-back compactions' messages excluded."""
    previous = ""
    excludable = {
        message_id
        for c in history.state.compactions.values()
        if c.status == "rolled_back"
        for message_id in (c.request_message_id, *c.summary_message_ids)
    }
    for message in history.messages:
        if message.id <= previous:
            _fail(f"message {message.id} is out of id order")
        previous = message.id
        if message.excluded and message.id not in excludable:
            _fail(f"message {message.id} is excluded but no rolled-back compaction owns it")
        previous_part = ""
        for part in message.parts:
            if part.message_id != message.id:
                _fail(f"part {part.id} says message {part.message_id}, sits in {message.id}")
            if part.id <= previous_part:
                _fail(f"part {part.id} is out of id order in message {message.id}")
            previous_part = part.id
            if part.id not in history.state.part_tokens:
                _fail(f"part {part.id} has no token estimate")
            tail = part.tail_start_id if isinstance(part, CompactionPart) else None
            if tail is not None and tail >= message.id:
                _fail(f"compaction {message.id} keeps a tail starting after it")
    for compaction in history.state.compactions.values():
        for summary_id in compaction.summary_message_ids:
            if history.message(summary_id).parent_id != compaction.request_message_id:
                _fail(f"summary {summary_id} does not answer {compaction.request_message_id}")


def check_rebuild_matches(history: History, recorded: Sequence[RecordedEvent]) -> None:
    """Rebuilding from ``recorded`` gives exactly ``history`` (incremental == rebuild)."""
    rebuilt = History.rebuild(history.session_id, recorded)
    if rebuilt != history:
        _fail(f"rebuild of {len(recorded)} events differs from the live projection")


def check_snapshot_matches(history: History) -> None:
    """A projection restored from its snapshot equals it, and its validation index holds the
    same facts (so it accepts and rejects exactly the same next events)."""
    restored = History.from_snapshot(history.snapshot())
    if restored != history:
        _fail("the projection restored from its snapshot differs")
    if restored.index.facts() != history.index.facts():
        _fail("the validation index restored from a snapshot differs from the live one")


def check_round_trip(events: Sequence[Event], codec: EventCodec = DEFAULT_CODEC) -> None:
    """Every event decodes to itself after encoding."""
    for i, event in enumerate(events):
        tag = codec.tag_of(event)
        decoded = codec.decode(tag, event.v, codec.encode(event))
        if decoded != event:
            _fail(f"event {i} ({tag}) does not survive encode/decode")
