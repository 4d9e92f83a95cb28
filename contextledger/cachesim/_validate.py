"""Compare simulated cache reads with the ones a provider recorded, call by call."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import msgspec


class ReadGrowthErrors(msgspec.Struct, frozen=True, kw_only=True):
    """Per-call errors (simulated minus recorded cache-read growth, tokens) and the median and
    90th percentile of their absolute values."""

    errors: tuple[int, ...]
    median: float
    p90: float


def read_growth_errors(simulated: Sequence[int], recorded: Sequence[int]) -> ReadGrowthErrors:
    """The error of the simulated cache-read growth against the recorded one, per call.

    The growth of call ``i`` is its ``cache_read`` minus call ``i - 1``'s (the first call's is
    its ``cache_read``). The median is ``statistics.median`` of the absolute errors; the p90
    is their nearest-rank 90th percentile. Both are 0 for no calls.
    """
    if len(simulated) != len(recorded):
        raise ValueError("simulated and recorded must have one value per call")
    errors: list[int] = []
    prev_sim = prev_rec = 0
    for sim, rec in zip(simulated, recorded, strict=True):
        errors.append((sim - prev_sim) - (rec - prev_rec))
        prev_sim, prev_rec = sim, rec
    if not errors:
        return ReadGrowthErrors(errors=(), median=0.0, p90=0.0)
    absolute = sorted(abs(e) for e in errors)
    p90 = float(absolute[math.ceil(0.9 * len(absolute)) - 1])
    return ReadGrowthErrors(
        errors=tuple(errors), median=float(statistics.median(absolute)), p90=p90
    )
