"""How a session's cost grows with its length: opening it, appending to it and writing its
snapshots at 10,000 events and at a large size, through ``SessionLog`` (snapshots and all) on
``SQLiteStore``.

For each size N, one synthetic session, compacted every ``COMPACT_EVERY_TURNS`` turns as a
session that long must be, is appended in its natural batches (one per message) up to N
events; the rate over its last tenth (``WINDOW_SHARE``; at least ``SNAPSHOT_EVERY`` events,
so the window holds the snapshots that come with that many events) is the append rate at N,
and the snapshots written in that window give the median time and bytes of one. The WAL's
largest size on the way is noted after each append. A short session (``SHORT_EVENTS``) is
written into the same file after the long one. The store is then closed, and on a freshly
opened store (median of ``OPENS``) are timed: ``SessionLog.open`` of the long session and
of the short one, then the long one's first view (``model_view``) and its first append (the
session's next batch; without a snapshot, timed apart). The first view and append
show that opening does not just move the cost of a long session to what comes after it.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Final, NamedTuple

from contextledger.events._catalogue import (
    AssistantFinished,
    CompactionCompleted,
    CompactionProjection,
    CompactionRequested,
    Event,
    MessageAdded,
    PartAdded,
)
from contextledger.events._ids import IdGenerator
from contextledger.events._parts import TextPart
from contextledger.history._projection import History
from contextledger.history._view import model_view
from contextledger.ledger import SNAPSHOT_EVERY, SessionLog
from contextledger.simulation._synthetic import synthetic_session
from contextledger.store._protocol import Snapshot
from contextledger.store._sqlite import SQLiteStore

#: The small size, and the large one of ``--full`` (the keys are named for these); the
#: default run's large size is smaller so that it stays under a minute, and says so.
SMALL_EVENTS: Final = 10_000
FULL_LARGE_EVENTS: Final = 500_000
DEFAULT_LARGE_EVENTS: Final = 100_000
#: The appends timed at each size: the last this share of the events.
WINDOW_SHARE: Final = 10
#: Opens timed per size (the median is reported).
OPENS: Final = 5
#: A synthetic turn averages about 150 events.
EVENTS_PER_TURN: Final = 150
#: The session written beside the long one, whose opening must not depend on the long one.
SHORT_EVENTS: Final = 1000
#: Turns between compactions of the long session (each keeps the last turn): about 3,000
#: events, a few hundred messages in view, as a 200k-token window holds.
COMPACT_EVERY_TURNS: Final = 20
#: Logs opened for timing write no snapshot at their first append (``snapshot_s`` is timed
#: apart): the first append's time is that of the append alone.
_NO_SNAPSHOT: Final = 10**12


class _TimedLog(SessionLog):
    """A ``SessionLog`` that notes the seconds each snapshot it writes takes."""

    __slots__ = ("seconds",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seconds: list[float] = []

    async def save_snapshot(self) -> None:
        started = time.perf_counter()
        await super().save_snapshot()
        self.seconds.append(time.perf_counter() - started)


class _CountingStore(SQLiteStore):
    """A ``SQLiteStore`` that notes the bytes of each snapshot it is given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.snapshot_bytes: list[int] = []

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot_bytes.append(len(snapshot.data) + sum(map(len, snapshot.chunks.values())))
        await super().save_snapshot(snapshot)


def _compacted(events: list[Event]) -> list[Event]:
    """``events`` with a compaction after every ``COMPACT_EVERY_TURNS`` turns: requested,
    summarised and completed, keeping the last turn (its ids follow the last ones before)."""
    out: list[Event] = []
    turns = 0
    last_user = last_message = last_part = ""
    for event in events:
        new = [event]
        if isinstance(event, MessageAdded) and event.role == "user":
            if turns and turns % COMPACT_EVERY_TURNS == 0:
                new = [*_compaction(out[-1], last_user, last_message, last_part), event]
            turns += 1
            last_user = event.message_id
        for e in new:
            if isinstance(e, MessageAdded | CompactionRequested):
                last_message = e.message_id
            if isinstance(e, PartAdded):
                last_part = e.part.id
            elif isinstance(e, CompactionRequested):
                last_part = e.part_id
        out.extend(new)
    return out


