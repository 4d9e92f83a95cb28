"""``check``: verify a store file, every page, row, seq and snapshot, and report each problem
with where it is."""

from __future__ import annotations

import argparse

import msgspec

from contextledger.cli._output import emit_json, emit_table, emit_text
from contextledger.ledger import check_sessions
from contextledger.store._checker import Problem
from contextledger.store._errors import StoreError
from contextledger.store._sqlite import SQLiteStore

#: The exit status of ``check`` when it finds a problem (argparse's usage errors are 2).
PROBLEMS_FOUND = 1


async def check(args: argparse.Namespace) -> int:
    """Check ``args.db`` (``SQLiteStore.check`` and ``check_sessions``); print every problem
    and return ``PROBLEMS_FOUND`` when there is one, else 0."""
    try:
        async with SQLiteStore.open(args.db, create=False) as store:
            problems = await store.check()
            if not problems:
                problems = await check_sessions(store)
            sessions = len(await store.streams()) if not problems else None
    except StoreError as exc:
        problems, sessions = [Problem("sqlite", str(exc))], None
    rows = [msgspec.structs.asdict(p) for p in problems]
    if args.json:
        emit_json({"ok": not problems, "sessions": sessions, "problems": rows})
    elif problems:
        emit_table(rows, ["kind", "stream", "position", "seq", "detail"])
    else:
        noun = "session" if sessions == 1 else "sessions"
        emit_text(f"ok: {sessions} {noun}, every page, row, seq and snapshot checked")
    return PROBLEMS_FOUND if problems else 0
