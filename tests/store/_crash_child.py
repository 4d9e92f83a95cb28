"""The child process of ``test_crash.py``: appends to one session until it is killed.

Usage: ``python _crash_child.py DB SESSION_ID SEED``, or ``python _crash_child.py --serve``:
a fork server that has imported everything once and starts writers in a few milliseconds.
It reads commands from stdin, one a line, and answers each with one line:

- ``start DB SESSION_ID SEED ACKS``: fork a writer whose stdout is the file ACKS; answers
  its pid;
- ``wait PID``: wait for that writer to end (the parent kills it); answers its exit status
  as ``os.waitstatus_to_exitcode`` gives it (``-9`` after SIGKILL).

It opens the SQLite store at DB, continues SESSION_ID from its stored version (through
``SessionLog``, so the projection is loaded from its snapshot plus the events after it), and
appends batches forever. After each append returns it writes the last recorded seq to stdout
and flushes, so every seq the parent reads was acknowledged by the store. A batch refused
with ``StoreBusyError`` (the other writers held the lock too long; nothing written) is
tried again, as the error advises.

The batches have a structure the parent can check for all-or-nothing visibility:

- single events: ``session.started`` (first), a user ``message.added``, a
  ``tool.output_cleared``;
- multi-event batches: an assistant ``message.added``, then its parts (text, and tool calls
  that complete inside the batch), then ``assistant.finished`` whose ``finish`` is
  ``"stop:N"`` with N the number of events in the whole batch. A few batches carry a text
  larger than ``INLINE_COMMIT_BYTES``, so their commit runs on a worker thread.

Half the writers (by seed) checkpoint at small WAL sizes (``SMALL_WAL``), so that the writer
restarts the WAL itself every few dozen batches and kills land in those restarts too.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import traceback

import structlog
import trio

import contextledger.store._checkpointer as checkpointer_module
from contextledger.events import (
    AssistantFinished,
    Event,
    IdGenerator,
    MessageAdded,
    PartAdded,
    SessionStarted,
    TextPart,
    ToolCompleted,
    ToolOutputCleared,
    ToolPart,
    ToolPending,
    ToolStateChanged,
)
from contextledger.history import History
from contextledger.ledger import SessionLog
from contextledger.store import Durability, SQLiteStore, StoreBusyError
from contextledger.store._writer import INLINE_COMMIT_BYTES

#: Snapshots often, so restarts load from a snapshot plus a short tail.
SNAPSHOT_EVERY = 40
#: A fixed clock: ids then differ by their counter only, and runs are reproducible.
NOW_MS = 1_700_000_000_000
#: ``CHECKPOINT_BYTES``, ``WAL_RESTART_BYTES`` and ``WAL_LIMIT_BYTES`` of the writers that
#: checkpoint at small sizes.
SMALL_WAL = (16 * 1024, 64 * 1024, 128 * 1024)


class Writer:
    """Makes the next batch for a session, continuing whatever the history holds."""

    def __init__(self, history: History, rng: random.Random) -> None:
        self.session_id = history.session_id
        self.rng = rng
        index = history.index
        self.message_ids = IdGenerator("msg", last=index.last_message_id or None)
        self.part_ids = IdGenerator("prt", last=index.last_part_id or None)
        self.last_user_id: str | None = None
        self.uncleared: list[str] = []
        for message in history.messages:
            if message.role == "user":
                self.last_user_id = message.id
            for part in message.parts:
                if (
                    isinstance(part, ToolPart)
                    and isinstance(part.state, ToolCompleted)
                    and part.state.compacted_ms is None
                ):
                    self.uncleared.append(part.id)

    def next_batch(self) -> list[Event]:
        roll = self.rng.random()
        if roll < 0.3:
            return [self.user_message()]
        if roll < 0.4 and self.uncleared:
            return [self.clear_tools()]
        return self.assistant_turn(huge=roll > 0.999)

    def user_message(self) -> MessageAdded:
        message_id = self.message_ids.next(NOW_MS)
        self.last_user_id = message_id
        return MessageAdded(session_id=self.session_id, message_id=message_id, role="user")

    def clear_tools(self) -> ToolOutputCleared:
        count = min(len(self.uncleared), self.rng.randint(1, 3))
        cleared, self.uncleared = self.uncleared[:count], self.uncleared[count:]
        return ToolOutputCleared(
            session_id=self.session_id, part_ids=tuple(cleared), reason="normal"
        )

    def assistant_turn(self, *, huge: bool) -> list[Event]:
        sid = self.session_id
        message_id = self.message_ids.next(NOW_MS)
        batch: list[Event] = [
            MessageAdded(
                session_id=sid, message_id=message_id, role="assistant", parent_id=self.last_user_id
            )
        ]
        if huge:
            text = "h" * (INLINE_COMMIT_BYTES + 1)
            part = TextPart(id=self.part_ids.next(NOW_MS), message_id=message_id, text=text)
            batch.append(PartAdded(session_id=sid, part=part))
        completed: list[str] = []
        for _ in range(self.rng.randint(0, 4)):
            part_id = self.part_ids.next(NOW_MS)
            if self.rng.random() < 0.5:
                text = "t" * self.rng.randint(1, 400)
                part = TextPart(id=part_id, message_id=message_id, text=text)
                batch.append(PartAdded(session_id=sid, part=part))
            else:
                call = ToolPart(
                    id=part_id,
                    message_id=message_id,
                    call_id=f"call_{part_id}",
                    tool="read",
                    state=ToolPending(input={"path": f"{part_id}.py"}),
                )
                done = ToolCompleted(input={"path": f"{part_id}.py"}, output="o" * 300)
                batch.append(PartAdded(session_id=sid, part=call))
                batch.append(
                    ToolStateChanged(
                        session_id=sid, message_id=message_id, part_id=part_id, state=done
                    )
                )
                completed.append(part_id)
        finished = AssistantFinished(
            session_id=sid, message_id=message_id, finish=f"stop:{len(batch) + 1}"
        )
        batch.append(finished)
        self.uncleared.extend(completed)
        return batch


async def main(path: str, session_id: str, seed: int) -> None:
    rng = random.Random(seed)
    durability: Durability = "full" if rng.random() < 0.3 else "normal"
    if rng.random() < 0.5:
        names = ("CHECKPOINT_BYTES", "WAL_RESTART_BYTES", "WAL_LIMIT_BYTES")
        for name, value in zip(names, SMALL_WAL, strict=True):
            setattr(checkpointer_module, name, value)
    async with SQLiteStore.open(path, durability=durability) as store:
        log = await SessionLog.open(store, session_id, snapshot_every=SNAPSHOT_EVERY)
        if log.history.seq == 0:
            await append(log, [SessionStarted(session_id=session_id, title="crash test")])
        writer = Writer(log.history, rng)
        while True:
            await append(log, writer.next_batch())


async def append(log: SessionLog, batch: list[Event]) -> None:
    """Append ``batch`` and acknowledge it; when the other writers kept the file locked
    longer than the store waits, nothing was written, so try the same batch again (what
    ``StoreBusyError`` tells a caller to do)."""
    while True:
        try:
            recorded = await log.append(batch)
        except StoreBusyError as exc:
            print(f"retrying after: {exc}", file=sys.stderr, flush=True)
            continue
        print(recorded[-1].seq, flush=True)
        return


def serve() -> None:
    """The fork server (see the module docstring). Writers are forked before any trio run
    starts in this process, so each starts clean."""
    for line in sys.stdin:
        command, *args = line.split()
        if command == "start":
            db, session_id, seed, acks = args
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                fd = os.open(acks, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(fd, sys.stdout.fileno())
                try:
                    trio.run(main, db, session_id, int(seed))
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(1)
            print(pid, flush=True)
        elif command == "wait":
            _, status = os.waitpid(int(args[0]), 0)
            print(os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if sys.argv[1] == "--serve":
        serve()
    else:
        trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
