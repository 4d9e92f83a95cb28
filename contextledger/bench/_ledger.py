"""The ledger benchmark: ``SQLiteStore`` appends and replay against their floors and a peer.

On events shaped like the traces' (``contextledger.simulation._synthetic``), measured in one run:

- ours: ``SQLiteStore`` (durability ``"normal"``): single-event appends (one ``append`` and one
  commit each), batched appends (``BATCH`` events per ``append``), each expecting the stream's
  version and last position as ``SessionLog``'s appends do, replay (``store.read`` plus
  ``History.rebuild``: read, decode and apply), and batched appends at ``"full"`` to compare
  with the peer at equal durability;
- the floor: apsw alone on the same schema and pragmas as the store's writer (WAL, the same
  ``synchronous``), inserting the same rows, built beforehand (a batch row of ``BATCH``
  events per append, or of one event, with its bytes and checksum), in one transaction
  (``executemany``), in a transaction per row of ``BATCH`` (also at FULL), and in one
  transaction per row of one event; and apsw plus ``msgspec`` selecting the rows of each
  stream in order, splitting them and decoding their events. Like the store (whose
  checkpointer thread does it while the appends run), the floor copies its WAL into the
  database inside its clock, with SQLite's automatic checkpoint every
  ``CHECKPOINT_BYTES``; ``floor_insert_uncheckpointed_per_s`` is the one transaction
  without it (its WAL is copied when it closes, after the clock);
- the peer: the ``eventsourcing`` library's ``SQLiteApplicationRecorder`` (the recorder that,
  like ours, gives every event a global position), file database in WAL, inserting the same
  blobs as ``StoredEvent`` states in ``insert_events`` calls of ``BATCH``. It has no
  ``synchronous`` option, so it runs at SQLite's default (FULL, read back from its
  connection); the bench also runs it at NORMAL, our default, by wrapping its connection
  pool's factory. ``batched_vs_eventsourcing`` compares both at NORMAL,
  ``batched_full_vs_eventsourcing_full`` both at FULL. Its ``StoredEvent`` objects are built
  before the clock starts (ours encodes inside the timed ``append``).

Every figure is the median of ``repeat`` runs, each on a fresh database file; the runs of the
different systems are interleaved so that drift on a noisy machine hits all of them alike.
Batched appends with and without checksums, whose times differ by less than one run's noise,
get ``CHECKSUM_PAIRS`` runs each, taking turns.
The corpus itself is frozen out of the garbage collector's sight (``gc.freeze``) so that its
100,000 live events do not slow every measurement down with collections.
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import sys
import time
import uuid
from typing import Any, Final
from unittest import mock

import apsw
import msgspec
import trio

from contextledger.bench import _ledger_scaling as ledger_scaling
from contextledger.bench._common import (
    Options,
    median,
    rate,
    ratio,
    synthetic_corpus,
    table,
    temp_dir,
)
from contextledger.events._catalogue import Event
from contextledger.events._codec import DEFAULT_CODEC
from contextledger.history._projection import History
from contextledger.store import _sqlite as sqlite_store
from contextledger.store._checkpointer import CHECKPOINT_BYTES
from contextledger.store._schema import (
    INSERT_BATCH,
    PAGE_SIZE,
    TABLES,
    batch_crc,
    batch_data,
    split_batch,
)
from contextledger.store._sqlite import Durability, SQLiteStore

#: Events of the default run and of ``--full``.
DEFAULT_EVENTS: Final = 100_000
FULL_EVENTS: Final = 100_000
#: Events appended one per commit in the default run (``--full``: all of them). Each commit
#: waits on the disk, so the single-commit runs of ours and the floor were most of the
#: default run's time at 100,000; 30,000 commits still pass through dozens of checkpoints.
SINGLE_EVENTS: Final = 30_000
#: Events per append in the batched runs, ours, the floor's and the peer's: about a turn of a
#: busy session, or an importer's batch. (At 100, ours runs about 10% slower: more commits.)
BATCH: Final = 1000
#: Runs per figure (the median is reported).
REPEAT: Final = 3
FULL_REPEAT: Final = 5
#: Runs of batched appends with and without checksums for ``checksum_overhead``: the two
#: differ by a few percent, less than one run's noise, so they get more runs than the rest
#: (the first ``repeat`` of them inside the runs of every system, the others after them).
CHECKSUM_PAIRS: Final = 9
#: Turns per synthetic session: about 5,700 events, a long coding session.
TURNS: Final = 40

#: Ours divided by theirs must reach these.
TARGETS: Final = {
    "batched_vs_floor": 0.7,
    "batched_vs_eventsourcing": 2.0,
    "single_vs_floor": 0.5,
    "replay_vs_floor": 0.4,
}

#: Ours divided by the same without, or at a large size by the same at a small one, must
#: stay below these.
CEILINGS: Final = {
    # Batched appends with row checksums against the same appends with the checksum
    # functions replaced by a constant: what computing them costs.
    "checksum_overhead": 1.1,
    # Opening a session of 500,000 events against one of 10,000 (``_ledger_scaling``).
    "open_500k_vs_10k": 2.0,
    # Its first view and its first append after that open: opening does not just move the
    # cost to what comes next (the view reaches back to the last compaction).
    "first_view_500k_vs_10k": 2.0,
    "first_append_500k_vs_10k": 2.0,
    # Writing one snapshot of that session at 500,000 events against at 10,000: it writes
    # what changed since the last one, so about the same.
    "snapshot_500k_vs_10k": 2.0,
    # Opening a short session in the same file as the long one, at 500,000 against 10,000.
    "open_short_beside_500k_vs_10k": 2.0,
}
#: At a large size divided by at a small one must reach these (``_ledger_scaling``).
SCALING_TARGETS: Final = {"append_rate_500k_vs_10k": 0.7}

_SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
_SELECT_DATA = "SELECT data, count FROM batches WHERE stream = ? ORDER BY seq"

#: A batch row as the store writes it: its last event's position, stream id (the row id in
#: ``streams``), its last event's seq, its number of events, bytes, checksum (computed
#: beforehand: the floor only writes).
Row = tuple[int, int, int, int, bytes, int]
#: An event as the peer stores it: stream id, seq, tag, bytes.
PeerEvent = tuple[int, int, str, bytes]


class _Corpus:
    """The events, per stream, and as the rows the store would write."""

    def __init__(self, count: int) -> None:
        self.streams = synthetic_corpus(count, turns=TURNS)
        codec = DEFAULT_CODEC
        self.sizes: list[int] = []
        self.flat: list[tuple[str, int, Event]] = []
        # Appends of BATCH events of one stream (the last of a stream may be shorter), as
        # events for ours, as batch rows for the floor and as events for the peer; and
        # every event alone, a row of one, for the floor's one commit per event.
        self.batches: list[tuple[str, int, list[Event]]] = []
        self.rows: list[Row] = []
        self.peer_batches: list[list[PeerEvent]] = []
        self.single_rows: list[Row] = []
        position = 0
        for stream_id, (stream, events) in enumerate(self.streams, 1):
            blobs = [codec.encode(event) for event in events]
            versions = [event.v for event in events]
            tags = [codec.tag_of(event) for event in events]
            self.sizes.extend(map(len, blobs))
            for seq, event in enumerate(events, 1):
                self.flat.append((stream, seq, event))
                self.single_rows.append(
                    _row(
                        stream_id,
                        seq,
                        position + seq,
                        versions[seq - 1 : seq],
                        blobs[seq - 1 : seq],
                    )
                )
            for i in range(0, len(events), BATCH):
                end = min(i + BATCH, len(events))
                self.batches.append((stream, i, events[i:end]))
                self.rows.append(
                    _row(stream_id, end, position + end, versions[i:end], blobs[i:end])
                )
                self.peer_batches.append(
                    [
                        (stream_id, seq, tags[seq - 1], blobs[seq - 1])
                        for seq in range(i + 1, end + 1)
                    ]
                )
            position += len(events)
        self.nbytes = sum(self.sizes)
        assert sum(row[3] for row in self.rows) == len(self.single_rows) == len(self.flat)


def _row(stream_id: int, seq: int, position: int, versions: list[int], blobs: list[bytes]) -> Row:
    """The batch row of ``blobs`` (the last of them at ``seq`` and ``position``)."""
    data = batch_data(versions, blobs)
    count = len(blobs)
    return (position, stream_id, seq, count, data, batch_crc(stream_id, seq, position, count, data))


def _remove_db(path: str, *, keep: bool = False) -> str:
    """Delete the database at ``path`` unless ``keep``; return ``path``."""
    if keep:
        return path
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)
    return path


# --- ours ----------------------------------------------------------------------------------


async def _ours_batched(path: str, corpus: _Corpus, durability: Durability) -> float:
    async with SQLiteStore.open(path, durability=durability) as store:
        start = time.perf_counter()
        await _appended(store, corpus.batches)
        return time.perf_counter() - start


async def _appended(store: SQLiteStore, appends: list[tuple[str, int, list[Event]]]) -> None:
    """Make ``appends`` as ``SessionLog`` makes them: each expecting the stream's version and
    the position of its last event, as the append before returned it."""
    ends: dict[str, int] = {}
    for stream, version, events in appends:
        recorded = await store.append(stream, version, events, expected_position=ends.get(stream))
        ends[stream] = recorded[-1].position


def _without_checksums() -> contextlib.AbstractContextManager[Any]:
    """The store's checksum functions replaced by a constant, for ``checksum_overhead``:
    a batch row's and a stream row's."""
    constant = lambda *fields: 0  # noqa: E731
    return mock.patch.multiple(sqlite_store, batch_crc=constant, stream_crc=constant)


async def _ours_single(path: str, corpus: _Corpus, count: int) -> float:
    items = [(stream, seq - 1, [event]) for stream, seq, event in corpus.flat[:count]]
    async with SQLiteStore.open(path) as store:
        start = time.perf_counter()
        await _appended(store, items)
        return time.perf_counter() - start


async def _ours_replay(path: str, streams: list[str]) -> float:
    async with SQLiteStore.open(path) as store:
        start = time.perf_counter()
        for stream in streams:
            History.rebuild(stream, await store.read(stream))
        return time.perf_counter() - start


# --- the floor: apsw and msgspec alone -----------------------------------------------------


def _floor_connection(
    path: str, durability: Durability = "normal", *, checkpoints: bool = True
) -> apsw.Connection:
    """A connection set up as ``SQLiteStore``'s writer is: the store's schema and page size,
    WAL, the same ``synchronous``. The store's checkpointer copies the WAL into the database
    each time it has grown by ``CHECKPOINT_BYTES``, on its own thread, while the appends are
    timed; the floor does the same work the way SQLite does by default, at its commits
    (``wal_autocheckpoint``), unless not ``checkpoints`` (it then copies the whole WAL when
    it closes, after its clock has stopped)."""
    conn = apsw.Connection(path)
    cur = conn.cursor()
    cur.execute(f"PRAGMA page_size={PAGE_SIZE}")  # before the file is written: WAL mode
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
    pages = CHECKPOINT_BYTES // PAGE_SIZE if checkpoints else 0
    cur.execute(f"PRAGMA wal_autocheckpoint={pages}")
    cur.execute(TABLES)
    return conn


def _floor_insert(
    path: str,
    chunks: list[list[Row]],
    durability: Durability = "normal",
    *,
    checkpoints: bool = True,
) -> float:
    """Insert each chunk of rows in a transaction of its own."""
    conn = _floor_connection(path, durability, checkpoints=checkpoints)
    cur = conn.cursor()
    start = time.perf_counter()
    for chunk in chunks:
        cur.execute("BEGIN IMMEDIATE")
        cur.executemany(INSERT_BATCH, chunk)
        cur.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def _floor_single(path: str, rows: list[Row]) -> float:
    conn = _floor_connection(path)
    cur = conn.cursor()
    start = time.perf_counter()
    for row in rows:
        cur.execute("BEGIN IMMEDIATE")
        cur.execute(INSERT_BATCH, row)
        cur.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def _floor_read_decode(path: str, streams: list[str]) -> float:
    conn = apsw.Connection(path)
    cur = conn.cursor()
    decode = msgspec.msgpack.Decoder(Event).decode
    start = time.perf_counter()
    for stream_id in range(1, len(streams) + 1):
        events: list[Event] = []
        for data, count in cur.execute(_SELECT_DATA, (stream_id,)):
            split = split_batch(data, count)
            assert split is not None
            events.extend(map(decode, split[1]))
        assert events
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


# --- the peer: eventsourcing ---------------------------------------------------------------


class _Peer:
    """The eventsourcing SQLite recorder, or why it is unavailable."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.version: str | None = None
        self.synchronous: str | None = None
        self.sqlite_version: str | None = None
        try:
            import eventsourcing.sqlite  # noqa: F401
        except ImportError as exc:
            self.reason = f"eventsourcing is not installed ({exc}); pip install '.[bench]'"
            return
        import importlib.metadata
        import sqlite3

        self.version = importlib.metadata.version("eventsourcing")
        self.sqlite_version = sqlite3.sqlite_version

    @property
    def available(self) -> bool:
        return self.reason is None

    def insert(self, path: str, corpus: _Corpus, *, normal: bool = False) -> float:
        """Insert the corpus; with ``normal``, every connection the recorder's pool opens
        is set to ``synchronous=NORMAL`` first (it has no option for it, but its pool's
        connection factory can be wrapped), so it runs at our default durability."""
        from eventsourcing.persistence import StoredEvent
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

        datastore = SQLiteDatastore(path)
        if normal:
            create = datastore.pool._create_connection

            def create_normal() -> Any:
                connection = create()
                connection._sqlite_conn.execute("PRAGMA synchronous=NORMAL")
                return connection

            datastore.pool._create_connection = create_normal  # type: ignore[method-assign]
        try:
            recorder = SQLiteApplicationRecorder(datastore)
            recorder.create_table()
            with datastore.transaction(commit=False) as cur:
                cur.execute("PRAGMA synchronous")
                value = int(cur.fetchone()[0])
                cur.execute("PRAGMA journal_mode")
                journal = str(cur.fetchone()[0])
            if not normal:
                self.synchronous = _SYNCHRONOUS.get(value, str(value))
            else:
                assert value == 1, value
            assert journal.lower() == "wal", journal
            ids = [uuid.uuid5(uuid.NAMESPACE_URL, stream) for stream, _ in corpus.streams]
            batches = [
                [
                    StoredEvent(
                        originator_id=ids[stream_id - 1],
                        originator_version=seq,
                        topic=tag,
                        state=blob,
                    )
                    for stream_id, seq, tag, blob in events
                ]
                for events in corpus.peer_batches
            ]
            start = time.perf_counter()
            for batch in batches:
                recorder.insert_events(batch)
            return time.perf_counter() - start
        finally:
            datastore.close()

    def read_decode(self, path: str, corpus: _Corpus) -> float:
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

        datastore = SQLiteDatastore(path)
        try:
            recorder = SQLiteApplicationRecorder(datastore)
            decode = msgspec.msgpack.Decoder(Event).decode
            ids = [uuid.uuid5(uuid.NAMESPACE_URL, stream) for stream, _ in corpus.streams]
            start = time.perf_counter()
            for originator_id in ids:
                events = [decode(stored.state) for stored in recorder.select_events(originator_id)]
                assert events
            return time.perf_counter() - start
        finally:
            datastore.close()


