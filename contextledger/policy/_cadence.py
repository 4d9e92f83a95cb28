"""When compacting early pays: the economic compaction threshold (``cadence = "economic"``).

With a prompt cache, each call reads the whole cached prefix at the read price ``r`` (a
multiple of the input price), so a view that keeps growing costs more per call the longer it
gets. A compaction shrinks it to ``K = S + L`` tokens (the summary, ``S``, and the kept tail,
``L``) and costs, in input-price units (``compaction_cost``)::

    F(T) = a·(T - L) + o·S + w·K

the summary call reading the head (the view less its tail) from the cache at ``a = r`` (it
sends the view as the last call did, through the head's last message), writing ``S`` tokens
at the output multiplier ``o``, and the next call writing the compacted view again at the
write multiplier ``w``. ``S`` is the newest summary's actual size, or ``SUMMARY_TOKENS``
before the first.

If the view grows by ``g`` tokens per call and is compacted whenever it reaches ``T``, a cycle
lasts ``(T - K) / g`` calls and costs, per call::

    a·g + (a·S + o·S + w·K)·g/(T - K) + r·K + r·(T - K)/2

which is least at ``T - K = sqrt(2·(a·S + o·S + w·K)·g / r)`` (the economic-order-quantity
rule, ``economic_threshold``). That holds for a session that goes on; one that may end soon
must also earn the compaction back before it ends (``compaction_pays``): over the calls still
to come, estimated as the calls made so far (a session that has run ``n`` calls is as likely
as not to run ``n`` more), the reads saved, ``r·(T - K)`` a call, must exceed ``F(T)``. So a
short session is sent as it is, as ``baseline`` sends it, unless compacting pays; the overflow
rule still compacts at the usable window.

**A cold cache** (the last call finished longer ago than the price's TTL, ``ttl_s``) changes
the sums: keeping the view, the next call writes all of it again, ``w·T``, not ``r·T``; and
the summary call finds nothing cached either, so it writes the head, ``w·(T - L)``, not
``r·(T - L)`` (``w`` is 1 where writes cost no more than input). Over ``n`` calls to come::

    keep     = w·T + (n - 1)·r·T
    compact  = w·(T - L) + o·S + w·K + (n - 1)·r·K

and since ``T - L + K = T + S``, compacting saves ``(n - 1)·r·(T - K) - (w + o)·S``: the whole
view is written once either way, and the reads the later calls save must pay for writing the
summary out and in again (``cold_compaction_pays``). Those reads are saved only until the
view would have been compacted anyway. Below the threshold ``Θ`` the view is ``(T - K)/g``
calls into a cycle of ``(Θ - K)/g`` (above), and what compacting it saves over the long run is
the difference between the rest of a session from ``T`` and from ``K``: the cycle's cost per
call for those calls less their reads, which at the threshold (where ``F(Θ)·g/(Θ - K)`` equals
``r·(Θ - K)/2``) is::

    r·(T - K)·((Θ - T) + (Θ - K)) / (2·g)

so a cold compaction below ``Θ`` must also save more than ``(w + o)·S`` by that. The cache's
expiry is the cheapest moment to shrink the view (whenever compacting pays on a warm cache, it
pays on a cold one).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import takewhile
from typing import Final

import msgspec

from contextledger.config import Config
from contextledger.history._projection import History
from contextledger.policy._compaction import CHUNK_OUTPUT_TOKENS, tail_budget, text_tokens
from contextledger.policy._overflow import usable
from contextledger.prices._multipliers import Price, price_for
from contextledger.vocabulary._messages import ModelMessage
from contextledger.vocabulary._models import Model

#: The length (tokens) of a slice's first summary, before one has been written: Kilo's cap on
#: a summary chunk's output (``CHUNK_OUTPUT_TOKENS``). Later ones are expected to be as long as
#: the newest summary in the view.
SUMMARY_TOKENS: Final = CHUNK_OUTPUT_TOKENS
#: A threshold no view reaches.
NEVER: Final = 2**62

_json = msgspec.json.Encoder()


class Economics(msgspec.Struct, frozen=True, kw_only=True):
    """What a compaction of a slice would keep and cost: ``tail_tokens`` (``L``) kept
    verbatim and a summary of ``summary_tokens`` (``S``), at ``price``."""

    tail_tokens: int
    summary_tokens: int = SUMMARY_TOKENS
    price: Price

    @property
    def kept_tokens(self) -> int:
        """``K``: the view's size right after the compaction."""
        return self.tail_tokens + self.summary_tokens


