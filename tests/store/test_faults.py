"""Faults of the medium: bit flips in the store file, a full disk, read-only media.

Sized for ``make test``; ``CONTEXTLEDGER_FAULTS_FULL=1`` runs each at ten times the size.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio

from contextledger.events import LedgerError, MemoryPinned, RecordedEvent, SessionStarted
from contextledger.history import History
from contextledger.ledger import SessionLog, check_sessions
from contextledger.store import EventStore, SQLiteStore
from contextledger.store._schema import PAGE_SIZE
from tests.store._crash_child import Writer

FULL = os.environ.get("CONTEXTLEDGER_FAULTS_FULL") == "1"
SEED = 20_261_201
#: Single-bit flips, each in a fresh copy of the file.
FLIPS = 3000 if FULL else 300
SESSIONS = 3
BATCHES = 60


async def write_sessions(path: Path, rng: random.Random) -> None:
    """``SESSIONS`` sessions written through ``SessionLog`` in interleaved batches, with
    snapshots every few batches."""
    async with SQLiteStore.open(path) as store:
        logs, writers = [], []
        for i in range(SESSIONS):
            log = await SessionLog.open(store, f"ses_{i}", snapshot_every=25)
            await log.append([SessionStarted(session_id=log.session_id, title="faults")])
            logs.append(log)
            writers.append(Writer(log.history, rng))
        for _ in range(BATCHES):
            i = rng.randrange(SESSIONS)
            await logs[i].append(writers[i].next_batch())


class Sound:
    """What a sound copy of the file reads back as."""

    def __init__(
        self,
        streams: list[str],
        events: dict[str, list[RecordedEvent]],
        everything: list[RecordedEvent],
    ) -> None:
        self.streams = streams
        self.events = events
        self.everything = everything
        self.histories = {s: History.rebuild(s, e) for s, e in events.items()}


async def read_back(path: Path, sound: Sound | None) -> Sound:
    """Read everything the public API offers; compare with ``sound`` when given (an
    ``AssertionError`` is a silently different read)."""
    async with SQLiteStore.open(path, create=False) as store:
        streams = await store.streams()
        events = {s: await store.read(s) for s in streams}
        everything = await store.read_all()
        found = Sound(streams, events, everything)
        if sound is not None:
            assert streams == sound.streams
            assert events == sound.events
            assert everything == sound.everything
            for stream in streams:
                assert (await store.stream_version(stream)) == len(sound.events[stream])
                log = await SessionLog.open(store, stream)
                assert log.history == sound.histories[stream]
        return found


async def test_a_flipped_bit_is_detected_typed_or_harmless(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    original = tmp_path / "sound.db"
    await write_sessions(original, rng)
    sound = await read_back(original, None)
    data = original.read_bytes()
    copy = tmp_path / "flipped.db"
    outcomes: dict[str, int] = {"harmless": 0, "detected": 0}
    for flip in range(FLIPS):
        bit = rng.randrange(len(data) * 8)
        damaged = bytearray(data)
        damaged[bit // 8] ^= 1 << (bit % 8)
        for suffix in ("-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
        copy.write_bytes(damaged)
        try:
            await read_back(copy, sound)
        except LedgerError:
            outcomes["detected"] += 1
        except AssertionError as exc:
            raise AssertionError(f"flip {flip} (bit {bit}) read back different") from exc
        else:
            outcomes["harmless"] += 1
    assert sum(outcomes.values()) == FLIPS
    # Both happen: most flips land in a page's unused room, many in what the rows hold.
    assert outcomes["detected"] > FLIPS // 10, outcomes
    assert outcomes["harmless"] > FLIPS // 10, outcomes


# --- a full disk ---------------------------------------------------------------------------

FULL_CHILD = Path(__file__).with_name("_full_child.py")
#: File size limits the writer runs into, in pages of a new file: before its first snapshot,
#: after a few, and with a larger file; odd seeds write at durability "full".
LIMITS = [pages * PAGE_SIZE for pages in (10, 22, 40, 73)] * (5 if FULL else 1)


async def test_a_full_disk_raises_store_full_error_and_half_writes_nothing(
    tmp_path: Path,
) -> None:
    for run, limit in enumerate(LIMITS):
        db = tmp_path / f"full-{run}.db"
        result = await trio.run_process(
            [sys.executable, str(FULL_CHILD), str(db), "ses", str(SEED + run), str(limit)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        lines = result.stdout.decode().split()
        where = f"limit {limit}, run {run}: {result.stderr.decode()[-2000:]}"
        assert lines[-2:] == ["error", "StoreFullError"], where
        acked = int(lines[-3])
        async with SQLiteStore.open(db, create=False) as store:
            assert await store.check() == [], where
            assert await store.stream_version("ses") == acked, where
            assert await check_sessions(store) == [], where
            log = await SessionLog.open(store, "ses")
            assert log.history == History.rebuild("ses", await store.read("ses")), where


# --- read-only media -----------------------------------------------------------------------

READ_ONLY_CHILD = Path(__file__).with_name("_read_only_child.py")
#: Mounts a tmpfs at $1, copies the store $2 onto it, remounts it read-only and runs the
#: child on the copy: a real read-only medium, inside a user and mount namespace of its own.
ON_READ_ONLY_MOUNT = (
    'mount -t tmpfs tmpfs "$1" && cp "$2" "$1/store.db" && mount -o remount,ro "$1" '
    '&& exec "$3" "$4" "$1/store.db"'
)


def read_only_mounts_available() -> bool:
    """Whether this machine lets the test mount a tmpfs and remount it read-only in a user
    and mount namespace of its own (some kernels and AppArmor profiles forbid it)."""
    if shutil.which("unshare") is None:
        return False
    with tempfile.TemporaryDirectory() as directory:
        mount = 'mount -t tmpfs tmpfs "$1" && mount -o remount,ro "$1"'
        probe = subprocess.run(
            ["unshare", "-rm", "sh", "-c", mount, "sh", directory], capture_output=True, check=False
        )
    return probe.returncode == 0


@pytest.mark.skipif(
    not read_only_mounts_available(),
    reason="needs unshare and user namespaces that may mount a tmpfs read-only",
)
async def test_a_store_on_read_only_media_reads_and_refuses_writes_typed(
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED)
    original = tmp_path / "sound.db"
    await write_sessions(original, rng)
    sound = await read_back(original, None)
    mount = tmp_path / "mount"
    mount.mkdir()
    result = await trio.run_process(
        [
            *("unshare", "-rm", "sh", "-c", ON_READ_ONLY_MOUNT, "sh"),
            *(str(mount), str(original), sys.executable, str(READ_ONLY_CHILD)),
        ],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    found = json.loads(result.stdout)
    assert found == {
        "read_only": True,
        "events": {s: len(e) for s, e in sound.events.items()},
        "seqs": {s: len(e) for s, e in sound.events.items()},
        "problems": 0,
        "refused": ["StoreReadOnlyError", "StoreReadOnlyError"],
        "files": ["store.db"],
    }


# --- wrongly typed values --------------------------------------------------------------------

GOOD = MemoryPinned(session_id="s", text="kept")


@pytest.mark.parametrize(
    "events",
    [None, "events", (e for e in [GOOD]), [object()], [{"type": "memory.pinned"}], [GOOD, 1]],
    ids=["None", "text", "generator", "object", "dict", "int"],
)
async def test_session_log_refuses_wrongly_typed_events_with_nothing_written(
    store: EventStore, events: Any
) -> None:
    log = await SessionLog.open(store, "s")
    await log.append([SessionStarted(session_id="s")])

    with pytest.raises(LedgerError):
        await log.append(events)

    assert await store.stream_version("s") == 1
    assert log.history == History.rebuild("s", await store.read("s"))
