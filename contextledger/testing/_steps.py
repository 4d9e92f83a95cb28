"""Splitting a session into a step and what follows it, for prefix-stability properties."""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.events._catalogue import (
    AssistantFinished,
    CompactionCompleted,
    CompactionRequested,
    CompactionRolledBack,
    EnvironmentCaptured,
    Event,
    InstructionLoaded,
    MemoryPinned,
    MessageAdded,
    PartAdded,
    PartsStripped,
    PartUpdated,
    PrefixPinned,
    PrefixRotated,
    ToolOutputCleared,
    ToolOutputTrimmed,
    ToolStateChanged,
)

#: Events that change the system text or the tool table of later requests.
PREFIX_EVENTS = (InstructionLoaded, MemoryPinned, PrefixPinned, PrefixRotated)


def appends_only(
    head: Sequence[Event], later: Sequence[Event], *, keep_prefix: bool = False
) -> list[Event]:
    """The events of ``later`` that leave every message of ``head`` as it was: no part of an
    existing message added, changed, pruned, trimmed or stripped, no compaction completing or
    rolled back (they reshape the view). With ``keep_prefix``, also none that changes the
    request prefix (memory, instructions, a pinned or rotated prefix). What remains only
    appends, so views (and requests) built before and after must agree on everything before."""
    messages = {e.message_id for e in head if isinstance(e, MessageAdded | CompactionRequested)}
    parts = {e.part.id for e in head if isinstance(e, PartAdded)}
    summaries = {e.message_id for e in (*head, *later) if isinstance(e, MessageAdded) and e.summary}
    return [
        e
        for e in later
        if not _touches(e, messages, parts, summaries)
        and not (keep_prefix and isinstance(e, PREFIX_EVENTS))
    ]


def _touches(event: Event, messages: set[str], parts: set[str], summaries: set[str]) -> bool:
    match event:
        case CompactionCompleted() | CompactionRolledBack():
            return True
        case PartAdded(part=part) | PartUpdated(part=part):
            return part.message_id in messages
        case AssistantFinished():
            # A summary finishing (a manual /compact of a plain user message) reshapes the view.
            return event.message_id in messages or event.message_id in summaries
        case ToolStateChanged():
            return event.message_id in messages
        case ToolOutputCleared() | PartsStripped():
            return any(p in parts for p in event.part_ids)
        case ToolOutputTrimmed():
            return event.part_id in parts
        case EnvironmentCaptured():
            return event.user_message_id in messages
        case _:
            return False
