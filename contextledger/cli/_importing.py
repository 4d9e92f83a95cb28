"""``import``: transcripts (one, or a folder of them) into a store.

A transcript's sessions are imported whole, then each is written in small appends (at most
``WRITE_BATCH`` events and ``WRITE_BYTES`` of encodings), each batch released once written:
the type-checked copies and encodings of a long session never exist all at once, and no
projection of it is built (its first reader builds one). A session new to the store is all
or nothing: when a write fails or is cancelled, what was written of it is deleted. A session
already in the store (its transcript grew, or a run was killed while writing it) is compared
with the transcript event by event: the rest is appended when the stored events are its
start, and ``StoredSessionDiffers`` names the first difference otherwise.
"""

from __future__ import annotations

import argparse
from itertools import islice
from pathlib import Path
from typing import Any, Final

import msgspec
import trio

from contextledger.cli._analysis import report_lines
from contextledger.cli._output import Progress, emit_json, emit_table, emit_text
from contextledger.events._catalogue import Event, MessageAdded, PartAdded, SessionStarted
from contextledger.events._codec import DEFAULT_CODEC
from contextledger.events._errors import LedgerError
from contextledger.events._parts import ToolPart
from contextledger.history._validation import SessionIndex, validate_events
from contextledger.importers._detect import import_with_report, source_digest, transcripts_under
from contextledger.importers._grown import (
    SOURCE_EVENTS,
    SOURCE_HASH,
    StoredSessionDiffers,
    first_difference,
)
from contextledger.importers._imported import ImportedSession
from contextledger.importers._openhands_v1 import is_conversation_folder
from contextledger.importers._report import ImportReport
from contextledger.store._sqlite import SQLiteStore

#: Events per append at most: enough to spread a transaction's cost thin.
WRITE_BATCH: Final = 200
#: Encoded bytes per append at most (but one event): the batch's type-checked copies stay small
#: next to what is imported, however large its events are. Decoded, events of many small JSON
#: values weigh up to 8 times their encoding (an OpenHands V1 batch of 83 KB peaks at 0.7 MB);
#: 200 events of the shared opencode export are 0.4-1.5 MB encoded.
WRITE_BYTES: Final = 1 << 14


async def import_(args: argparse.Namespace) -> None:
    """Import ``args.trace`` (a transcript, or a folder of them) into ``args.db``; skip each
    transcript imported before (by content hash; ``--session`` imports one again under that
    name). Print (or return with ``--json``) the sessions and the report of what was read,
    written and left out. A transcript that cannot be imported stops a single import; in a
    folder it is listed as failed, the others are imported and the command fails at the
    end."""
    paths = _transcripts(args.trace)
    if args.session is not None and len(paths) != 1:
        raise ValueError("--session names one session: give a transcript, not a folder")
    done = await _imported_hashes(args.db)
    rows: list[dict[str, Any]] = []
    reports: list[ImportReport] = []
    skipped: list[str] = []
    failed: list[dict[str, str]] = []
    with Progress("import") as bar:
        for n, path in enumerate(paths):
            bar.update(n, len(paths), path.name)
            try:
                digest = source_digest(path)
                if digest in done and args.session is None:
                    skipped.append(str(path))
                    continue
                result = import_with_report(path, session_id=args.session, lenient=args.lenient)
                rows.extend(await write_sessions(args.db, result.sessions, digest, str(path)))
            except (OSError, LedgerError, ValueError) as exc:
                if len(paths) == 1:
                    raise _unreadable(path, exc) from exc
                failed.append({"source": str(path), "error": str(_unreadable(path, exc))})
                continue
            done.add(digest)
            reports.append(result.report)
        bar.update(len(paths), len(paths))
    _print_import(args, rows, reports, skipped, failed)
    if failed:
        raise ValueError(f"{len(failed):,} of {len(paths):,} transcripts were not imported")


def _transcripts(path: Path) -> list[Path]:
    """The transcripts ``path`` names: itself, or those under it (see ``transcripts_under``)."""
    if path.is_dir() and not is_conversation_folder(path):
        found = transcripts_under(path)
        if not found:
            raise ValueError(f"no transcript under {path}")
        return found
    return [path]


def _unreadable(path: Path, exc: Exception) -> Exception:
    return ValueError(f"cannot read {path}: {exc}") if isinstance(exc, OSError) else exc


async def _imported_hashes(db: Path) -> set[str]:
    """The content hashes of the transcripts wholly imported into ``db`` (none when it is
    absent): a first session holding fewer events than its ``SOURCE_EVENTS`` was cut short."""
    if not db.exists():
        return set()
    hashes: set[str] = set()
    async with SQLiteStore.open(db, create=False) as store:
        for stream in await store.streams():
            (first,) = await store.read(stream, 1, 1)
            started = first.event
            if not isinstance(started, SessionStarted):
                continue
            digest, events = started.config.get(SOURCE_HASH), started.config.get(SOURCE_EVENTS)
            whole = events is None or events == await store.stream_version(stream)
            if isinstance(digest, str) and whole:
                hashes.add(digest)
    return hashes


