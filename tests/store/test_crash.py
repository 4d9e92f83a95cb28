"""Kill -9 during appends: the SQLite store loses no acknowledged append and never shows
part of a batch.

Several writer processes (``_crash_child.py``, forked by its fork server so that a restart
costs milliseconds, not an interpreter start) append batches to their own sessions in one
file through ``SessionLog``, with snapshots every 40 events, and
print each acknowledged seq. The parent kills each with SIGKILL at its own random moment (a
quarter of them while they may still be opening the store), restarts them on the same file
(each continues its session from the stored version and snapshot), and after every round
checks that no acknowledged seq is lost; every ``CHECK_EVERY`` rounds, and after the last,
it also checks every batch is whole and the snapshot plus tail equals a rebuild.
``CONTEXTLEDGER_FAULTS_FULL=1`` runs ten times as many kills.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
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
SEED = 20_241_130
WRITERS = 5
FULL = os.environ.get("CONTEXTLEDGER_FAULTS_FULL") == "1"
ROUNDS = 420 if FULL else 42
#: Most kills come this long (at most) after the writer's first acknowledged append.
MAX_RUN_SECONDS = 0.08
#: The other kills come at any moment from the start, while it may still be opening the store.
EARLY_KILL_SHARE = 0.25
EARLY_KILL_SECONDS = 0.05
CHECK_EVERY = 10
#: Seconds a writer may take to its first acknowledgement (a hang, not a slow machine).
TIMEOUT = 60


def acknowledged(path: Path) -> list[int]:
    """The seqs the writer printed; a line cut short by the kill is not an acknowledgement."""
    lines = path.read_bytes().split(b"\n")
    return [int(line) for line in lines[:-1]]


def check_batches(recorded: list[RecordedEvent], where: str) -> None:
    """Walk the log batch by batch (see ``_crash_child``) and fail on a partial batch."""
    events = [r.event for r in recorded]
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


async def check_store(db: Path, acked: dict[str, int], where: str, deep: bool) -> None:
    async with SQLiteStore.open(db) as store:
        for session, seq in acked.items():
            version = await store.stream_version(session)
            assert version >= seq, f"acknowledged {session} seq {seq} lost ({version}), {where}"
            if not deep:
                continue
            recorded = await store.read(session)
            assert [r.seq for r in recorded] == list(range(1, version + 1)), where
            check_batches(recorded, f"{session}, {where}")
            loaded = await SessionLog.open(store, session)
            assert loaded.history == History.rebuild(session, recorded), where
        if deep:
            positions = [r.position for r in await store.read_all()]
            assert positions == list(range(1, len(positions) + 1)), where
            assert await store.check() == [], where


class Server:
    """The fork server, driven line by line."""

    def __init__(self, errors: Path) -> None:
        self._errors = errors.open("wb")
        self._process = subprocess.Popen(
            [sys.executable, str(CHILD), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            text=True,
        )

    def ask(self, line: str) -> int:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()
        answer = self._process.stdout.readline()
        assert answer, "the fork server ended"
        return int(answer)

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(TIMEOUT)
        self._errors.close()


def exited(pid: int) -> bool:
    """Whether the writer has ended (a zombie of the fork server, or gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_for_first_ack(acks: Path, pid: int, errors: Path) -> None:
    deadline = time.monotonic() + TIMEOUT
    while b"\n" not in acks.read_bytes():
        assert not exited(pid), f"the writer ended before its first append: {errors.read_text()}"
        assert time.monotonic() < deadline, f"no acknowledgement in time: {errors.read_text()}"
        time.sleep(0.002)


def test_kill_9_loses_no_acknowledged_append_and_shows_no_partial_batch(
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED)
    db = tmp_path / "crash.db"
    sessions = [f"ses_{i}" for i in range(WRITERS)]
    acked = dict.fromkeys(sessions, 0)
    errors = tmp_path / "errors.txt"
    server = Server(errors)
    kills = 0
    alive: set[int] = set()  # writers started and not yet killed
    try:
        for run in range(ROUNDS):
            started = time.monotonic()
            writers = []
            for i, session in enumerate(sessions):
                acks = tmp_path / f"acks-{i}.txt"
                acks.write_bytes(b"")
                seed = SEED + run * WRITERS + i
                pid = server.ask(f"start {db} {session} {seed} {acks}")
                alive.add(pid)
                early = rng.random() < EARLY_KILL_SHARE
                delay = rng.uniform(0, EARLY_KILL_SECONDS if early else MAX_RUN_SECONDS)
                writers.append((session, acks, pid, early, delay))
            for session, acks, pid, early, delay in sorted(writers, key=lambda w: w[4]):
                if not early:
                    wait_for_first_ack(acks, pid, errors)
                time.sleep(max(0.0, started + delay - time.monotonic()))
                os.kill(pid, signal.SIGKILL)
                alive.discard(pid)
                status = server.ask(f"wait {pid}")
                assert status == -signal.SIGKILL, f"the writer exited: {errors.read_text()}"
                kills += 1
                seqs = acknowledged(acks)
                where = f"{session} after {kills} kills"
                assert seqs == sorted(set(seqs)), f"acks out of order, {where}"
                assert not seqs or seqs[0] > acked[session], f"restarted behind, {where}"
                acked[session] = max([acked[session], *seqs])
            deep = run % CHECK_EVERY == CHECK_EVERY - 1 or run == ROUNDS - 1
            trio.run(check_store, db, acked, f"after {kills} kills", deep)
    finally:
        # After a failure, the writers still running would append forever.
        for pid in alive:
            os.kill(pid, signal.SIGKILL)
        server.close()

    assert kills == ROUNDS * WRITERS >= 200
    assert all(acked.values()), f"a writer acknowledged nothing in {kills} kills: {acked}"
