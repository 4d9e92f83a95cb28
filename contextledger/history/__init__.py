"""History: the projection of a session's events, and (later) the model view built on it."""

from contextledger.history.estimate import estimate_part_tokens, part_chars
from contextledger.history.projection import (
    SNAPSHOT_SCHEMA,
    Compaction,
    History,
    HistoryState,
    Message,
    PinnedPrefix,
    TokenEstimator,
)
from contextledger.history.validation import SessionIndex, validate_events

__all__ = [
    "SNAPSHOT_SCHEMA",
    "Compaction",
    "History",
    "HistoryState",
    "Message",
    "PinnedPrefix",
    "SessionIndex",
    "TokenEstimator",
    "estimate_part_tokens",
    "part_chars",
    "validate_events",
]
