"""History: the projection of a session's events, and the model view built on it.

``History`` folds events into a projection; ``model_view(history, ViewOptions(...))`` is what
the model is sent, and ``LiveView`` keeps that view up to date incrementally. Tool-output
truncation and paging (``read_tool_output``, the ``PAGING_TOOL`` definition) live in
``contextledger.history._truncate``.
"""

from contextledger.history._estimate import estimate_part_tokens, part_chars
from contextledger.history._live_view import LiveView
from contextledger.history._pages import SnapshotSource
from contextledger.history._projection import (
    SNAPSHOT_SCHEMA,
    Compaction,
    History,
    HistoryState,
    Message,
    PinnedPrefix,
    TokenEstimator,
)
from contextledger.history._truncate import (
    PAGING_TOOL,
    OutputPage,
    ToolOutputUnavailable,
    read_tool_output,
)
from contextledger.history._validation import SessionIndex, validate_events
from contextledger.history._view import ViewOptions, interrupted_calls, model_view

__all__ = [
    "PAGING_TOOL",
    "SNAPSHOT_SCHEMA",
    "Compaction",
    "History",
    "HistoryState",
    "LiveView",
    "Message",
    "OutputPage",
    "PinnedPrefix",
    "SessionIndex",
    "SnapshotSource",
    "TokenEstimator",
    "ToolOutputUnavailable",
    "ViewOptions",
    "estimate_part_tokens",
    "interrupted_calls",
    "model_view",
    "part_chars",
    "read_tool_output",
    "validate_events",
]
