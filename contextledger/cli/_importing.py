"""``import``: transcripts (one, or a folder of them) into a store.

A transcript is imported twice, its events streamed both times (``importers.streaming``), so
memory is bounded by a batch and what the format keeps per conversation, not by the file. The
first import counts the events and checks the input: an invalid conversation is refused (in
strict mode) before anything is written, and the report and each session's first event
(which names the number of events) are known. The second writes the events as they are
built, in small appends (at most ``WRITE_BATCH`` events and ``WRITE_BYTES`` of encodings), no
projection of a session built (its first reader builds one). A session new to the store is
all or nothing: when a write fails or is cancelled, what was written of it is deleted. A
session already in the store (its transcript grew, or a run was killed while writing it) is
compared with the transcript event by event: the rest is appended when the stored events are
its start, and ``StoredSessionDiffers`` names the first difference otherwise. The loss a
lenient import recorded (``InputLeftOut``) is no difference: a grown transcript imported
leniently is appended to, with a new ``InputLeftOut`` for the items not recorded yet.
"""

from __future__ import annotations

import argparse
from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec
import trio

from contextledger.cli._analysis import report_lines
from contextledger.cli._output import Progress, emit_json, emit_table, emit_text
from contextledger.events._catalogue import (
    Event,
    InputLeftOut,
    LeftOut,
    RecordedEvent,
    SessionStarted,
)
from contextledger.events._codec import DEFAULT_CODEC
from contextledger.events._errors import LedgerError
from contextledger.events._parts import struct_tag
from contextledger.history._validation import SessionIndex, validate_events
from contextledger.importers import Streamed, Tally, streaming
from contextledger.importers._detect import import_with_report, source_digest, transcripts_under
from contextledger.importers._grown import (
    SOURCE_EVENTS,
    SOURCE_HASH,
    Difference,
    StoredSessionDiffers,
    first_difference,
)
from contextledger.importers._imported import ImportedSession
from contextledger.importers._openhands_v1 import is_conversation_folder
from contextledger.importers._report import ImportReport, ImportResult
from contextledger.store._errors import ConcurrencyError
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
                result, tally = _counted(path, args)
                run = partial(
                    import_with_report, path, session_id=args.session, lenient=args.lenient
                )
                rows.extend(await write_sessions(args.db, result, tally, digest, run))
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


def _counted(path: Path, args: argparse.Namespace) -> tuple[ImportResult, Tally]:
    """The import of ``path`` with its events counted, not kept, and the sink that counted
    them."""
    tally = Tally()
    with streaming(tally):
        result = import_with_report(path, session_id=args.session, lenient=args.lenient)
    return result, tally


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


class TranscriptChanged(ValueError):
    """The transcript read differently the second time (it was written to during the import):
    nothing of it is left in the store."""

    def __init__(self, source: str) -> None:
        super().__init__(
            f"cannot import {source}: it changed while it was imported; nothing of it was "
            "written (import it again)"
        )


async def write_sessions(
    db: Path, counted: ImportResult, tally: Tally, digest: str, run: Callable[[], ImportResult]
) -> list[dict[str, Any]]:
    """Write the sessions of a transcript to ``db`` as ``run`` (its import again, in a worker
    thread) builds them (see the module docstring). ``counted`` is its first, counting import
    (``tally``, the sink of that import, names each buffer's session). Each session is
    finished (its last batch written) as soon as it is built, but the first: its first event
    carries ``digest`` and its number of events, and it is finished last, so a file's hash
    stands for the whole file written. When the import fails, each session new to the store
    and not finished is deleted again (but one another writer replaced meanwhile, whose
    append was refused); when the second import read differently from the
    first (``TranscriptChanged``) or a session in the store differs from the transcript
    (``StoredSessionDiffers``), every session new to the store."""
    source = counted.report.source
    first, *rest = [s for top in counted.sessions for s in top.sessions()]
    started = first.events[0]
    assert isinstance(started, SessionStarted)
    marks = {SOURCE_HASH: digest, SOURCE_EVENTS: first.event_count}
    first.events[0] = msgspec.structs.replace(started, config={**started.config, **marks})
    async with SQLiteStore.open(db) as store:
        targets = [await _Target.open(store, session, source) for session in [*rest, first]]
        by_id = {target.session.session_id: target for target in targets}
        ordinals = {n: by_id[s] for n, s in tally.session_ids.items() if s in by_id}
        writer = _Writer(ordinals, last=targets[-1])
        try:
            again = await trio.to_thread.run_sync(_streamed, writer, run)
            if (again.report.read, again.report.left_out) != (
                counted.report.read,
                counted.report.left_out,
            ):
                raise TranscriptChanged(source)
            for target in targets:
                if not target.done:
                    await target.finish()
        except BaseException as exc:
            whole = isinstance(exc, TranscriptChanged | StoredSessionDiffers)
            cut = [
                t
                for t in targets
                if t.stored == 0 and t.written and not t.lost and (whole or not t.done)
            ]
            with trio.CancelScope(shield=True):
                await store.delete_streams([t.session.session_id for t in cut])
            raise
    return [_row(target) for target in targets]


