"""Summary calls in a simulation: what a model summarizer would have sent, to be priced.

``PricedSummarizer`` stands in for ``ModelSummarizer`` in a replay. Each summary it is asked
for is recorded as the request ``ModelSummarizer`` would send (``summary_request``: the
session's last request as it was sent, its cache marks and none after, then the instruction)
with the tokens of its answer; the answer itself is the extractive summary of the same head,
so the replay goes on as it would with the extractive summarizer while every summary call is
counted. The simulation prices each call through the prompt-cache simulator, at the time of
the session call whose request needed the compaction and right before it, after the session's
calls before that one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final, Literal

import msgspec

from contextledger.cachesim import sim_request
from contextledger.cachesim._blocks import SimRequest
from contextledger.compaction._summarizers import (
    SUMMARY_OUTPUT_TOKENS,
    ExtractiveSummarizer,
    Summarizer,
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


_ENCODER: Final = msgspec.msgpack.Encoder()


class SummaryMemo:
    """The extractive summarizer, each summary written once: the replays of one trace under
    several strategies and providers compact the same heads again and again. A summary is
    kept under a digest of all it depends on (the head, the template, the previous summary
    and the output limit); keep one memo per trace."""

    max_input_tokens: int | None = None

    def __init__(self) -> None:
        self._writer = ExtractiveSummarizer()
        self._known: dict[bytes, str] = {}

    async def summarize(self, task: SummaryInput) -> str:
        """The extractive summary of ``task``, written unless it was written before."""
        facts = (task.head, task.template, task.previous_summary, task.max_output_tokens)
        key = hashlib.sha256(_ENCODER.encode(facts)).digest()
        text = self._known.get(key)
        if text is None:
            text = self._known[key] = await self._writer.summarize(task)
        return text


class PricedSummarizer:
    """A model summarizer whose model is simulated (see the module docstring); ``extractive``
    writes the answers (a new ``ExtractiveSummarizer`` by default)."""

    #: Like ``ModelSummarizer``: one call reads at most the window of the model compacted for.
    max_input_tokens: int | None = 0

    def __init__(self, extractive: Summarizer | None = None) -> None:
        self._extractive = extractive or ExtractiveSummarizer()
        self._asked: list[SummaryCall | None] = []

    @property
    def calls(self) -> list[SummaryCall]:
        """The calls answered, in the order they were asked for: a compaction summarises its
        chunks concurrently, so they may be answered in another order."""
        return [call for call in self._asked if call is not None]

    async def summarize(self, task: SummaryInput) -> str:
        """The extractive summary of ``task``, with the model request it stands for recorded."""
        request = summary_request(task, max_output_tokens=SUMMARY_OUTPUT_TOKENS)
        slot = len(self._asked)
        self._asked.append(None)
        text = await self._extractive.summarize(task)
        self._asked[slot] = SummaryCall(request, text_tokens(len(text)))
        return text


class TailOnlySummarizer:
    """A compaction that keeps only the tail: every summary is ``TAIL_ONLY_SUMMARY``."""

    max_input_tokens: int | None = None

    async def summarize(self, task: SummaryInput) -> str:
        """``TAIL_ONLY_SUMMARY``, whatever the head."""
        return TAIL_ONLY_SUMMARY
