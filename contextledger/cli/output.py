"""The CLI's output layer: the only place that writes to stdout."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

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
