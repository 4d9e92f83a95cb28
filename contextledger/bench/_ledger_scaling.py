"""How a session's cost grows with its length: opening it and appending to it at 10,000
events and at a large size, through ``SessionLog`` (snapshots and all) on ``SQLiteStore``.

For each size N, one synthetic session is appended in its natural batches (one per message)
up to N events; the rate over its last tenth (``WINDOW_SHARE``; at least ``snapshot_every``
events, so the window holds the snapshots that come with that many events) is the append
rate at N. The store is
then closed and ``SessionLog.open`` timed on a freshly opened store (median of ``OPENS``).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Final

from contextledger.events._catalogue import Event, MessageAdded
from contextledger.ledger import SNAPSHOT_EVERY, SessionLog
from contextledger.simulation._synthetic import synthetic_session
from contextledger.store._sqlite import SQLiteStore

#: The small size, and the large one of ``--full`` (the keys are named for these); the
#: default run's large size is smaller so that it stays under a minute, and says so.
SMALL_EVENTS: Final = 10_000
FULL_LARGE_EVENTS: Final = 500_000
DEFAULT_LARGE_EVENTS: Final = 100_000
#: The appends timed at each size: the last this share of the events.
WINDOW_SHARE: Final = 10
#: Opens timed per size (the median is reported).
OPENS: Final = 3
#: A synthetic turn averages about 150 events.
EVENTS_PER_TURN: Final = 150


def _batches(count: int) -> list[list[Event]]:
    """The first ``count`` events of one synthetic session, one batch per message."""
    turns = count // EVENTS_PER_TURN + 2
    events = synthetic_session("long", seed=11, turns=turns)
    while len(events) < count:  # turns vary in length: ask for more
        turns += turns // 4 + 1
        events = synthetic_session("long", seed=11, turns=turns)
    batches: list[list[Event]] = []
    for event in events[:count]:
        if not batches or isinstance(event, MessageAdded):
            batches.append([])
        batches[-1].append(event)
    return batches


async def _at_size(path: str, count: int) -> tuple[float, float]:
    """(events per second over the last ``WINDOW`` events, median seconds to open)."""
    batches = _batches(count)
    async with SQLiteStore.open(path) as store:
        log = await SessionLog.open(store, "long")
        written = 0
        timed_from = count - max(count // WINDOW_SHARE, min(SNAPSHOT_EVERY, count))
        started = None
        for batch in batches:
            if started is None and written >= timed_from:
                started, first = time.perf_counter(), written
            await log.append(batch)
            written += len(batch)
        assert started is not None
        rate = (written - first) / (time.perf_counter() - started)
    opens = []
    for _ in range(OPENS):
        async with SQLiteStore.open(path) as store:
            started = time.perf_counter()
            reopened = await SessionLog.open(store, "long")
            opens.append(time.perf_counter() - started)
            assert reopened.history.seq == count
    return rate, statistics.median(opens)


async def measure(
    workdir: str, *, full: bool, repeat: int, large: int | None = None
) -> dict[str, Any]:
    """The figures and the two ratios ``open_500k_vs_10k`` and ``append_rate_500k_vs_10k``
    (at ``large`` events instead of 500,000 unless ``full``: see ``scaling_events``), each
    the median of ``repeat`` runs, the sizes' runs interleaved."""
    big = large or (FULL_LARGE_EVENTS if full else DEFAULT_LARGE_EVENTS)
    small = min(SMALL_EVENTS, big)
    runs: dict[str, list[tuple[float, float]]] = {"small": [], "large": []}
    for i in range(repeat):
        for name, size in (("small", small), ("large", big)):
            path = os.path.join(workdir, f"long-{name}-{i}.db")
            runs[name].append(await _at_size(path, size))
    small_rate, small_open = (statistics.median(x) for x in zip(*runs["small"], strict=True))
    big_rate, big_open = (statistics.median(x) for x in zip(*runs["large"], strict=True))
    return {
        "scaling_events": [small, big],
        "append_per_s_small": small_rate,
        "append_per_s_large": big_rate,
        "open_s_small": small_open,
        "open_s_large": big_open,
        "open_500k_vs_10k": big_open / small_open,
        "append_rate_500k_vs_10k": big_rate / small_rate,
    }
