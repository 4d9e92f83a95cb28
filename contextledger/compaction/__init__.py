"""Compaction: the summarizers that write a compacted head's summary, and the facts a summary
must keep."""

from contextledger.compaction.facts import (
    CommandRun,
    FileChange,
    FileRead,
    LineRange,
    PlanStep,
    SessionFacts,
    exact_strings,
    extract_facts,
)
from contextledger.compaction.summarizers import (
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
    SummaryInput,
    extractive_summary,
    response_text,
)

__all__ = [
    "CommandRun",
    "ExtractiveSummarizer",
    "FileChange",
    "FileRead",
    "LineRange",
    "ModelSummarizer",
    "PlanStep",
    "SessionFacts",
    "Summarizer",
    "SummaryInput",
    "exact_strings",
    "extract_facts",
    "extractive_summary",
    "response_text",
]
