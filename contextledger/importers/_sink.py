"""Streaming an import: a builder's events go to a ``Sink`` as they are built instead of staying
in its session.

By default (no sink) an importer keeps every event in the ``ImportedSession`` it returns. Run
inside ``streaming(sink)``, each builder's ``EventBuffer`` hands its events to ``sink`` a batch
at a time, and holds only the events of the record being built (a lenient import may still undo
them); the session it returns holds its ``SessionStarted`` alone, and ``streamed`` counts what
went to the sink. The ``import`` command runs an import twice this way: once to count and check
(``Tally``), once to write, the events of each session found by the ordinal of its buffer (the
same in both runs: importers are deterministic).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final, Protocol

import msgspec

from contextledger.events._catalogue import Event, MessageAdded, PartAdded
from contextledger.events._parts import ToolPart, struct_tag

#: Events a buffer holds before it hands them to its sink.
STREAM_BATCH: Final = 64


class Streamed(msgspec.Struct, kw_only=True):
    """What a session handed to a sink: how many events, the latest time and the written
    counts of ``written_counts``."""

    events: int = 0
    last_ms: int = 0
    written: dict[str, int] = {}


class Sink(Protocol):
    """Where the builders of one import hand their events."""

    def open(self) -> int:
        """A new buffer's ordinal (0, 1, … in the order buffers are made)."""
        ...

    def take(self, ordinal: int, events: list[Event]) -> None:
        """The next ``events`` of the buffer ``ordinal`` (the list is the sink's to keep)."""
        ...

    def close(self, ordinal: int, session_id: str) -> Streamed:
        """The buffer ``ordinal`` became the session ``session_id``: what it handed over."""
        ...


_SINK: ContextVar[Sink | None] = ContextVar("contextledger_import_sink", default=None)


@contextmanager
def streaming(sink: Sink) -> Iterator[None]:
    """Within this block, builders hand their events to ``sink``."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def written_counts(events: list[Event]) -> Counter[str]:
    """What ``events`` write, as an import reports it: events by type, messages by role, tool
    calls."""
    counts: Counter[str] = Counter()
    for event in events:
        counts[f"event:{struct_tag(event)}"] += 1
        if isinstance(event, MessageAdded):
            counts[f"{event.role} messages"] += 1
        elif isinstance(event, PartAdded) and isinstance(event.part, ToolPart):
            counts["tool calls"] += 1
    return counts


class EventBuffer:
    """The events of one session as a builder makes them: all of them, or, inside
    ``streaming``, those not yet handed to the sink. ``hold`` keeps them while a record that
    may be undone is built; ``first_ms`` is the time of the first event."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.first_ms: int | None = None
        self._held = 0
        self._sink = _SINK.get()
        self._ordinal = self._sink.open() if self._sink is not None else -1

    def append(self, event: Event) -> None:
        if self.first_ms is None:
            self.first_ms = event.time_ms
        self.events.append(event)
        self._hand_over_full()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Keep the events appended in this block until it ends."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            self._hand_over_full()

    def _hand_over_full(self) -> None:
        if self._sink is not None and not self._held and len(self.events) >= STREAM_BATCH:
            self._hand_over()

    def close(self, session_id: str) -> tuple[list[Event], Streamed | None]:
        """The events still held (all of them without a sink) and what went to the sink."""
        if self._sink is None:
            return self.events, None
        self._hand_over()
        return [], self._sink.close(self._ordinal, session_id)

    def _hand_over(self) -> None:
        assert self._sink is not None
        events, self.events = self.events, []
        self._sink.take(self._ordinal, events)


class Tally:
    """A sink that keeps no event: it counts what each buffer handed over."""

    def __init__(self) -> None:
        self._counts: list[Counter[str]] = []
        self._events: list[int] = []
        self._last: list[int] = []
        self.session_ids: dict[int, str] = {}

    def open(self) -> int:
        self._counts.append(Counter())
        self._events.append(0)
        self._last.append(0)
        return len(self._counts) - 1

    def take(self, ordinal: int, events: list[Event]) -> None:
        self._counts[ordinal].update(written_counts(events))
        self._events[ordinal] += len(events)
        self._last[ordinal] = max(self._last[ordinal], *(e.time_ms for e in events), 0)

    def close(self, ordinal: int, session_id: str) -> Streamed:
        self.session_ids[ordinal] = session_id
        counts = self._counts[ordinal]
        return Streamed(
            events=self._events[ordinal],
            last_ms=self._last[ordinal],
            written=dict(sorted(counts.items())),
        )
