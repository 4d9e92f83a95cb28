"""Two strategies compared at every call a session could have ended after.

A strategy decides online: at call ``k`` it cannot know whether the session ends there. So
what it costs against another is not one number but one per call (``TraceResult.running_costs``:
what the session would have cost had it ended after that call), and a strategy that acts
(a compaction, a trim) pays at once for a saving that comes later: a session that ends right
after it costs more than doing nothing. ``compare_endings`` sums that up: at how many endings
``ours`` cost more, by how much at worst, and the ratio of their costs with every ending as
likely as any other (``mean_ratio``: the sums of the running costs, one over the other).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec


class EndingComparison(msgspec.Struct, frozen=True, kw_only=True):
    """``ours`` against ``theirs`` over ``endings`` possible endings: ``above`` of them at
    which ours cost more, ``max_ratio`` the largest of ours over theirs at one ending, and
    ``mean_ratio`` ours over theirs with every ending as likely (the sums of the running
    costs, one over the other)."""

    endings: int
    above: int
    max_ratio: float
    mean_ratio: float


def compare_endings(ours: Sequence[float], theirs: Sequence[float]) -> EndingComparison | None:
    """Two running costs (``TraceResult.running_costs`` of two strategies on one session)
    compared at each call; None unless both cover the same calls, at least one, and ``theirs``
    costs more than nothing at each."""
    if not ours or len(ours) != len(theirs) or min(theirs) <= 0:
        return None
    return EndingComparison(
        endings=len(ours),
        above=sum(mine > other for mine, other in zip(ours, theirs, strict=True)),
        max_ratio=max(mine / other for mine, other in zip(ours, theirs, strict=True)),
        mean_ratio=sum(ours) / sum(theirs),
    )
