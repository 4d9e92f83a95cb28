"""``ImportReport``: what an import read, what it wrote and what it left out (each with its
line and reason), so that nothing is lost in silence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import msgspec

from contextledger.events._catalogue import LeftOut
from contextledger.importers._imported import ImportedSession


class ImportReport(msgspec.Struct, kw_only=True):
    """One file's import: its ``format``; ``read``, the input records by kind; ``written``, the
    sessions, messages, tool calls and events (by type) it became; ``left_out``, every record
    (or part of one) that became no event, in file order, with its line and reason."""

    source: str
    format: str
    read: dict[str, int]
    written: dict[str, int]
    left_out: list[LeftOut]

    def left_out_by_reason(self) -> list[tuple[str, str, list[int]]]:
        """The left-out items grouped by ``(kind, reason)`` (see ``by_reason``)."""
        return by_reason(self.left_out)


def by_reason(items: Iterable[LeftOut]) -> list[tuple[str, str, list[int]]]:
    """Left-out ``items`` grouped by ``(kind, reason)``, largest group first, each with the
    lines it was found on."""
    groups: dict[tuple[str, str], list[int]] = {}
    for item in items:
        groups.setdefault((item.kind, item.reason), []).append(item.line)
    ordered = sorted(groups.items(), key=lambda group: (-len(group[1]), group[0]))
    return [(kind, reason, lines) for (kind, reason), lines in ordered]


class ImportResult(msgspec.Struct, kw_only=True):
    """The sessions of one file and the report of their import."""

    sessions: list[ImportedSession]
    report: ImportReport


def import_report(sessions: Sequence[ImportedSession], *, source: str, fmt: str) -> ImportReport:
    """The report of importing ``sessions`` (and their children) from ``source``: the records
    read and the items left out as the importer recorded them, and what was written, counted
    on the events."""
    read: Counter[str] = Counter()
    written: Counter[str] = Counter()
    left_out: list[LeftOut] = []
    for top in sessions:
        for session in top.sessions():
            read.update(session.read)
            left_out.extend(session.left_out)
            written["sessions"] += 1
            written.update(session.written())
    return ImportReport(
        source=source,
        format=fmt,
        read=dict(sorted(read.items())),
        written=dict(sorted(written.items())),
        left_out=sorted(left_out, key=lambda item: item.line),
    )
