"""Invariants every session log and projection must keep, callable from users' own tests.

Each ``check_*`` raises ``InvariantViolation`` (an ``AssertionError``) naming what broke, so
it works in pytest, in hypothesis properties and in a stateful test's ``@invariant``.

The log and projection: ``check_ids_increase``, ``check_history``, ``check_rebuild_matches``
(incremental == rebuild), ``check_snapshot_matches``, ``check_round_trip``. The model view:
``check_tool_pairs`` (a call and its result are never split), ``check_view_deterministic``
(replay determinism), ``check_live_view_matches`` (the incremental view equals the view built
from scratch) and ``check_prefix_stable`` (bytes already sent stay the same).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from contextledger.events._catalogue import (
    CompactionRequested,
    Event,
    MessageAdded,
    PartAdded,
    RecordedEvent,
)
from contextledger.events._codec import DEFAULT_CODEC, EventCodec
from contextledger.events._parts import CompactionPart
from contextledger.history._live_view import LiveView
from contextledger.history._projection import History
from contextledger.history._view import ViewOptions, model_view, tool_pairs_ok
from contextledger.vocabulary._messages import ModelMessage, ModelToolCall, ModelToolResult


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
    """A projection restored from its snapshot equals it (its state compares equal as a
    struct; the snapshot bytes themselves are not compared), and its validation index holds
    the same facts (so it accepts and rejects exactly the same next events)."""
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


# --- the model view -------------------------------------------------------------------------


def _describe(view: Sequence[ModelMessage], i: int) -> str:
    message = view[i]
    return f"message {i} ({message.role}, from {message.source_id})"


def _pairing_problem(view: Sequence[ModelMessage]) -> str:
    """What ``tool_pairs_ok`` objects to, naming the offending call."""
    pending: dict[str, ModelToolCall] = {}
    made_at = -1
    for i, message in enumerate(view):
        if message.role == "tool":
            answered: set[str] = set()
            for result in message.content:
                if not isinstance(result, ModelToolResult):
                    continue
                if result.call_id in answered:
                    return f"call {result.call_id!r} is answered twice by {_describe(view, i)}"
                if result.call_id not in pending:
                    return (
                        f"{_describe(view, i)} answers call {result.call_id!r} "
                        f"({result.tool}), which the message before it did not make"
                    )
                answered.add(result.call_id)
            for call_id, call in pending.items():
                if call_id not in answered:
                    return (
                        f"call {call_id!r} ({call.tool}) of {_describe(view, made_at)} is not "
                        f"answered by the results that follow it in {_describe(view, i)}"
                    )
            pending = {}
            continue
        if pending:
            call_id, call = next(iter(pending.items()))
            return (
                f"call {call_id!r} ({call.tool}) of {_describe(view, made_at)} is not answered "
                f"in the next message: {_describe(view, i)} is not a tool message"
            )
        if message.role == "assistant":
            for made in message.content:
                if isinstance(made, ModelToolCall):
                    if made.call_id in pending:
                        return f"call {made.call_id!r} is made twice in {_describe(view, i)}"
                    pending[made.call_id] = made
            made_at = i
        else:
            for result in message.content:
                if isinstance(result, ModelToolResult):
                    return (
                        f"{_describe(view, i)} carries the result of call {result.call_id!r} "
                        f"({result.tool}) outside a tool message"
                    )
    if pending:
        call_id, call = next(iter(pending.items()))
        return (
            f"call {call_id!r} ({call.tool}) of {_describe(view, made_at)} is never answered: "
            "the view ends"
        )
    return "tool calls and results do not pair up"


def check_tool_pairs(view: Sequence[ModelMessage]) -> None:
    """Every tool call is answered, in the very next message, by exactly one result, and every
    result answers a call of the message just before it: a view never splits a call from its
    result (``contextledger.history._view.tool_pairs_ok``, with the offending call named)."""
    if not tool_pairs_ok(view):
        _fail(_pairing_problem(view))


_view_encoder = msgspec.json.Encoder()


def _first_difference(a: Sequence[ModelMessage], b: Sequence[ModelMessage]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if _view_encoder.encode(x) != _view_encoder.encode(y):
            return f"message {i} ({x.role}, from {x.source_id}) differs"
    return f"one has {len(a)} messages, the other {len(b)}"


def check_view_deterministic(
    history: History,
    options: ViewOptions | None = None,
    *,
    recorded: Sequence[RecordedEvent] | None = None,
) -> None:
    """The view is a pure function of the log (replay determinism): building it twice, from
    the projection restored from its snapshot, and (given ``recorded``, the session's events)
    from a projection rebuilt from them gives byte-identical views (compared as their JSON
    encodings)."""
    options = options or ViewOptions()
    view = model_view(history, options)
    expected = _view_encoder.encode(view)
    others = [
        ("a second build", history),
        ("the projection restored from its snapshot", History.from_snapshot(history.snapshot())),
    ]
    if recorded is not None:
        others.append(
            (
                f"the projection rebuilt from {len(recorded)} events",
                History.rebuild(history.session_id, recorded),
            )
        )
    for what, other in others:
        again = model_view(other, options)
        if _view_encoder.encode(again) != expected:
            _fail(f"the view of {what} differs: {_first_difference(view, again)}")


def check_live_view_matches(
    history: History,
    options: ViewOptions | None = None,
    *,
    recorded: Sequence[RecordedEvent] | None = None,
) -> None:
    """A ``LiveView`` (incremental) equals ``model_view`` (from scratch): incremental ==
    rebuild for views.

    Without ``recorded``, one ``LiveView`` is updated on ``history`` twice (a full build,
    then a patch with nothing changed). With ``recorded`` (the events of ``history``), a
    fresh projection is fed them one at a time and one ``LiveView`` updated after each is
    compared with the view built from scratch at every step (quadratic in the number of
    events: meant for test-sized sessions); the last must also equal ``history``'s view.
    """
    options = options or ViewOptions()
    live = LiveView(options)
    if recorded is not None:
        fed = History(history.session_id)
        for r in recorded:
            fed.apply(r)
            got = list(live.update(fed))
            expected = model_view(fed, options)
            if got != expected:
                _fail(
                    f"after event seq {r.seq} ({type(r.event).__name__}) the live view "
                    f"differs from the view built from scratch: "
                    f"{_first_difference(got, expected)}"
                )
        final = model_view(history, options)
        got = list(live.update(fed))
        if got != final:
            _fail(
                f"the live view of the {len(recorded)} events differs from the view of the "
                f"history: {_first_difference(got, final)}"
            )
        return
    expected = model_view(history, options)
    for attempt in ("first", "second"):
        got = list(live.update(history))
        if got != expected:
            _fail(
                f"the live view ({attempt} update) differs from the view built from scratch: "
                f"{_first_difference(got, expected)}"
            )


def check_prefix_stable(
    before_view: Sequence[ModelMessage], after_view: Sequence[ModelMessage]
) -> None:
    """``after_view`` starts with every message of ``before_view``, unchanged: what was sent
    stays byte-identical, so a prompt cache keeps paying. Holds between two views of one
    session when the events in between only add messages; an event that says otherwise (a
    prune, a soft trim, a compaction or a manual summary completing) may break it."""
    for i, (before, after) in enumerate(zip(before_view, after_view, strict=False)):
        if before != after:
            _fail(
                f"message {i} of the earlier view ({before.role}, from {before.source_id}) "
                f"changed: it is now {after.role}, from {after.source_id}"
                + (", with other content" if before.source_id == after.source_id else "")
            )
    if len(after_view) < len(before_view):
        _fail(
            f"the view shrank from {len(before_view)} to {len(after_view)} messages: "
            f"message {len(after_view)} (from {before_view[len(after_view)].source_id}) is gone"
        )
