"""Looking after a store file: ``check`` verifies every page, row, seq and snapshot and
reports each problem with where it is; ``delete`` and ``gc`` delete sessions and give the
room back; ``export`` and ``restore`` move a session through a portable file."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import msgspec

from contextledger.cli._output import (
    amount,
    check_out,
    emit_json,
    emit_table,
    emit_text,
    write_out,
)
from contextledger.ledger import (
    check_sessions,
    delete_session,
    expire_sessions,
    export_session,
    read_export,
)
from contextledger.store._checker import Problem
from contextledger.store._errors import ConcurrencyError, StoreError
from contextledger.store._sqlite import SQLiteStore

_DAY_MS = 86_400_000
#: The exit status of ``check`` when it finds a problem (argparse's usage errors are 2).
PROBLEMS_FOUND = 1


def add_parsers(sub: Any) -> None:
    """The arguments of ``check``, ``delete``, ``gc``, ``export`` and ``restore``."""
    checked = sub.add_parser("check", help="verify every page, row, seq and snapshot of a database")
    checked.add_argument("db", type=Path)
    deleted = sub.add_parser("delete", help="delete a session with its child sessions")
    deleted.add_argument("db", type=Path)
    deleted.add_argument("--session", required=True)
    collected = sub.add_parser("gc", help="delete old sessions and shrink the file")
    collected.add_argument("db", type=Path)
    days = "delete session trees whose newest event is older (default: delete nothing)"
    collected.add_argument("--older-than", type=_days, metavar="DAYS", help=days)
    exported = sub.add_parser("export", help="write a session to a portable file")
    exported.add_argument("db", type=Path)
    exported.add_argument("--session", required=True)
    exported.add_argument("--out", type=Path, required=True, help="the file (JSON lines)")
    restored = sub.add_parser("restore", help="write an exported session into a database")
    restored.add_argument("file", type=Path)
    restored.add_argument("--db", type=Path, required=True)
    for command in (checked, deleted, collected, exported, restored):
        command.add_argument("--json", action="store_true")


def _days(text: str) -> float:
    """``--older-than``'s number of days; one whose milliseconds are not a finite float
    (``inf``, ``nan``, ``1e306``) or a negative one is an argument error."""
    try:
        days = float(text)
    except ValueError:
        days = math.nan
    if not math.isfinite(days * _DAY_MS):
        raise argparse.ArgumentTypeError(f"must be a finite number of days, not {text!r}")
    if days < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more days, not {text!r}")
    return days


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
    if args.json:
        # Keys without a value are left out, the problems' too (``Problem`` omits its defaults).
        report = {"ok": not problems, "sessions": sessions, "problems": problems}
        emit_json({key: value for key, value in report.items() if value is not None})
    elif problems:
        rows = [msgspec.structs.asdict(p) for p in problems]
        emit_table(rows, ["kind", "stream", "position", "seq", "detail"])
    else:
        counted = amount(sessions or 0, "sessions")
        emit_text(f"ok: {counted}, every page, row, seq and snapshot checked")
    return PROBLEMS_FOUND if problems else 0


async def delete(args: argparse.Namespace) -> None:
    """Delete ``args.session`` with its child sessions (``delete_session``)."""
    async with SQLiteStore.open(args.db, create=False) as store:
        sessions, events = await delete_session(store, args.session)
    if not sessions:
        raise ValueError(f"no session {args.session!r} in {args.db}")
    if args.json:
        emit_json({"sessions": sessions, "events": events})
    else:
        emit_table([{"session": s} for s in sessions], ["session"])
        emit_text(f"deleted {amount(len(sessions), 'sessions')} ({amount(events, 'events')})")


async def gc(args: argparse.Namespace) -> None:
    """Delete the session trees older than ``args.older_than`` days (when given), then give
    the room back to the file system (``reclaim_space``)."""
    sessions: list[str] = []
    events = 0
    async with SQLiteStore.open(args.db, create=False) as store:
        if args.older_than is not None:
            cutoff = time.time_ns() // 1_000_000 - int(args.older_than * _DAY_MS)
            sessions, events = await expire_sessions(store, cutoff)
        before, after = await store.reclaim_space()
    result = {"sessions": sessions, "events": events, "bytes_before": before, "bytes_after": after}
    if args.json:
        emit_json(result)
    else:
        emit_text(f"deleted {amount(len(sessions), 'sessions')} ({amount(events, 'events')})")
        emit_text(f"file and WAL: {before:,} bytes before, {after:,} after")


async def export(args: argparse.Namespace) -> None:
    """Write ``args.session`` to ``args.out`` as a portable file (``export_session``),
    atomically."""
    check_out(args.out, "export")
    async with SQLiteStore.open(args.db, create=False) as store:
        lines = [line async for line in export_session(store, args.session)]
    write_out(args.out, b"".join(lines).decode())
    result = {"session": args.session, "events": len(lines) - 1, "file": str(args.out)}
    if args.json:
        emit_json(result)
    else:
        emit_text(f"exported {result['events']} events of {args.session} to {args.out}")


async def restore(args: argparse.Namespace) -> None:
    """Write the session of an exported file into ``args.db``: the whole file is read and
    checked (``read_export``) before the database is opened (or created)."""
    if not args.file.is_file():
        raise ValueError(f"no exported session at {args.file}")
    with args.file.open("rb") as lines:
        exported = read_export(lines)
    async with SQLiteStore.open(args.db) as store:
        try:
            log = await exported.write(store)
        except ConcurrencyError as exc:
            raise ValueError(f"session {exported.session_id!r} is in {args.db} already") from exc
    result = {"session": log.session_id, "events": log.history.seq, "db": str(args.db)}
    if args.json:
        emit_json(result)
    else:
        emit_text(f"restored {log.history.seq} events of {log.session_id} into {args.db}")
