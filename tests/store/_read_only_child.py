"""The child process of ``test_faults.py``'s read-only media test, run on a read-only mount.

Usage: ``python _read_only_child.py DB``

Opens the store at DB, reads every session through the store and ``SessionLog``, checks the
file, tries an append and a snapshot, and prints what it found as one JSON document.
"""

from __future__ import annotations

import json
import os
import sys

import trio

from contextledger.events import MemoryPinned
from contextledger.ledger import SessionLog, check_sessions
from contextledger.store import Snapshot, SQLiteStore, StoreError


async def main(path: str) -> None:
    found: dict[str, object] = {}
    async with SQLiteStore.open(path, create=False) as store:
        found["read_only"] = store.read_only
        streams = await store.streams()
        found["events"] = {s: len(await store.read(s)) for s in streams}
        found["seqs"] = {s: (await SessionLog.open(store, s)).history.seq for s in streams}
        found["problems"] = len(await store.check()) + len(await check_sessions(store))
        refused = []
        for write in (
            store.append("new", 0, [MemoryPinned(session_id="new", text="x")]),
            store.save_snapshot(Snapshot("new", 1, 1, b"")),
        ):
            try:
                await write
            except StoreError as exc:
                refused.append(type(exc).__name__)
        found["refused"] = refused
    found["files"] = sorted(os.listdir(os.path.dirname(path)))
    print(json.dumps(found))


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
