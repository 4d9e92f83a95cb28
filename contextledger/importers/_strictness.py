"""Strict by default: input that is not a valid conversation is refused, naming its line and
field; a lenient import keeps the rest. Either way, what a session left out is recorded in its
log (``InputLeftOut``), so ``view`` and ``replay`` show it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from contextledger.events._catalogue import InputLeftOut, MessageAdded
from contextledger.importers._errors import TraceImportError
from contextledger.importers._imported import ImportedSession
from contextledger.importers._records import MALFORMED_RECORD

#: The left-out kinds that make the input no valid conversation: a result that answers no call
#: or answers one twice, two calls (or two records) under one id, a record that cannot be read.
#: Every other left-out kind is input that is well formed but carries nothing to the model (a
#: CLI notice, a progress line) and is only reported.
INVALID_KINDS: Final = frozenset(
    {
        "orphan_tool_result",
        "duplicate_tool_result",
        "duplicate_tool_call",
        "duplicate_tool_use",
        "duplicate_record",
        MALFORMED_RECORD,
    }
)
#: Why input that yields no message at all is refused.
NO_MESSAGE: Final = "the input holds no message (it would be an empty session)"
#: The key of a session's ``written`` counts that counts its messages.
MESSAGES_WRITTEN: Final = f"event:{MessageAdded.__struct_config__.tag}"
#: What the error of an invalid conversation adds to the importer's reason.
LENIENT_HINT: Final = "a lenient import leaves it out and records the loss"


def checked(
    sessions: Sequence[ImportedSession], *, source: str, lenient: bool
) -> list[ImportedSession]:
    """``sessions`` imported from ``source``, each (and each child) with an ``InputLeftOut``
    event at its end when it left anything out. Raises ``TraceImportError`` when no session
    holds a message, and, unless ``lenient``, at the first item (by line) whose kind is in
    ``INVALID_KINDS``."""
    every = [session for top in sessions for session in top.sessions()]
    if not any(session.written().get(MESSAGES_WRITTEN) for session in every):
        raise TraceImportError(source, 0, "", NO_MESSAGE)
    invalid = [
        (s.source or source, item)
        for s in every
        for item in s.left_out
        if item.kind in INVALID_KINDS
    ]
    if invalid and not lenient:
        where, first = min(invalid, key=lambda found: (found[1].line, found[1].field, found[0]))
        reason = f"{first.reason} ({first.kind}); {LENIENT_HINT}"
        raise TraceImportError(where, first.line, first.field, reason)
    return [_recorded(session, source) for session in sessions]


def _recorded(session: ImportedSession, source: str) -> ImportedSession:
    """``session`` and its children with their left-out items as a last event."""
    events = session.events
    if session.left_out:
        loss = InputLeftOut(
            session_id=session.session_id,
            time_ms=session.last_ms,
            source=session.source or source,
            items=tuple(session.left_out),
        )
        events = [*events, loss]
    children = [_recorded(child, source) for child in session.children]
    return msgspec.structs.replace(session, events=events, children=children)
