"""Compaction and pruning as a session runs them: ``compact`` (request, plan, summarise,
complete or roll back), ``compact_while_due`` (what a session does before a request),
``prune`` (the after-turn prune), the summarizers that write a compacted head's summary and
the facts a summary must keep."""

from contextledger.compaction._compactor import (
    CompactionExhausted,
    CompactionResult,
    compact,
    compact_while_due,
    request_compaction,
)
from contextledger.compaction._facts import (
    CommandRun,
    FileChange,
    FileRead,
    LineRange,
    PlanStep,
    SessionFacts,
    exact_strings,
    extract_facts,
    walk_facts,
)
from contextledger.compaction._pruning import prune
from contextledger.compaction._summarizers import (
    SUMMARY_OPENING,
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
    SummaryInput,
    extractive_summary,
    response_text,
)

__all__ = [
    "SUMMARY_OPENING",
    "CommandRun",
    "CompactionExhausted",
    "CompactionResult",
    "ExtractiveSummarizer",
    "FileChange",
    "FileRead",
    "LineRange",
    "ModelSummarizer",
    "PlanStep",
    "SessionFacts",
    "Summarizer",
    "SummaryInput",
    "compact",
    "compact_while_due",
    "exact_strings",
    "extract_facts",
    "extractive_summary",
    "prune",
    "request_compaction",
    "response_text",
    "walk_facts",
]
