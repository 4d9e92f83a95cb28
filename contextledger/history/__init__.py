"""History: the projection of a session's events, and the model view built on it.

``History`` folds events into a projection; ``model_view(history, ViewOptions(...))`` is what
the model is sent (``view_messages`` the history messages it is made of, ``tool_pairs_ok``
its pairing check), and ``LiveView`` keeps that view up to date incrementally. Tool-output
truncation and paging: ``truncate_tool_output``, ``read_tool_output`` and the ``PAGING_TOOL``
definition.
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
    truncate_for_view,
    truncate_tool_output,
)
from contextledger.history._validation import SessionIndex, validate_events
from contextledger.history._view import (
    ViewOptions,
    interrupted_calls,
    model_view,
    tool_pairs_ok,
    view_messages,
)

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
    "tool_pairs_ok",
    "truncate_for_view",
    "truncate_tool_output",
    "validate_events",
    "view_messages",
]
