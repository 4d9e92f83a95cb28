"""The child process of ``test_faults.py``'s disk-full test: appends to one session until
the file size limit stops it.

Usage: ``python _full_child.py DB SESSION_ID SEED LIMIT_BYTES``

It opens the store, sets ``RLIMIT_FSIZE`` to LIMIT_BYTES (with ``SIGXFSZ`` ignored, so a
write past the limit fails instead of killing the process), and appends batches through
``SessionLog`` (snapshots every few batches). After each append returns it prints the last
recorded seq; when an append raises it prints ``error <type name>`` and exits.
"""

from __future__ import annotations

import logging
import random
import resource
import signal
import sys

import structlog
import trio
from _crash_child import Writer  # beside this script, which runs as a program

from contextledger.events import SessionStarted
from contextledger.ledger import SessionLog
from contextledger.store import SQLiteStore


async def main(path: str, session_id: str, seed: int, limit: int) -> None:
    rng = random.Random(seed)
    durability = "full" if seed % 2 else "normal"
    async with SQLiteStore.open(path, durability=durability) as store:
        log = await SessionLog.open(store, session_id, snapshot_every=10)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        writer = Writer(log.history, rng)
        try:
            recorded = await log.append([SessionStarted(session_id=session_id)])
            print(recorded[-1].seq, flush=True)
            while True:
                recorded = await log.append(writer.next_batch())
                print(recorded[-1].seq, flush=True)
        except Exception as exc:
            print(f"error {type(exc).__name__}", flush=True)


if __name__ == "__main__":
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
