"""Summary calls in a simulation: what a model summarizer would have sent, to be priced.

``PricedSummarizer`` stands in for ``ModelSummarizer`` in a replay. Each summary it is asked
for is recorded as the request ``ModelSummarizer`` would send (``summary_request``: the
session's pinned prefix and cache marks, the head as sent, the instruction) with the tokens
of its answer; the answer itself is the extractive summary of the same head, so the replay
goes on as it would with the extractive summarizer while every summary call is counted. The
simulation prices each call through the prompt-cache simulator, at the time of the session
call whose request needed the compaction, in order with the session's own calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from contextledger.cachesim import sim_request
from contextledger.cachesim._blocks import SimRequest
from contextledger.compaction._summarizers import (
    SUMMARY_OUTPUT_TOKENS,
    ExtractiveSummarizer,
    SummaryInput,
    summary_request,
)
from contextledger.policy._compaction import text_tokens
from contextledger.vocabulary._requests import Request

#: Which summarizer a replay compacts with: ``extractive`` (no model call, nothing to price),
#: ``model`` (``PricedSummarizer``: a model call per summary, priced) or ``tail-only``
#: (``TailOnlySummarizer``: no summary at all, only the kept tail; a baseline for retention).
SummarizerName = Literal["extractive", "model", "tail-only"]
SUMMARIZERS: Final[tuple[SummarizerName, ...]] = ("extractive", "model", "tail-only")
#: What a tail-only compaction puts where the summary would be: a note that holds no fact of
#: the head (a summary cannot be empty).
TAIL_ONLY_SUMMARY: Final = "The earlier conversation was left out; its most recent turns follow."


@dataclass(frozen=True)
class SummaryCall:
    """One summary request a model summarizer would have sent, and its answer's tokens."""

    request: Request
    output_tokens: int

    def sim(self, at: float) -> SimRequest:
        """The call as the cache simulator sees it, sent at ``at`` seconds."""
        return sim_request(self.request, at, self.output_tokens)


class PricedSummarizer:
    """A model summarizer whose model is simulated (see the module docstring)."""

    #: Like ``ModelSummarizer``: one call reads at most the window of the model compacted for.
    max_input_tokens: int | None = 0

    def __init__(self) -> None:
        self._extractive = ExtractiveSummarizer()
        self.calls: list[SummaryCall] = []

    async def summarize(self, task: SummaryInput) -> str:
        """The extractive summary of ``task``, with the model request it stands for recorded."""
        request = summary_request(task, max_output_tokens=SUMMARY_OUTPUT_TOKENS)
        text = await self._extractive.summarize(task)
        self.calls.append(SummaryCall(request, text_tokens(len(text))))
        return text


class TailOnlySummarizer:
    """A compaction that keeps only the tail: every summary is ``TAIL_ONLY_SUMMARY``."""

    max_input_tokens: int | None = None

    async def summarize(self, task: SummaryInput) -> str:
        """``TAIL_ONLY_SUMMARY``, whatever the head."""
        return TAIL_ONLY_SUMMARY
