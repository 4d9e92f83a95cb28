"""When compacting early pays: the economic compaction threshold (``cadence = "economic"``).

With a prompt cache, each call reads the whole cached prefix at the read price ``r`` (a
multiple of the input price), so a view that keeps growing costs more per call the longer it
gets. A compaction shrinks it to ``K`` tokens (the summary and the kept tail) at a fixed cost
``F``: the kept tokens written again (``w·K``, ``w`` the write multiplier) plus the summary
call's output (``o·S``, ``o`` the output multiplier, ``S`` the summary's expected length). If
the view grows by ``g`` tokens per call and is compacted whenever it reaches ``T``, a cycle
lasts ``(T - K) / g`` calls and costs, per call::

    r·K + r·(T - K)/2 + F·g/(T - K)

which is least at ``T - K = sqrt(2·F·g / r)`` (the economic-order-quantity rule). So the view
is compacted once it passes ``K + sqrt(2·F·g/r)``, and never later than the usable window (the
overflow rule still applies). The dearer a rewrite is next to a read, and the faster the view
grows, the larger it is let grow before a compaction. Reading the prefix for the summary call
(``r·T``) is left out: it is small next to ``w·K`` and would only move the threshold a little
later.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Final

import msgspec

from contextledger.config import Config
from contextledger.history._projection import History
from contextledger.policy._compaction import CHUNK_OUTPUT_TOKENS, tail_budget, text_tokens
from contextledger.policy._overflow import usable
from contextledger.prices._multipliers import Price, price_for
from contextledger.vocabulary._messages import ModelMessage
from contextledger.vocabulary._models import Model

#: The length (tokens) a compaction's summary is expected to have: Kilo's cap on a summary
#: chunk's output (``CHUNK_OUTPUT_TOKENS``).
SUMMARY_TOKENS: Final = CHUNK_OUTPUT_TOKENS
#: A threshold no view reaches.
NEVER: Final = 2**62

_json = msgspec.json.Encoder()


def estimate_view_tokens(view: Sequence[ModelMessage]) -> int:
    """About four characters per token of the view's JSON (opencode's ``Token.estimate``)."""
    return text_tokens(len(_json.encode(list(view))))


def economic_threshold(
    *, kept_tokens: int, growth_per_call: float, price: Price, summary_tokens: int = SUMMARY_TOKENS
) -> int:
    """The view size (tokens) past which compacting costs less per call than keeping the
    grown prefix (see the module docstring). ``kept_tokens`` is the view's size right after a
    compaction; without growth (or without a cache discount) it is ``NEVER``."""
    if growth_per_call <= 0 or price.cache_read <= 0:
        return NEVER
    fixed = price.cache_write * kept_tokens + price.output * summary_tokens
    return kept_tokens + math.ceil(math.sqrt(2 * fixed * growth_per_call / price.cache_read))


def step_growth(view: Sequence[ModelMessage]) -> list[int]:
    """The tokens each model step added to ``view`` (estimated as ``estimate_view_tokens``
    does, message by message): an assistant message and the messages after it, up to the next
    assistant message. What comes before the first one (the opening request) is no step."""
    return _steps(view, [_message_tokens(m) for m in view])


def _message_tokens(message: ModelMessage) -> int:
    return text_tokens(len(_json.encode(message)))


def _steps(view: Sequence[ModelMessage], sizes: Sequence[int]) -> list[int]:
    steps: list[int] = []
    for message, size in zip(view, sizes, strict=True):
        if message.role == "assistant":
            steps.append(size)
        elif steps:
            steps[-1] += size
    return steps


def compact_early(
    view_tokens: int,
    growth_per_call: float,
    *,
    kept_tokens: int,
    price: Price,
    summary_tokens: int = SUMMARY_TOKENS,
) -> bool:
    """Whether a view of ``view_tokens`` growing by ``growth_per_call`` tokens a call has
    passed its economic threshold."""
    if view_tokens <= kept_tokens:
        return False
    threshold = economic_threshold(
        kept_tokens=kept_tokens,
        growth_per_call=growth_per_call,
        price=price,
        summary_tokens=summary_tokens,
    )
    return view_tokens > threshold


def early_compaction_due(view: Sequence[ModelMessage], model: Model, config: Config) -> bool:
    """Under ``compaction.cadence = "economic"``: whether ``view`` (the model view about to be
    sent to ``model``; its size the sum of its messages' estimates) has passed its economic
    threshold, with the kept size taken as the tail budget plus ``SUMMARY_TOKENS``, the growth
    per call as the median step of the view (``step_growth``: one very large message is a
    jump, not the pace the view grows at) and the model's cache prices (``price_for``). Always
    False under ``cadence = "window"``."""
    if config.compaction.cadence != "economic":
        return False
    sizes = [_message_tokens(m) for m in view]  # each message encoded once
    steps = _steps(view, sizes)
    if not steps:
        return False
    kept = tail_budget(usable(model, config), config.compaction) + SUMMARY_TOKENS
    return compact_early(
        sum(sizes),
        statistics.median(steps),
        kept_tokens=kept,
        price=price_for(model.provider_id, model.model_id),
    )


def early_compaction_refused(history: History, agent_id: str) -> bool:
    """Whether the newest compaction of ``agent_id``'s slice was rolled back and no step of
    the agent has finished since: an early compaction is not tried again, request after
    request, until the conversation has moved on."""
    compactions = [
        c
        for c in history.state.compactions.values()
        if history.message(c.request_message_id).agent_id == agent_id
    ]
    if not compactions:
        return False
    newest = max(compactions, key=lambda c: c.request_message_id)
    if newest.status != "rolled_back":
        return False
    return not any(
        m.id > newest.request_message_id
        and m.role == "assistant"
        and not m.summary
        and m.finish is not None
        and m.agent_id == agent_id
        for m in history.messages
    )
