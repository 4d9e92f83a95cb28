"""Per-provider prompt-cache simulation of a session.

Cached prefixes are entries keyed by the prefix hash up to a block boundary; an entry lives
until ``expires`` and a hit moves that to ``now + ttl`` (refresh on read). Every family reads
a request's ``processed_blocks`` (on the Claude models that drop it, without the thinking of
earlier turns).

- ``anthropic`` (and Bedrock): at most the first four breakpoints are honoured. For each, the
  longest live entry at the breakpoint's boundary or one of the 20 boundaries before it is a
  hit; the longest hit over all breakpoints is read and every hit entry refreshed. Each
  breakpoint whose prefix reaches the model minimum is stored; the tokens between the read
  and the last stored breakpoint are written, each segment at the TTL of the breakpoint that
  ends it (1.25x input for 5 minutes, 2x for 1 hour); the rest is uncached. An entry that
  ends past the tools and system blocks is kept under the request's tool choice: a change of
  it invalidates the cached messages, not the tools and system blocks.
- ``openai``: every prefix is stored; the hit is the longest live prefix of at least 1,024
  tokens, floored to 1,024 + 128k. No write fee unless the entry has a ``cache_write`` price
  (GPT-5.6 and later: 1.25x), in which case the prompt beyond the read is written.
- ``gemini`` (implicit): as ``openai`` with the model minimum and no 128-token flooring.
- ``deepseek``: units are stored at the end of each request's prompt and at the longest
  prefix it shares with any earlier request; the hit is the longest live unit the prompt
  fully contains. No write fee.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from contextledger.cachesim._blocks import Block, PrefixChain, SimRequest, Ttl, processed_blocks
from contextledger.prices._tables import ModelPrice

TTL_S: dict[Ttl, int] = {"5m": 300, "1h": 3600}
ANTHROPIC_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK = 20
OPENAI_MIN = 1024
OPENAI_STEP = 128


class RequestCost(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens and USD of one call (or of a session, summed). ``cache_write_1h`` is the part of
    ``cache_write`` written with a one-hour lifetime."""

    uncached: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    output: int = 0
    input_cost: float = 0.0
    output_cost: float = 0.0

    @property
    def cost(self) -> float:
        """Input and output USD."""
        return self.input_cost + self.output_cost

    def __add__(self, other: RequestCost) -> RequestCost:
        return RequestCost(
            uncached=self.uncached + other.uncached,
            cache_write=self.cache_write + other.cache_write,
            cache_write_1h=self.cache_write_1h + other.cache_write_1h,
            cache_read=self.cache_read + other.cache_read,
            output=self.output + other.output,
            input_cost=self.input_cost + other.input_cost,
            output_cost=self.output_cost + other.output_cost,
        )


class SessionCost(msgspec.Struct, frozen=True, kw_only=True):
    """Per-call costs, their totals, and the session's lower bound in USD (see
    ``lower_bound``)."""

    requests: tuple[RequestCost, ...]
    total: RequestCost
    lower_bound: float


class _Cache:
    """Entries by prefix key: (expiry, ttl)."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[float, int]] = {}

    def live(self, key: str, now: float) -> bool:
        entry = self.entries.get(key)
        return entry is not None and now < entry[0]

    def refresh(self, key: str, now: float) -> None:
        ttl = self.entries[key][1]
        self.entries[key] = (now + ttl, ttl)

    def store(self, key: str, now: float, ttl: int) -> None:
        old = self.entries.get(key)
        if old is not None and now < old[0] and old[0] >= now + ttl:
            return
        self.entries[key] = (now + ttl, ttl)


def _cost(
    price: ModelPrice, prompt: int, read: int, write: int, write_1h: int, output: int
) -> RequestCost:
    write_5m = write - write_1h
    rate_5m = price.cache_write if price.cache_write is not None else price.input
    rate_1h = price.cache_write_1h if price.cache_write_1h is not None else rate_5m
    uncached = prompt - read - write
    usd = uncached * price.input + read * price.cache_read + write_5m * rate_5m
    usd += write_1h * rate_1h
    return RequestCost(
        uncached=uncached,
        cache_write=write,
        cache_write_1h=write_1h,
        cache_read=read,
        output=output,
        input_cost=usd / 1e6,
        output_cost=output * price.output / 1e6,
    )


def _prompt(pre: list[tuple[str, int]]) -> int:
    """A request's prompt tokens: the count of its longest prefix, itself."""
    return pre[-1][1] if pre else 0