async def write_sessions(
    db: Path, sessions: list[ImportedSession], digest: str, source: str
) -> list[dict[str, Any]]:
    """Write each of ``sessions`` (and their children) to ``db`` (see the module docstring),
    the first one last with ``digest`` and its number of events in its config, so a file's
    hash stands for the whole file written. The sessions' event lists are emptied as they are
    written."""
    first, *rest = [s for top in sessions for s in top.sessions()]
    started = first.events[0]
    assert isinstance(started, SessionStarted)
    marks = {SOURCE_HASH: digest, SOURCE_EVENTS: len(first.events)}
    first.events[0] = msgspec.structs.replace(started, config={**started.config, **marks})
    rows: list[dict[str, Any]] = []
    async with SQLiteStore.open(db) as store:
        for session in [*rest, first]:
            row = _row(session, source)
            row["status"] = await _write_session(store, session, source)
            rows.append(row)
    return rows


async def _write_session(store: SQLiteStore, session: ImportedSession, source: str) -> str:
    """Write ``session`` to ``store`` in batches, emptying its event list; return whether it
    was ``written``, ``appended`` to or already ``present`` whole.

    Each batch is checked as ``SessionLog.append`` checks it (type-checked copies, validated
    against what came before), but against the session's ``SessionIndex`` alone: no
    projection is built and no snapshot written, since the import only writes the session
    (its first reader builds both)."""
    session_id, events = session.session_id, session.events
    index = SessionIndex(session_id)
    stored = await store.stream_version(session_id)
    if stored:
        await _check_stored(store, session, source, stored, index)
        status = "present" if stored == len(events) else "appended"
    else:
        status = "written"
    del events[:stored]
    try:
        while events:
            typed = DEFAULT_CODEC.typed_copies(events[: _batch_size(events)])
            validate_events(index, typed)
            await store.append(session_id, stored, typed)
            for event in typed:
                index.note(event)
            stored += len(typed)
            del events[: len(typed)]
    except BaseException:
        if status == "written":
            with trio.CancelScope(shield=True):
                await store.delete_streams([session_id])
        raise
    return status


def _batch_size(events: list[Event]) -> int:
    """How many of ``events``, from the first, the next append writes: ``WRITE_BATCH`` at
    most, ending with the event that brings their encodings to ``WRITE_BYTES``."""
    size = 0
    for n, event in enumerate(islice(events, WRITE_BATCH), 1):
        size += len(DEFAULT_CODEC.encode(event))
        if size >= WRITE_BYTES:
            return n
    return min(len(events), WRITE_BATCH)


async def _check_stored(
    store: SQLiteStore, session: ImportedSession, source: str, stored: int, index: SessionIndex
) -> None:
    """Raise ``StoredSessionDiffers`` unless the ``stored`` events of ``session`` in ``store``
    are the start of its events, compared a batch at a time; note each in ``index``."""
    for start in range(0, stored, WRITE_BATCH):
        window = [r.event for r in await store.read(session.session_id, start + 1, WRITE_BATCH)]
        difference = first_difference(
            window, session.events[start : start + WRITE_BATCH], first_seq=start + 1
        )
        if difference is not None:
            raise StoredSessionDiffers(source, session.session_id, difference)
        for event in window:
            index.note(event)


def _row(session: ImportedSession, source: str) -> dict[str, Any]:
    events = session.events
    return {
        "session": session.session_id,
        "source": source,
        "status": "",
        "events": len(events),
        "messages": sum(isinstance(e, MessageAdded) for e in events),
        "tool_calls": sum(
            isinstance(e, PartAdded) and isinstance(e.part, ToolPart) for e in events
        ),
        "left_out": len(session.left_out),
    }


def _print_import(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    reports: list[ImportReport],
    skipped: list[str],
    failed: list[dict[str, str]],
) -> None:
    single = not args.trace.is_dir() or is_conversation_folder(args.trace)
    if args.json:
        out: dict[str, Any] = {"sessions": rows, "skipped": skipped, "failed": failed}
        out["reports"] = [msgspec.to_builtins(r) for r in reports]
        if single and reports:
            out["report"] = out["reports"][0]
        emit_json(out)
        return
    columns = ["session", "status", "events", "messages", "tool_calls", "left_out"]
    emit_table(rows, columns if single else ["source", *columns])
    if single:
        for report in reports:
            for line in report_lines(report):
                emit_text(line)
    else:
        emit_text(
            f"transcripts: {len(reports):,} imported, {len(skipped):,} imported before, "
            f"{len(failed):,} failed"
        )
    for item in failed:
        emit_text(f"failed: {item['error']}")
    if single and skipped:
        emit_text(f"{skipped[0]} was imported before: nothing written")
