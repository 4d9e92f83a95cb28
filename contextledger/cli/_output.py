"""The CLI's output layer: the only place that writes to stdout."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TextIO

import msgspec

from contextledger.report import write_report
from contextledger.simulation._viewdiff import DiffLine, Elided

_json = msgspec.json.Encoder()


def emit_json(value: Any) -> None:
    """Write ``value`` as one JSON document and a newline."""
    sys.stdout.write(_json.encode(value).decode() + "\n")


def emit_text(text: str) -> None:
    """Write a line of text."""
    print(text)


def emit_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], *, title: str = ""
) -> None:
    """Write ``rows`` as an aligned text table of ``columns``."""
    if title:
        print(title)
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


#: ANSI styles of diff lines: removed red, added green, identical grey.
_DIFF_STYLES: Final = {
    "removed": ("-", "\x1b[31m"),
    "added": ("+", "\x1b[32m"),
    "same": (" ", "\x1b[90m"),
}


def emit_diff(lines: Sequence[DiffLine | Elided], *, color: bool | None = None) -> None:
    """Write diff lines prefixed ``-`` (removed), ``+`` (added) or a space (identical), an
    ``Elided`` run as ``... N identical lines ...``; in colour when ``color`` is true, or, when
    it is None, when stdout is a terminal and ``NO_COLOR`` is unset or empty."""
    if color is None:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    for line in lines:
        if isinstance(line, Elided):
            style = _DIFF_STYLES["same"][1]
            text = f"... {line.count:,} identical lines ..."
        else:
            prefix, style = _DIFF_STYLES[line.kind]
            text = f"{prefix}{line.text}"
        print(f"{style}{text}\x1b[0m" if color else text)


def check_out(path: Path, what: str) -> None:
    """Raise ``ValueError`` unless ``path`` can be written as a file: not a folder, in a
    folder that exists (checked before a command does its work)."""
    if path.is_dir() or not path.parent.is_dir():
        raise ValueError(f"cannot write the {what} at {path}: not a file in a folder")


def write_out(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (``write_report``): the old file or the whole new
    one. An ``OSError`` (no room, no permission) raises ``ValueError``."""
    try:
        write_report(path, text)
    except OSError as exc:
        raise ValueError(f"cannot write {path}: {exc}") from exc


def amount(n: int, plural: str) -> str:
    """``n`` with ``plural`` (a word ending in "s"), singular for one: ``1 session``,
    ``1,683 sessions``."""
    return f"{n:,} {plural[:-1] if n == 1 and plural.endswith('s') else plural}"


def progress_line(label: str, done: int, total: int, note: str = "", *, width: int = 20) -> str:
    """``label [#####.....] done/total note``: a bar of ``width`` cells, filled in proportion."""
    filled = width * min(done, total) // total if total > 0 else width
    line = f"{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
    return f"{line} {note}" if note else line


class Progress:
    """A progress bar redrawn in place on ``stream`` (stderr by default), drawn only when the
    stream is a terminal, so pipes, files and tests get nothing. ``update`` fits the library's
    ``on_progress(done, total, label)`` callbacks."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self._label = label
        self._stream = sys.stderr if stream is None else stream
        self._live = self._stream.isatty()
        self._drawn = 0

    def update(self, done: int, total: int, note: str = "") -> None:
        """Redraw the bar at ``done`` of ``total`` units, with ``note`` after it."""
        if not self._live:
            return
        columns = shutil.get_terminal_size().columns - 1
        line = progress_line(self._label, done, total, note)[:columns]
        self._stream.write("\r" + line.ljust(self._drawn))
        self._stream.flush()
        self._drawn = len(line)

    def close(self) -> None:
        """End the bar's line, leaving its last state on screen."""
        if self._drawn:
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