def _compaction(after: Event, tail: str, message: str, part: str) -> list[Event]:
    """A completed compaction after ``after`` that keeps the turn from ``tail``, with ids
    after ``message`` and ``part``."""
    time_ms, session = after.time_ms, after.session_id
    request = IdGenerator("msg", message).next(time_ms)
    summary = IdGenerator("msg", request).next(time_ms)
    request_part = IdGenerator("prt", part).next(time_ms)
    text = IdGenerator("prt", request_part).next(time_ms)
    return [
        CompactionRequested(
            session_id=session, time_ms=time_ms, message_id=request, part_id=request_part, auto=True
        ),
        MessageAdded(
            session_id=session,
            time_ms=time_ms,
            message_id=summary,
            role="assistant",
            parent_id=request,
            summary=True,
        ),
        PartAdded(
            session_id=session,
            time_ms=time_ms,
            part=TextPart(id=text, message_id=summary, text="summary " * 400),
        ),
        AssistantFinished(session_id=session, time_ms=time_ms, message_id=summary, finish="stop"),
        CompactionCompleted(
            session_id=session,
            time_ms=time_ms,
            request_message_id=request,
            summary_message_id=summary,
            tail_start_id=tail,
            projection=CompactionProjection(summary="summary"),
        ),
    ]


def _batches(count: int, session: str = "long") -> list[list[Event]]:
    """The first ``count`` events of one synthetic session (the long one compacted) in
    batches, one per message (the last cut at ``count``), then ``OPENS`` batches more."""
    turns = count // EVENTS_PER_TURN + 2
    while True:
        events = synthetic_session(session, seed=11, turns=turns)
        if session == "long":
            events = _compacted(events)
        batches: list[list[Event]] = []
        for i, event in enumerate(events):
            new = isinstance(event, MessageAdded | CompactionRequested)
            if not batches or new or i == count:
                batches.append([])
            batches[-1].append(event)
        written = 0
        for i, batch in enumerate(batches):
            written += len(batch)
            if written == count and len(batches) > i + OPENS:
                return batches[: i + 1 + OPENS]
        turns += turns // 4 + 1  # turns vary in length: ask for more


class _Size(NamedTuple):
    """The figures of one run at one size."""

    append_per_s: float
    open_s: float
    first_view_s: float
    first_append_s: float
    open_short_s: float
    snapshot_s: float
    snapshot_bytes: float
    wal_max_bytes: int