# --- the run -------------------------------------------------------------------------------


async def _measure(options: Options, workdir: str) -> dict[str, Any]:
    count = options.events or (FULL_EVENTS if options.full else DEFAULT_EVENTS)
    repeat = FULL_REPEAT if options.full else REPEAT
    single = count if options.full else min(SINGLE_EVENTS, count)
    started = time.perf_counter()
    corpus = _Corpus(count)
    # The corpus stays in memory for the writers. Out of the collector's sight, its size does
    # not tax every allocation-heavy measurement (a replaying process holds no such corpus).
    gc.collect()
    gc.freeze()
    streams = [stream for stream, _ in corpus.streams]
    peer = _Peer()
    times: dict[str, list[float]] = {}

    def timed(key: str, seconds: float) -> None:
        times.setdefault(key, []).append(seconds)

    def fresh(name: str, i: int) -> str:
        # Garbage of the previous measurement is collected before the next one starts.
        gc.collect()
        return os.path.join(workdir, f"{name}-{i}.db")

    async def checksum_pair(i: int, keep: bool) -> str:
        """Batched appends with and without checksums, taking turns going first so that what
        the run before leaves behind (its files still being written back) hits both alike;
        the path of the checked file, kept if ``keep``."""
        kept = ""
        for unchecked in (False, True) if i % 2 == 0 else (True, False):
            path = fresh("ours-unchecked" if unchecked else "ours", i)
            with _without_checksums() if unchecked else contextlib.nullcontext():
                seconds = await _ours_batched(path, corpus, "normal")
            timed("batched_unchecked" if unchecked else "batched", seconds)
            if unchecked:
                _remove_db(path)
            else:
                kept = _remove_db(path, keep=keep)
        return kept

    replay_db = floor_db = peer_db = ""
    for i in range(repeat):
        # Each run writes fresh files; the last run's files are kept for the reads.
        last = i == repeat - 1
        replay_db = await checksum_pair(i, last)
        path = fresh("ours-full", i)
        timed("batched_full", await _ours_batched(path, corpus, "full"))
        _remove_db(path)
        path = fresh("ours-single", i)
        timed("single", await _ours_single(path, corpus, single))
        _remove_db(path)

        path = fresh("floor", i)
        timed("floor_insert", _floor_insert(path, [corpus.rows]))
        floor_db = _remove_db(path, keep=last)
        path = fresh("floor-uncheckpointed", i)
        timed("floor_insert_uncheckpointed", _floor_insert(path, [corpus.rows], checkpoints=False))
        _remove_db(path)
        path = fresh("floor-batched", i)
        timed("floor_insert_batched", _floor_insert(path, [[row] for row in corpus.rows]))
        _remove_db(path)
        path = fresh("floor-batched-full", i)
        rows = [[row] for row in corpus.rows]
        timed("floor_insert_batched_full", _floor_insert(path, rows, "full"))
        _remove_db(path)
        path = fresh("floor-single", i)
        timed("floor_single", _floor_single(path, corpus.single_rows[:single]))
        _remove_db(path)

        if peer.available:
            path = fresh("eventsourcing", i)
            timed("peer_insert", peer.insert(path, corpus))
            peer_db = _remove_db(path, keep=last)
            path = fresh("eventsourcing-normal", i)
            timed("peer_insert_normal", peer.insert(path, corpus, normal=True))
            _remove_db(path)

    for i in range(repeat, CHECKSUM_PAIRS):
        await checksum_pair(i, keep=False)
    for _ in range(repeat):
        gc.collect()
        timed("replay", await _ours_replay(replay_db, streams))
        gc.collect()
        timed("floor_read_decode", _floor_read_decode(floor_db, streams))
        if peer.available:
            gc.collect()
            timed("peer_read_decode", peer.read_decode(peer_db, corpus))

    mb = corpus.nbytes / 1e6
    n = len(corpus.flat)
    figures: dict[str, Any] = {
        "single_appends_per_s": rate(single, times["single"]),
        "batched_appends_per_s": rate(n, times["batched"]),
        "batched_full_appends_per_s": rate(n, times["batched_full"]),
        "replay_events_per_s": rate(n, times["replay"]),
        "replay_mb_per_s": rate(mb, times["replay"]),
        "floor_insert_per_s": rate(n, times["floor_insert"]),
        "floor_insert_uncheckpointed_per_s": rate(n, times["floor_insert_uncheckpointed"]),
        "floor_insert_batched_per_s": rate(n, times["floor_insert_batched"]),
        "floor_insert_batched_full_per_s": rate(n, times["floor_insert_batched_full"]),
        "floor_single_commit_per_s": rate(single, times["floor_single"]),
        "floor_read_decode_per_s": rate(n, times["floor_read_decode"]),
        "floor_read_decode_mb_per_s": rate(mb, times["floor_read_decode"]),
        "eventsourcing_batched_per_s": rate(n, times["peer_insert"]) if peer.available else None,
        "eventsourcing_normal_batched_per_s": (
            rate(n, times["peer_insert_normal"]) if peer.available else None
        ),
        "eventsourcing_read_decode_per_s": (
            rate(n, times["peer_read_decode"]) if peer.available else None
        ),
    }
    # The peer at the same synchronous setting as ours: NORMAL, our default (set through its
    # connection pool); and both at FULL, the peer's own default, as a second comparison.
    ratios = {
        "batched_vs_floor": ratio(figures["batched_appends_per_s"], figures["floor_insert_per_s"]),
        "batched_vs_eventsourcing": ratio(
            figures["batched_appends_per_s"], figures["eventsourcing_normal_batched_per_s"]
        ),
        "single_vs_floor": ratio(
            figures["single_appends_per_s"], figures["floor_single_commit_per_s"]
        ),
        "replay_vs_floor": ratio(
            figures["replay_events_per_s"], figures["floor_read_decode_per_s"]
        ),
    }
    extra_ratios = {
        "batched_full_vs_eventsourcing_full": ratio(
            figures["batched_full_appends_per_s"], figures["eventsourcing_batched_per_s"]
        ),
        "batched_vs_floor_batched": ratio(
            figures["batched_appends_per_s"], figures["floor_insert_batched_per_s"]
        ),
        "batched_vs_floor_uncheckpointed": ratio(
            figures["batched_appends_per_s"], figures["floor_insert_uncheckpointed_per_s"]
        ),
    }
    scaling = await ledger_scaling.measure(
        workdir, full=options.full, repeat=repeat, large=options.events
    )
    overheads = {
        "checksum_overhead": median(times["batched"]) / median(times["batched_unchecked"]),
        **{key: scaling[key] for key in CEILINGS if key in scaling},
    }
    return {
        "benchmark": "ledger",
        "events": n,
        "sessions": len(corpus.streams),
        "encoded_mb": mb,
        "bytes_per_event_mean": corpus.nbytes / n,
        "bytes_per_event_median": statistics.median(corpus.sizes),
        "bytes_per_event_max": max(corpus.sizes),
        "batch_size": BATCH,
        "single_events": single,
        "single_subset": single < n,
        "repeat": repeat,
        "durability": "normal",
        "synchronous": "NORMAL",
        **figures,
        **ratios,
        **extra_ratios,
        **scaling,
        **overheads,
        "batched_vs_eventsourcing_synchronous": "NORMAL" if peer.available else None,
        "eventsourcing_recorder": "SQLiteApplicationRecorder" if peer.available else None,
        "eventsourcing_version": peer.version,
        "eventsourcing_synchronous": peer.synchronous,
        "eventsourcing_sqlite_version": peer.sqlite_version,
        "eventsourcing_unavailable": peer.reason,
        "targets": TARGETS,
        "ceilings": CEILINGS,
        "scaling_targets": SCALING_TARGETS,
        "met": {
            **{
                key: None if ratios[key] is None else bool(ratios[key] >= target)  # type: ignore[operator]
                for key, target in TARGETS.items()
            },
            **{key: bool(overheads[key] <= ceiling) for key, ceiling in CEILINGS.items()},
            **{key: bool(scaling[key] >= target) for key, target in SCALING_TARGETS.items()},
        },
        "sqlite_version": apsw.sqlite_lib_version(),
        "apsw_version": apsw.apsw_version(),
        "msgspec_version": msgspec.__version__,
        "python": sys.version.split()[0],
        "seconds": time.perf_counter() - started,
    }