def estimate_view_tokens(view: Sequence[ModelMessage]) -> int:
    """About four characters per token of the view's JSON (opencode's ``Token.estimate``)."""
    return text_tokens(len(_json.encode(list(view))))


def compaction_cost(view_tokens: int, economics: Economics) -> float:
    """``F(T)`` (see the module docstring): what compacting a ``view_tokens`` view costs, in
    input-price units, counting the summary call's input and output and the rewrite."""
    price = economics.price
    head = max(0, view_tokens - economics.tail_tokens)
    return (
        price.cache_read * head
        + price.output * economics.summary_tokens
        + price.cache_write * economics.kept_tokens
    )


def economic_threshold(*, growth_per_call: float, economics: Economics) -> int:
    """The view size (tokens) past which compacting costs less per call than keeping the
    grown prefix (see the module docstring); without growth (or without a cache discount)
    it is ``NEVER``."""
    price = economics.price
    if growth_per_call <= 0 or price.cache_read <= 0:
        return NEVER
    kept = economics.kept_tokens
    fixed = compaction_cost(kept, economics)  # a·S + o·S + w·K
    return kept + math.ceil(math.sqrt(2 * fixed * growth_per_call / price.cache_read))


def compaction_pays(view_tokens: int, *, calls_to_come: int, economics: Economics) -> bool:
    """Whether the reads a compaction saves over ``calls_to_come`` calls (``r·(T - K)`` each)
    exceed what it costs (``compaction_cost``)."""
    saved = calls_to_come * economics.price.cache_read * (view_tokens - economics.kept_tokens)
    return saved > compaction_cost(view_tokens, economics)


def cold_compaction_pays(
    view_tokens: int,
    growth_per_call: float,
    *,
    calls_to_come: int | Callable[[], int],
    economics: Economics,
) -> bool:
    """On a cold cache: whether compacting a view of ``view_tokens``, growing by
    ``growth_per_call`` tokens a call, saves more than writing its summary out and in again
    (``(w + o)·S``; see the module docstring), both over the calls to come (``calls_to_come``,
    a callable called only when the rest holds) and, below the economic threshold, over the
    rest of the cycle. False when the view is no larger than what a compaction keeps."""
    price, kept = economics.price, economics.kept_tokens
    if view_tokens <= kept:
        return False
    rewrite = (price.cache_write + price.output) * economics.summary_tokens
    threshold = economic_threshold(growth_per_call=growth_per_call, economics=economics)
    if view_tokens < threshold < NEVER:
        rest = (threshold - view_tokens) + (threshold - kept)
        if price.cache_read * (view_tokens - kept) * rest / (2 * growth_per_call) <= rewrite:
            return False
    calls = calls_to_come if isinstance(calls_to_come, int) else calls_to_come()
    return max(0, calls - 1) * price.cache_read * (view_tokens - kept) > rewrite


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
    calls_to_come: int | Callable[[], int],
    economics: Economics,
    cold: bool = False,
) -> bool:
    """Whether a view of ``view_tokens`` growing by ``growth_per_call`` tokens a call has
    passed its economic threshold and compacting it pays over ``calls_to_come`` calls (a
    callable is called only once the threshold is passed); on a ``cold`` cache, whether
    compacting pays then (``cold_compaction_pays``), whatever the threshold."""
    if view_tokens <= economics.kept_tokens:
        return False
    if cold:
        return cold_compaction_pays(
            view_tokens, growth_per_call, calls_to_come=calls_to_come, economics=economics
        )
    threshold = economic_threshold(growth_per_call=growth_per_call, economics=economics)
    if view_tokens <= threshold:
        return False
    calls = calls_to_come if isinstance(calls_to_come, int) else calls_to_come()
    return compaction_pays(view_tokens, calls_to_come=calls, economics=economics)


