"""The HTML report of a simulation: ``render_report`` turns ``simulate_paths`` results into one
self-contained page (inline CSS and SVG charts, the figures embedded as JSON); ``write_report``
writes it atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from contextledger.report._page import (
    DATA_ID,
    cache_hit_ratios,
    cumulative_cost,
    render_report,
    report_data,
)
from contextledger.report._svg import Point, frontier


def write_report(path: Path, html: str) -> None:
    """Write ``html`` to ``path`` (UTF-8) through a temporary file in the same folder, renamed
    over ``path`` once complete: ``path`` is either the old file or the whole new one, and no
    temporary file is left behind, even on an error."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            # Readable by others, as a file written with the usual umask (022) is; mkstemp
            # makes it 0600.
            os.fchmod(file.fileno(), 0o644)
            file.write(html)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


__all__ = [
    "DATA_ID",
    "Point",
    "cache_hit_ratios",
    "cumulative_cost",
    "frontier",
    "render_report",
    "report_data",
    "write_report",
]