def run(options: Options) -> dict[str, Any]:
    """Measure; return the figures, ratios, targets and the setup, ready for JSON."""
    try:
        with temp_dir("contextledger-bench-") as workdir:
            result: dict[str, Any] = trio.run(_measure, options, workdir)
    finally:
        gc.unfreeze()
    return result


def _num(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def render(result: dict[str, Any]) -> str:
    """The figures as tables."""
    r = result
    single = f"{r['single_events']:,}" + (" of them" if r["single_subset"] else "")
    peer_sync = r["eventsourcing_synchronous"] or "n/a"
    head = (
        f"ledger: {r['events']:,} events in {r['sessions']} synthetic sessions, "
        f"{r['encoded_mb']:.1f} MB encoded ({r['bytes_per_event_mean']:.0f} B/event mean, "
        f"{r['bytes_per_event_median']:.0f} median, {r['bytes_per_event_max']:,} max); "
        f"batches of {r['batch_size']}; median of {r['repeat']} runs; "
        f"SQLite {r['sqlite_version']}, WAL, synchronous NORMAL unless said; "
        "one session through SessionLog at {:,} and {:,} events for the *_500k_vs_10k "
        "keys\n\n".format(*r["scaling_events"])
    )
    mbps = r["encoded_mb"] / r["events"]

    def row(name: str, key: str) -> list[str]:
        value = r[key]
        return [name, _num(value), _num(None if value is None else value * mbps, 1)]

    figures = [
        ["", "events/s", "MB/s"],
        row(f"ours: single-event appends ({single}, one commit each)", "single_appends_per_s"),
        row("ours: batched appends", "batched_appends_per_s"),
        row("ours: batched appends, durability full", "batched_full_appends_per_s"),
        row("ours: replay (read + decode + apply)", "replay_events_per_s"),
        row("floor: insert, one transaction", "floor_insert_per_s"),
        row("floor: insert, one transaction, no checkpoint", "floor_insert_uncheckpointed_per_s"),
        row(f"floor: insert, {r['batch_size']} per transaction", "floor_insert_batched_per_s"),
        row(
            f"floor: insert, {r['batch_size']} per transaction, FULL",
            "floor_insert_batched_full_per_s",
        ),
        row(f"floor: one transaction per event ({single})", "floor_single_commit_per_s"),
        row("floor: read + decode", "floor_read_decode_per_s"),
        row("eventsourcing: insert_events (NORMAL)", "eventsourcing_normal_batched_per_s"),
        row(f"eventsourcing: insert_events ({peer_sync})", "eventsourcing_batched_per_s"),
        row("eventsourcing: select_events + decode", "eventsourcing_read_decode_per_s"),
    ]
    ratios = [["ratio (ours / theirs)", "value", "target", "met"]]
    for key, target in r["targets"].items():
        met = r["met"][key]
        label = key + (" (both NORMAL)" if key == "batched_vs_eventsourcing" else "")
        ratios.append(
            [
                label,
                _num(r[key], 3),
                f">= {target}",
                "n/a" if met is None else "yes" if met else "NO",
            ]
        )
    ratios.append(
        [
            f"batched_full_vs_eventsourcing_full (both {peer_sync})",
            _num(r["batched_full_vs_eventsourcing_full"], 3),
            "",
            "",
        ]
    )
    for key in ("batched_vs_floor_batched", "batched_vs_floor_uncheckpointed"):
        ratios.append([key, _num(r[key], 3), "", ""])
    for key, ceiling in r["ceilings"].items():
        ratios.append([key, _num(r[key], 3), f"<= {ceiling}", "yes" if r["met"][key] else "NO"])
    for key, target in r["scaling_targets"].items():
        ratios.append([key, _num(r[key], 3), f">= {target}", "yes" if r["met"][key] else "NO"])
    tail = ""
    if r["eventsourcing_unavailable"]:
        tail = f"\neventsourcing unavailable: {r['eventsourcing_unavailable']}\n"
    return (
        head
        + table(figures, right=[False, True, True])
        + "\n"
        + table(ratios, right=[False, True, False, False])
        + tail
        + f"\n({r['seconds']:.1f} s)\n"
    )
