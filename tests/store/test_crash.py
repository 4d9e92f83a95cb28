"""Kill -9 during appends: the SQLite store loses no acknowledged append and never shows
part of a batch.

A child process (``_crash_child.py``) appends batches to one session through ``SessionLog``
and prints each acknowledged seq. The parent kills it with SIGKILL at random moments,
restarts it on the same file (it continues the session from the stored version), and after
every kill opens the store and checks the log and the projection.
"""

from __future__ import annotations

import random
import signal
import sys
from pathlib import Path

import trio

from contextledger.events import (
    AssistantFinished,
    MessageAdded,
    PartAdded,
    RecordedEvent,
    SessionStarted,
    ToolOutputCleared,
    ToolStateChanged,
)
from contextledger.history import History
from contextledger.ledger import SessionLog
from contextledger.store import SQLiteStore

CHILD = Path(__file__).with_name("_crash_child.py")
SESSION = "ses_crash"
SEED = 20_241_130
KILLS = 24
#: Most kills come this long (at most) after the child's first acknowledged append.
MAX_RUN_SECONDS = 0.25
#: The other kills come at any moment from the start, while it may still be opening the store.
EARLY_KILL_SHARE = 0.25
TIMEOUT = 20


def acknowledged(path: Path) -> list[int]:
    """The seqs the child printed; a line cut short by the kill is not an acknowledgement."""
    lines = path.read_bytes().split(b"\n")
    return [int(line) for line in lines[:-1]]


async def wait_for_first_ack(acks: Path, errors: Path, child: trio.Process) -> None:
    with trio.fail_after(TIMEOUT):
        while b"\n" not in acks.read_bytes():
            assert child.returncode is None, f"the child exited: {errors.read_text()}"
            await trio.sleep(0.005)


def check_batches(recorded: list[RecordedEvent], kills: int) -> None:
    """Walk the log batch by batch (see ``_crash_child``) and fail on a partial batch."""
    events = [r.event for r in recorded]
    where = f"after {kills} kills"
    assert not events or isinstance(events[0], SessionStarted), where
    i = 1
    while i < len(events):
        first = events[i]
        if isinstance(first, ToolOutputCleared) or (
            isinstance(first, MessageAdded) and first.role == "user"
        ):
            i += 1
            continue
        assert isinstance(first, MessageAdded), f"seq {i + 1} starts no batch, {where}"
        message_id = first.message_id
        j = i + 1
        while j < len(events) and not isinstance(events[j], AssistantFinished):
            event = events[j]
            assert (isinstance(event, PartAdded) and event.part.message_id == message_id) or (
                isinstance(event, ToolStateChanged) and event.message_id == message_id
            ), f"seq {j + 1} does not belong to the batch at seq {i + 1}, {where}"
            j += 1
        assert j < len(events), f"partial batch visible from seq {i + 1} to the end, {where}"
        finished = events[j]
        assert isinstance(finished, AssistantFinished)
        assert finished.message_id == message_id, where
        size = int(finished.finish.removeprefix("stop:"))
        assert j - i + 1 == size, f"batch at seq {i + 1} has {j - i + 1} of {size}, {where}"
        i = j + 1


async def check_store(db: Path, acked: int, kills: int) -> None:
    async with SQLiteStore.open(db) as store:
        recorded = await store.read(SESSION)
        version = await store.stream_version(SESSION)
        where = f"after {kills} kills"

        assert version >= acked, f"acknowledged seq {acked} lost (version {version}), {where}"
        assert [r.seq for r in recorded] == list(range(1, version + 1)), where
        assert [r.position for r in recorded] == list(range(1, version + 1)), where
        check_batches(recorded, kills)
        rebuilt = History.rebuild(SESSION, recorded)
        loaded = await SessionLog.open(store, SESSION)
        assert loaded.history == rebuilt, f"snapshot + tail != rebuild, {where}"


async def test_kill_9_loses_no_acknowledged_append_and_shows_no_partial_batch(
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED)
    db = tmp_path / "crash.db"
    acked = 0
    kills = 0
    for run in range(KILLS):
        acks, errors = tmp_path / f"acks-{run}.txt", tmp_path / f"errors-{run}.txt"
        with acks.open("wb") as out, errors.open("wb") as err:
            child = await trio.lowlevel.open_process(
                [sys.executable, str(CHILD), str(db), SESSION, str(SEED + run)],
                stdout=out,
                stderr=err,
            )
        try:
            if rng.random() < EARLY_KILL_SHARE:
                await trio.sleep(rng.uniform(0, 0.5))
            else:
                await wait_for_first_ack(acks, errors, child)
                await trio.sleep(rng.uniform(0, MAX_RUN_SECONDS))
        finally:
            child.kill()
            await child.wait()
        assert child.returncode == -signal.SIGKILL, f"the child exited: {errors.read_text()}"
        kills += 1

        seqs = acknowledged(acks)
        assert seqs == sorted(set(seqs)), f"acks out of order, after {kills} kills"
        assert not seqs or seqs[0] > acked, f"the child restarted behind seq {acked}"
        acked = max([acked, *seqs])
        await check_store(db, acked, kills)

    assert kills >= 20
    assert acked > 0, f"nothing was acknowledged in {kills} kills"