def _by_tool_choice(req: SimRequest, pre: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Anthropic's prefixes of ``req``: those past its tools and system blocks keyed with its
    tool choice too, when it sets one (a request that sets none keeps the plain keys)."""
    if req.tool_choice is None:
        return pre
    tag = f"|tool_choice={req.tool_choice}"
    head = req.prefix_blocks
    return [(key if j < head else key + tag, tokens) for j, (key, tokens) in enumerate(pre)]


def _anthropic(
    req: SimRequest,
    blocks: tuple[Block, ...],
    pre: list[tuple[str, int]],
    cache: _Cache,
    price: ModelPrice,
) -> RequestCost:
    """``req``'s cost, ``blocks`` its ``processed_blocks`` and ``pre`` their prefixes."""
    now = req.at
    pre = _by_tool_choice(req, pre)
    marks = [(i, b.breakpoint) for i, b in enumerate(blocks) if b.breakpoint is not None]
    marks = marks[:ANTHROPIC_BREAKPOINTS]
    hit = -1
    hits: set[str] = set()
    for b, _ in marks:
        for j in range(b, max(-1, b - ANTHROPIC_LOOKBACK - 1), -1):
            if cache.live(pre[j][0], now):
                hits.add(pre[j][0])
                hit = max(hit, j)
                break
    for key in hits:
        cache.refresh(key, now)
    read = pre[hit][1] if hit >= 0 else 0
    write = write_1h = 0
    cursor = read
    for b, ttl in marks:
        key, tokens = pre[b]
        if tokens < price.min_prefix:
            continue
        if tokens > cursor:
            write += tokens - cursor
            write_1h += tokens - cursor if ttl == "1h" else 0
            cursor = tokens
        cache.store(key, now, TTL_S[ttl])
    return _cost(price, _prompt(pre), read, write, write_1h, req.output_tokens)


def _implicit(
    req: SimRequest,
    pre: list[tuple[str, int]],
    cache: _Cache,
    price: ModelPrice,
    ttl: int,
    step: int,
) -> RequestCost:
    now = req.at
    read = 0
    for key, tokens in reversed(pre):
        if tokens >= price.min_prefix and cache.live(key, now):
            read = price.min_prefix + (tokens - price.min_prefix) // step * step
            break
    for key, _ in pre:
        cache.store(key, now, ttl)
    prompt = _prompt(pre)
    charged = price.cache_write is not None and prompt >= price.min_prefix
    write = prompt - read if charged else 0
    return _cost(price, prompt, read, write, 0, req.output_tokens)


def _deepseek(
    req: SimRequest,
    pre: list[tuple[str, int]],
    units: _Cache,
    seen: set[str],
    price: ModelPrice,
    ttl: int,
) -> RequestCost:
    now = req.at
    read = 0
    for key, tokens in reversed(pre):
        if units.live(key, now):
            units.refresh(key, now)
            read = tokens
            break
    common = [p for p in pre if p[0] in seen]
    ends = [common[-1]] if common else []
    for key, tokens in [*ends, *pre[-1:]]:
        if tokens >= price.min_prefix:
            units.store(key, now, ttl)
    seen.update(k for k, _ in pre)
    return _cost(price, _prompt(pre), read, 0, 0, req.output_tokens)


class PromptCache:
    """One provider's prompt cache, charged call by call: ``charge(request)`` applies
    ``price.family``'s rules to the next call (in time order) and returns its cost, updating
    what is cached. ``simulate`` is this over a whole session; a server that answers calls as
    they arrive keeps one per model. ``ttl_s`` overrides
    the implicit-cache lifetime as in ``simulate``."""

    def __init__(self, price: ModelPrice, *, ttl_s: int | None = None) -> None:
        self.price = price
        self.ttl = ttl_s if ttl_s is not None else price.ttl_s
        self._cache = _Cache()
        self._seen: set[str] = set()
        self._prefixes = PrefixChain()

    def charge(self, request: SimRequest) -> RequestCost:
        """The cost of ``request`` given every call charged before it."""
        price = self.price
        blocks = processed_blocks(request)
        pre = self._prefixes(blocks)
        if price.family == "anthropic":
            return _anthropic(request, blocks, pre, self._cache, price)
        if price.family == "openai":
            return _implicit(request, pre, self._cache, price, self.ttl, OPENAI_STEP)
        if price.family == "gemini":
            return _implicit(request, pre, self._cache, price, self.ttl, 1)
        return _deepseek(request, pre, self._cache, self._seen, price, self.ttl)


def simulate(
    requests: Sequence[SimRequest], price: ModelPrice, *, ttl_s: int | None = None
) -> SessionCost:
    """Simulate the session ``requests`` (in time order) under ``price.family``'s rules.
    ``ttl_s`` overrides the implicit-cache lifetime of OpenAI (86,400 for ``"24h"``
    retention), Gemini and DeepSeek; Anthropic lifetimes come from the breakpoints."""
    cache = PromptCache(price, ttl_s=ttl_s)
    costs = [cache.charge(req) for req in requests]
    total = sum(costs, RequestCost())
    return SessionCost(requests=tuple(costs), total=total, lower_bound=lower_bound(requests, price))


def _shared(pre: list[tuple[str, int]], keys: set[str]) -> int:
    for key, tokens in reversed(pre):
        if key in keys:
            return tokens
    return 0


def bound_shares(requests: Sequence[SimRequest], family: str) -> list[tuple[int, int, int]]:
    """For each request of a session on a provider of ``family``: its prompt tokens, and the
    tokens of the longest prefix (at a block boundary) it shares with any earlier request and
    with any later one. Its blocks are those the model reads (``processed_blocks``), and on
    Anthropic its messages are keyed by its tool choice: no request could read past either."""
    chain = PrefixChain()
    pres = [chain(processed_blocks(r)) for r in requests]
    if family == "anthropic":
        pres = [_by_tool_choice(r, pre) for r, pre in zip(requests, pres, strict=True)]
    later: list[int] = [0] * len(pres)
    keys: set[str] = set()
    for i in range(len(pres) - 1, -1, -1):
        later[i] = _shared(pres[i], keys)
        keys.update(k for k, _ in pres[i])
    shares: list[tuple[int, int, int]] = []
    keys = set()
    for pre, repeated_later in zip(pres, later, strict=True):
        shares.append((_prompt(pre), _shared(pre, keys), repeated_later))
        keys.update(k for k, _ in pre)
    return shares


def lower_bound(requests: Sequence[SimRequest], price: ModelPrice, *, output: bool = True) -> float:
    """The least the session could cost, in USD (without ``output``: its input side only,
    to compare with a billed input cost).

    For call ``i`` with ``P`` prompt tokens, let ``L`` be the tokens of the longest prefix (at
    a block boundary) it shares with any earlier call and ``R`` the longest it shares with any
    later call. Its bound is ``L`` tokens at the cache-read price, ``P - L`` at the uncached
    price, plus, where the provider charges writes, the five-minute write surcharge (write
    price minus input price) on the ``max(0, R - L)`` new tokens a later call repeats, plus
    its output tokens at the output price (``L``, ``P`` and ``R``: ``bound_shares``). TTLs,
    minimum prefixes, breakpoint limits and OpenAI's 128-token flooring are ignored, so the
    bound is never above ``simulate``'s cost; Anthropic's keying of the messages by tool
    choice and its dropping of earlier thinking are kept (no request could read past them).
    """
    surcharge = price.cache_write - price.input if price.cache_write is not None else 0.0
    usd = 0.0
    shares = bound_shares(requests, price.family)
    for req, (prompt, earlier, repeated_later) in zip(requests, shares, strict=True):
        usd += earlier * price.cache_read + (prompt - earlier) * price.input
        usd += max(0, repeated_later - earlier) * surcharge
        if output:
            usd += req.output_tokens * price.output
    return usd / 1e6