async def _at_size(path: str, batches: list[list[Event]], short: list[list[Event]]) -> _Size:
    """The figures of one session (``_batches``), appended and then opened, with the short
    one written beside it."""
    count = sum(map(len, batches[:-OPENS]))
    later = batches[-OPENS:]
    batches = batches[:-OPENS]
    wal = path + "-wal"
    wal_max = 0
    async with _CountingStore.open(path) as store:
        assert isinstance(store, _CountingStore)
        # At a smoke run's few events, snapshots come more often so that the window has one.
        every = min(SNAPSHOT_EVERY, max(1, count // WINDOW_SHARE))
        log = _TimedLog(store, History("long"), snapshot_every=every)  # a new session
        written = 0
        timed_from = count - max(count // WINDOW_SHARE, every)
        started = None
        for batch in batches:
            if started is None and written >= timed_from:
                started, first = time.perf_counter(), written
                log.seconds.clear()
                store.snapshot_bytes.clear()
            await log.append(batch)
            written += len(batch)
            wal_max = max(wal_max, os.path.getsize(wal))
        assert started is not None
        rate = (written - first) / (time.perf_counter() - started)
        seconds, nbytes = log.seconds, store.snapshot_bytes
        short_log = await SessionLog.open(store, "short")
        for batch in short:
            await short_log.append(batch)
    opens: list[tuple[float, float, float, float]] = []
    for batch in later:
        async with SQLiteStore.open(path) as reopened:
            started = time.perf_counter()
            long = await SessionLog.open(reopened, "long", snapshot_every=_NO_SNAPSHOT)
            opened = time.perf_counter()
            await SessionLog.open(reopened, "short")
            beside = time.perf_counter()
            assert model_view(long.history)
            viewed = time.perf_counter()
            await long.append(batch)
            appended = time.perf_counter()
            opens.append((opened - started, viewed - beside, appended - viewed, beside - opened))
            count += len(batch)
            assert long.history.seq == count
    open_long, first_view, first_append, open_short = (
        statistics.median(x) for x in zip(*opens, strict=True)
    )
    return _Size(
        rate,
        open_long,
        first_view,
        first_append,
        open_short,
        statistics.median(seconds),
        statistics.median(nbytes),
        wal_max,
    )


async def measure(
    workdir: str, *, full: bool, repeat: int, large: int | None = None
) -> dict[str, Any]:
    """The figures and the ratios ``open_500k_vs_10k``, ``first_view_500k_vs_10k`` and
    ``first_append_500k_vs_10k`` (after that open), ``append_rate_500k_vs_10k``,
    ``snapshot_500k_vs_10k`` (the seconds of one snapshot) and
    ``open_short_beside_500k_vs_10k`` (opening the short session in the same file), at
    ``large`` events instead of 500,000 unless ``full`` (see ``scaling_events``), each the
    median of ``repeat`` runs, the sizes' runs interleaved."""
    big = large or (FULL_LARGE_EVENTS if full else DEFAULT_LARGE_EVENTS)
    small = min(SMALL_EVENTS, big)
    runs: dict[str, list[_Size]] = {"small": [], "large": []}
    # The sessions are made once: every run appends the same (frozen) events.
    sessions = {"small": _batches(small), "large": _batches(big)}
    short = _batches(SHORT_EVENTS, "short")
    for i in range(repeat):
        for name in runs:
            path = os.path.join(workdir, f"long-{name}-{i}.db")
            runs[name].append(await _at_size(path, sessions[name], short))
    at_small, at_large = (
        _Size(*(statistics.median(x) for x in zip(*runs[name], strict=True)))
        for name in ("small", "large")
    )
    return {
        "scaling_events": [small, big],
        "append_per_s_small": at_small.append_per_s,
        "append_per_s_large": at_large.append_per_s,
        "open_s_small": at_small.open_s,
        "open_s_large": at_large.open_s,
        "first_view_s_small": at_small.first_view_s,
        "first_view_s_large": at_large.first_view_s,
        "first_append_s_small": at_small.first_append_s,
        "first_append_s_large": at_large.first_append_s,
        "open_short_beside_small_s": at_small.open_short_s,
        "open_short_beside_large_s": at_large.open_short_s,
        "snapshot_s_small": at_small.snapshot_s,
        "snapshot_s_large": at_large.snapshot_s,
        "snapshot_bytes_small": at_small.snapshot_bytes,
        "snapshot_bytes_large": at_large.snapshot_bytes,
        "wal_max_mb_large": at_large.wal_max_bytes / 1e6,
        "open_500k_vs_10k": at_large.open_s / at_small.open_s,
        "first_view_500k_vs_10k": at_large.first_view_s / at_small.first_view_s,
        "first_append_500k_vs_10k": at_large.first_append_s / at_small.first_append_s,
        "append_rate_500k_vs_10k": at_large.append_per_s / at_small.append_per_s,
        "snapshot_500k_vs_10k": at_large.snapshot_s / at_small.snapshot_s,
        "open_short_beside_500k_vs_10k": at_large.open_short_s / at_small.open_short_s,
    }
