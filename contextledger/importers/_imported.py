"""What every importer returns: the sessions it built, each with its API calls, what it read
and what it left out (with the line and the reason), and the session ids derived from the
source."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any, Final

import msgspec

from contextledger.events._catalogue import Event, LeftOut
from contextledger.events._ids import format_id
from contextledger.events._parts import Usage
from contextledger.importers._sink import Streamed, written_counts

#: Bits of a source's hash in a derived session id: the id's 6-hex-digit counter. Two sources
#: collide only with the same start millisecond and the same 24 bits (1 in 16.7 million).
_HASH_HEX_DIGITS: Final = 6


class ApiCall(msgspec.Struct, frozen=True, kw_only=True):
    """One API call of a transcript: the assistant message we made of it, the provider's
    ``message.id``, the model and the usage it reported (counted once)."""

    message_id: str
    api_message_id: str
    model: str
    usage: Usage
    line: int
    time_ms: int


class Spawn(msgspec.Struct, frozen=True, kw_only=True):
    """A call that spawned a sub-agent: its id, its input's ``prompt`` and ``subagent_type``
    (as the transcript gives them), and whether its result is in the transcript
    (``answered``: the sub-agent is done)."""

    call_id: str
    prompt: Any = None
    subagent_type: Any = None
    answered: bool = False


class ImportedSession(msgspec.Struct, kw_only=True):
    """A session imported from a transcript: its events (valid for ``validate_events``), its API
    calls in order, its sub-agent ``children``, and what was skipped (record or block kind →
    count). ``parent_call_id`` is the ``Task`` call a child answers. ``read`` counts the input
    records by kind; ``left_out`` lists each one (or part of one) that became no event; ``source``
    is the file the session was read from when it is not the one imported (a Claude Code
    sub-agent's own file), which its lines refer to. An import run inside ``streaming`` handed
    its other events to the sink: ``events`` holds its ``SessionStarted`` (and what is added
    after the import, such as ``InputLeftOut``), ``streamed`` counts the rest. ``spawns`` are
    the calls that spawned a sub-agent (the sub-agents of a Claude Code 2.1 session are
    linked to them)."""

    session_id: str
    events: list[Event]
    calls: list[ApiCall]
    children: list[ImportedSession] = []
    skipped: dict[str, int] = {}
    summaries: list[str] = []
    source_session_id: str | None = None
    parent_call_id: str | None = None
    read: dict[str, int] = {}
    left_out: list[LeftOut] = []
    source: str | None = None
    streamed: Streamed | None = None
    spawns: list[Spawn] = []

    def written(self) -> dict[str, int]:
        """What the session writes: events by type, messages by role, tool calls."""
        counts = written_counts(self.events)
        counts.update(self.streamed.written if self.streamed else {})
        return dict(sorted(counts.items()))

    @property
    def event_count(self) -> int:
        """How many events the session writes."""
        return len(self.events) + (self.streamed.events if self.streamed else 0)

    @property
    def last_ms(self) -> int:
        """The time of the session's latest event."""
        times = [e.time_ms for e in self.events]
        return max([*times, self.streamed.last_ms] if self.streamed else times)

    def sessions(self) -> Iterator[ImportedSession]:
        """This session and its children, depth first."""
        yield self
        for child in self.children:
            yield from child.sessions()

    def add_left_out(self, items: list[LeftOut]) -> None:
        """Record ``items`` (records read but left out, such as malformed lines) as read and
        left out by this session, keeping ``left_out`` in file order."""
        for item in items:
            self.read = {**self.read, item.kind: self.read.get(item.kind, 0) + 1}
            self.skipped = {**self.skipped, item.kind: self.skipped.get(item.kind, 0) + 1}
        self.left_out = sorted([*self.left_out, *items], key=lambda item: (item.line, item.field))

    def all_calls(self) -> list[ApiCall]:
        """Every API call of this session and its children."""
        return [call for session in self.sessions() for call in session.calls]


class HashedKey(msgspec.Struct, frozen=True):
    """A session id's key given by its SHA-256 (hex), for a key too large to hold whole (a
    document's content, hashed as it is encoded)."""

    sha256: str


def derived_session_id(start_ms: int, key: str | bytes | HashedKey) -> str:
    """A session id from the source: ``ses_`` with ``start_ms`` and 24 bits of the SHA-256 of
    ``key`` (the source's own session id, or its content), so the same source always gets the
    same id and two sources (almost) never share one."""
    if isinstance(key, HashedKey):
        digest = key.sha256
    else:
        data = key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key
        digest = hashlib.sha256(data).hexdigest()
    counter = int(digest[:_HASH_HEX_DIGITS], 16)
    return format_id("ses", max(start_ms, 0), counter)