@dataclass(frozen=True, kw_only=True)
class EarlyCompaction:
    """What the economic cadence weighs for a view (``early_compaction``): its size, the
    tokens it grows by a call, what a compaction would keep and cost, the calls to come
    (``calls_to_come``, called only once the threshold is passed) and whether the prompt cache
    has expired (``cold``)."""

    view_tokens: int
    growth_per_call: float
    economics: Economics
    calls_to_come: Callable[[], int]
    cold: bool = False

    def due(self, freed: int = 0) -> bool:
        """Whether compacting the view, ``freed`` tokens smaller, pays (``compact_early``)."""
        return compact_early(
            self.view_tokens - freed,
            self.growth_per_call,
            calls_to_come=self.calls_to_come,
            economics=self.economics,
            cold=self.cold,
        )


def early_compaction(
    history: History,
    view: Sequence[ModelMessage],
    model: Model,
    config: Config,
    *,
    agent_id: str,
    cold: bool = False,
) -> EarlyCompaction | None:
    """What the economic cadence weighs for ``view`` (``agent_id``'s model view about to be
    sent to ``model``; its size the sum of its messages' estimates): the tail is the tail
    budget; the summary as long as the newest one in the view (``SUMMARY_TOKENS`` without
    one); the growth per call the median step of the view (``step_growth``: one very large
    message is a jump, not the pace the view grows at); the calls to come as many as the
    agent's finished steps so far; the prices the model's (``price_for``); ``cold`` whether
    the prompt cache has expired. None under
    ``cadence = "window"`` or before the view's first step."""
    if config.compaction.cadence != "economic":
        return None
    sizes = [_message_tokens(m) for m in view]  # each message encoded once
    steps = _steps(view, sizes)
    if not steps:
        return None
    summary = sum(
        size
        for m, size in zip(view, sizes, strict=True)
        if _is_summary(history, m.source_id, agent_id)
    )
    return EarlyCompaction(
        view_tokens=sum(sizes),
        growth_per_call=statistics.median(steps),
        economics=Economics(
            tail_tokens=tail_budget(usable(model, config), config.compaction),
            summary_tokens=summary or SUMMARY_TOKENS,
            price=price_for(model.provider_id, model.model_id),
        ),
        calls_to_come=lambda: history.finished_steps(agent_id),
        cold=cold,
    )


def early_compaction_due(
    history: History, view: Sequence[ModelMessage], model: Model, config: Config, *, agent_id: str
) -> bool:
    """Under ``compaction.cadence = "economic"``: whether ``view`` has passed its economic
    threshold and compacting it pays (``compact_early`` of ``early_compaction``) on a warm
    prompt cache; ``policy._decisions.compaction_due``, which the runtime calls, also weighs
    an expired one. Always False under ``cadence = "window"``."""
    early = early_compaction(history, view, model, config, agent_id=agent_id)
    return early is not None and early.due()


def _is_summary(history: History, message_id: str, agent_id: str) -> bool:
    """Whether ``message_id`` is a summary of a completed compaction of ``agent_id``'s slice
    (a summary names its compaction's request as its parent)."""
    try:
        message = history.message(message_id)
    except KeyError:
        return False
    compaction = history.state.compactions.get(message.parent_id or "") if message.summary else None
    return (
        compaction is not None
        and compaction.status == "completed"
        and message_id in compaction.summary_message_ids
        and history.message(compaction.request_message_id).agent_id == agent_id
    )


def early_compaction_refused(history: History, agent_id: str) -> bool:
    """Whether the newest compaction of ``agent_id``'s slice was rolled back and no step of
    the agent has finished since: an early compaction is not tried again, request after
    request, until the conversation has moved on."""
    # Compactions and messages are kept in id order: only the newest are read.
    newest = next(
        (
            c
            for c in reversed(history.state.compactions.values())
            if history.message(c.request_message_id).agent_id == agent_id
        ),
        None,
    )
    if newest is None or newest.status != "rolled_back":
        return False
    since = newest.request_message_id
    return not any(
        m.role == "assistant" and not m.summary and m.finish is not None and m.agent_id == agent_id
        for m in takewhile(lambda m: m.id > since, reversed(history.messages))
    )
