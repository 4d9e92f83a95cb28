"""History: the projection of a session's events, and the model view built on it.

The view lives in ``contextledger.history.view`` (``model_view``, ``ViewOptions``) and
``contextledger.history.live_view`` (``LiveView``); they depend on the config, which depends
on this package, so they are not re-exported here.
"""

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
