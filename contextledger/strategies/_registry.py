"""Strategies by name: ``strategy("truncate-500")``, ``strategy("age-truncate-500-keep-3")``.

``STRATEGIES`` maps name patterns to factories; ``N`` and ``K`` in a pattern stand for
non-negative integers, passed to the factory in order. A name holding ``:`` is a transform
named as ``"module.path:function"`` (``named_transform``), run as a view-only strategy under
that name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from contextledger.policy._transform import StrategyError, named_transform
from contextledger.strategies._transforms import (
    age_truncate,
    baseline,
    cap_tool_outputs,
    per_tool_keep_last,
    truncate,
)
from contextledger.strategies._turns import (
    CompactAt,
    CompactOnce,
    DefaultStrategy,
    MimoTiers,
    OpencodeDefault,
    RuntimePolicy,
    Strategy,
    TransformStrategy,
)

StrategyFactory = Callable[..., Strategy]

STRATEGIES: Final[dict[str, StrategyFactory]] = {
    "baseline": lambda: TransformStrategy("baseline", baseline),
    "truncate-N": lambda n: TransformStrategy(f"truncate-{n}", cap_tool_outputs(n)),
    "last-N": lambda n: TransformStrategy(f"last-{n}", truncate(n)),
    "age-truncate-N-keep-K": lambda n, k: TransformStrategy(
        f"age-truncate-{n}-keep-{k}", age_truncate(n, k)
    ),
    "per-tool-keep-last-K": lambda k: TransformStrategy(
        f"per-tool-keep-last-{k}", per_tool_keep_last(k)
    ),
    "compact-at-N": CompactAt,
    "compact-at-N-structured": CompactOnce,
    "runtime": RuntimePolicy,
    "opencode": OpencodeDefault,
    "kilo": OpencodeDefault,
    "mimo-tiers": MimoTiers,
    "default": DefaultStrategy,
}


def _pattern(name: str) -> re.Pattern[str]:
    parts = re.split(r"(?<![A-Za-z])([NK])(?![A-Za-z])", name)
    return re.compile(
        "".join(r"(\d+)" if part in ("N", "K") else re.escape(part) for part in parts)
    )


_PATTERNS: Final = [(_pattern(name), factory) for name, factory in STRATEGIES.items()]


def strategy(name: str) -> Strategy:
    """The strategy ``name`` names (see ``STRATEGIES``); raises ``StrategyError`` for an
    unknown name or bad parameters."""
    if ":" in name:
        return TransformStrategy(name, named_transform(name))
    for pattern, factory in _PATTERNS:
        match = pattern.fullmatch(name)
        if match is None:
            continue
        try:
            return factory(*(int(group) for group in match.groups()))
        except ValueError as exc:
            raise StrategyError(f"strategy {name!r}: {exc}") from exc
    known = ", ".join(STRATEGIES)
    raise StrategyError(f"unknown strategy {name!r}; known: {known}, or 'module.path:function'")
