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
from collections.abc import Sequence
from typing import Final

import msgspec

from contextledger.config import Config
from contextledger.history.messages import ModelMessage
from contextledger.policy.compaction import tail_budget, text_tokens
from contextledger.policy.overflow import Model, usable
from contextledger.policy.prices import Price, price_for

#: The length (tokens) a compaction's summary is expected to have: Kilo's cap on a summary
#: chunk's output (``CHUNK_OUTPUT_TOKENS``).
SUMMARY_TOKENS: Final = 2_048
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


def compact_early(
    view_tokens: int,
    calls: int,
    *,
    kept_tokens: int,
    price: Price,
    summary_tokens: int = SUMMARY_TOKENS,
) -> bool:
    """Whether a view of ``view_tokens`` holding ``calls`` assistant steps has passed its
    economic threshold; the growth per call is the view's average (``view_tokens / calls``),
    so a view that grew fast compacts later, in fewer, larger cycles."""
    if calls < 1 or view_tokens <= kept_tokens:
        return False
    threshold = economic_threshold(
        kept_tokens=kept_tokens,
        growth_per_call=view_tokens / calls,
        price=price,
        summary_tokens=summary_tokens,
    )
    return view_tokens > threshold


def early_compaction_due(view: Sequence[ModelMessage], model: Model, config: Config) -> bool:
    """Under ``compaction.cadence = "economic"``: whether ``view`` (the model view about to be
    sent to ``model``) has passed its economic threshold, with the kept size taken as the
    tail budget plus ``SUMMARY_TOKENS`` and the model's cache prices (``price_for``). Always
    False under ``cadence = "window"``."""
    if config.compaction.cadence != "economic":
        return False
    kept = tail_budget(usable(model, config), config.compaction) + SUMMARY_TOKENS
    calls = sum(1 for message in view if message.role == "assistant")
    return compact_early(
        estimate_view_tokens(view),
        calls,
        kept_tokens=kept,
        price=price_for(model.provider_id, model.model_id),
    )
