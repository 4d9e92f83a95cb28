"""Simulation: replaying recorded sessions under a strategy and pricing what they send.

``TurnReplay`` drives a session (a runtime's ``SessionHandle`` or a ``LocalSession``) with a
trace's recorded turns; ``LocalSession`` is a session run in-process under a strategy, on
a ``LocalLog`` (a log without a store);
``simulate_trace`` and ``simulate_paths`` price a strategy's calls with the prompt-cache
simulator, and ``compare_endings`` compares two strategies' costs at every call a session
could have ended after; ``synthetic_session`` generates sessions shaped like real Claude Code
sessions.
See ``docs/strategies.md``.
"""

from contextledger.simulation._endings import EndingComparison, compare_endings
from contextledger.simulation._local import LocalLog, LocalSession
from contextledger.simulation._replay import (
    RecordedCall,
    RecordedNote,
    RecordedTurn,
    ReplayClock,
    ReplayedCall,
    TurnReplay,
    describe_actions,
    recorded_turns,
)
from contextledger.simulation._retention import (
    RECENT_CALLS,
    FactMemo,
    Retention,
    RetentionCounter,
    facts_in,
)
from contextledger.simulation._summaries import SummaryMemo
from contextledger.simulation._synthetic import iter_synthetic_session, synthetic_session
from contextledger.simulation._trace import (
    DEFAULT_MODELS,
    DEFAULT_STRATEGIES,
    DEFAULT_WINDOW,
    MANAGEMENT_EVENTS,
    OUTPUT_LIMIT,
    PROVIDERS,
    TRANSCRIPT_SUFFIXES,
    Provider,
    TraceResult,
    priced_model,
    raw_events,
    request_inputs,
    simulate_paths,
    simulate_paths_async,
    simulate_trace,
    simulate_trace_async,
    sized_model,
    strategy_steps,
    trace_result,
    trace_sessions,
    transcripts,
)
from contextledger.simulation._viewdiff import TurnViews, diff_views, turn_views

__all__ = [
    "DEFAULT_MODELS",
    "DEFAULT_STRATEGIES",
    "DEFAULT_WINDOW",
    "MANAGEMENT_EVENTS",
    "OUTPUT_LIMIT",
    "PROVIDERS",
    "RECENT_CALLS",
    "TRANSCRIPT_SUFFIXES",
    "EndingComparison",
    "FactMemo",
    "LocalLog",
    "LocalSession",
    "Provider",
    "RecordedCall",
    "RecordedNote",
    "RecordedTurn",
    "ReplayClock",
    "ReplayedCall",
    "Retention",
    "RetentionCounter",
    "SummaryMemo",
    "TraceResult",
    "TurnReplay",
    "TurnViews",
    "compare_endings",
    "describe_actions",
    "diff_views",
    "facts_in",
    "iter_synthetic_session",
    "priced_model",
    "raw_events",
    "recorded_turns",
    "request_inputs",
    "simulate_paths",
    "simulate_paths_async",
    "simulate_trace",
    "simulate_trace_async",
    "sized_model",
    "strategy_steps",
    "synthetic_session",
    "trace_result",
    "trace_sessions",
    "transcripts",
    "turn_views",
]