def _streamed(writer: _Writer, run: Callable[[], ImportResult]) -> ImportResult:
    with streaming(writer):
        return run()


class _Writer:
    """The sink of the writing import: each buffer's events go to its session's ``_Target``
    (a buffer that became no session is dropped), written from the worker thread through
    trio."""

    def __init__(self, targets: dict[int, _Target], *, last: _Target) -> None:
        self._targets = targets
        self._last = last
        self._opened = 0

    def open(self) -> int:
        self._opened += 1
        return self._opened - 1

    def take(self, ordinal: int, events: list[Event]) -> None:
        target = self._targets.get(ordinal)
        if target is not None:
            target.taken += len(events)
            for batch in target.batches(events):
                trio.from_thread.run(target.write, batch)

    def close(self, ordinal: int, session_id: str) -> Streamed:
        """Finish the session (unless it is the one finished last); return what the counting
        import counted of it (the same events)."""
        target = self._targets.get(ordinal)
        if target is None:
            return Streamed()
        streamed = target.session.streamed or Streamed()
        if target.taken != streamed.events:
            raise TranscriptChanged(target.source)
        if target is not self._last:
            trio.from_thread.run(target.finish)
        return streamed


class _Target:
    """One session being written: its ``SessionStarted`` first, then the events of the
    writing import, then the events added after it (``InputLeftOut``). Batches of at most
    ``WRITE_BATCH`` events and ``WRITE_BYTES`` of encodings are written as they fill; the
    last is written by ``finish``.

    Each batch is checked as ``SessionLog.append`` checks it (type-checked copies, validated
    against what came before), but against the session's ``SessionIndex`` alone: no
    projection is built and no snapshot written, since the import only writes the session
    (its first reader builds both); each append expects the stream to end at the event this
    import last read or wrote (a session deleted and written again meanwhile, to as many
    events, is refused: ``ConcurrencyError``). While the store holds more of the session
    (``stored``), events are compared with it instead of written; the loss a lenient import
    recorded there (``InputLeftOut``) is compared with the transcript's, and only items not
    recorded yet are recorded again."""

    def __init__(self, store: SQLiteStore, session: ImportedSession, source: str) -> None:
        self.store, self.session, self.source = store, session, source
        self.index = SessionIndex(session.session_id)
        self.stored = 0
        self.written = 0
        self.taken = 0
        self.done = False
        self.lost = False
        self._pending: list[Event] = []
        self._pending_bytes = 0
        self._started = False
        self._cursor = 1
        self._window: deque[RecordedEvent] = deque()
        self._position = 0
        self._recorded: dict[LeftOut, int] = {}

    @classmethod
    async def open(cls, store: SQLiteStore, session: ImportedSession, source: str) -> _Target:
        target = cls(store, session, source)
        target.stored = await store.stream_version(session.session_id)
        return target

    def batches(self, events: list[Event]) -> Iterator[list[Event]]:
        """Add ``events`` (of the session's buffer) after those pending; yield each full batch
        (the last event stays pending)."""
        if not self._started:
            self._started = True
            events = [self.session.events[0], *events]
        session_id = self.session.session_id
        for event in events:
            if event.session_id != session_id:
                event = msgspec.structs.replace(event, session_id=session_id)
            size = len(DEFAULT_CODEC.encode(event))
            full = len(self._pending) >= WRITE_BATCH or self._pending_bytes >= WRITE_BYTES
            if self._pending and full:
                yield self._pending
                self._pending, self._pending_bytes = [], 0
            self._pending.append(event)
            self._pending_bytes += size

    async def write(self, batch: list[Event]) -> None:
        """Write ``batch``: what the store holds already is compared, the rest appended."""
        new: list[Event] = []
        for event in batch:
            kept = await self._matched(event)
            if kept is not None:
                new.append(kept)
        if new:
            typed = DEFAULT_CODEC.typed_copies(new)
            validate_events(self.index, typed)
            version = self.stored + self.written
            try:
                recorded = await self.store.append(
                    self.session.session_id, version, typed, expected_position=self._position
                )
            except ConcurrencyError:
                self.lost = True  # another writer's session now: the import leaves it alone
                raise
            self._position = recorded[-1].position
            for event in typed:
                self.index.note(event)
            self.written += len(typed)

    async def finish(self) -> None:
        """Write the last batch and the events added after the import; raise
        ``StoredSessionDiffers`` when the store holds events the transcript lacks."""
        for batch in self.batches(self.session.events[1:]):
            await self.write(batch)
        await self.write(self._pending)
        self._pending = []
        extra = await self._next_stored()
        if extra is not None:
            difference = Difference(
                seq=self._cursor - 1, field="", stored=struct_tag(extra), imported="no event"
            )
            raise StoredSessionDiffers(self.source, self.session.session_id, difference)
        self.done = True

    @property
    def status(self) -> str:
        if self.stored == 0:
            return "written"
        return "appended" if self.written else "present"

    async def _matched(self, event: Event) -> Event | None:
        """``event``, to be written; or, while the store holds more of the session, ``None``
        when it equals the stored event at its place (``StoredSessionDiffers`` otherwise). A
        transcript's ``InputLeftOut`` keeps the items no stored one records."""
        stored = await self._next_stored()
        seq = self._cursor - 1
        if isinstance(event, InputLeftOut):
            if stored is not None:
                found = Difference(
                    seq=seq, field="", stored=struct_tag(stored), imported="no event"
                )
                raise StoredSessionDiffers(self.source, self.session.session_id, found)
            for item, at in self._recorded.items():
                if item not in event.items:
                    found = Difference(
                        seq=at, field="items", stored=repr(item.reason), imported="not left out"
                    )
                    raise StoredSessionDiffers(self.source, self.session.session_id, found)
            missing = tuple(item for item in event.items if item not in self._recorded)
            return msgspec.structs.replace(event, items=missing) if missing else None
        if stored is None:
            return event
        difference = first_difference([stored], [event], first_seq=seq)
        if difference is not None:
            raise StoredSessionDiffers(self.source, self.session.session_id, difference)
        return None

    async def _next_stored(self) -> Event | None:
        """The next stored event not yet compared, each read noted in the index; the loss a
        stored ``InputLeftOut`` records is kept aside (``None`` past the stored events)."""
        while self._cursor <= self.stored:
            if not self._window:
                rows = await self.store.read(self.session.session_id, self._cursor, WRITE_BATCH)
                if not rows:  # deleted meanwhile, maybe to be written again by another writer
                    self.lost = True
                    now = await self.store.stream_version(self.session.session_id)
                    raise ConcurrencyError(self.session.session_id, self.stored, now)
                self._window.extend(rows)
            row = self._window.popleft()
            event, self._position = row.event, row.position
            self._cursor += 1
            self.index.note(event)
            if not isinstance(event, InputLeftOut):
                return event
            self._recorded.update(dict.fromkeys(event.items, self._cursor - 1))
        return None


def _row(target: _Target) -> dict[str, Any]:
    session = target.session
    written = session.written()
    return {
        "session": session.session_id,
        "source": target.source,
        "status": target.status,
        "events": session.event_count,
        "messages": sum(n for key, n in written.items() if key.endswith(" messages")),
        "tool_calls": written.get("tool calls", 0),
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
    if rows:
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
