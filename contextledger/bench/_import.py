"""``import``: how fast the importers read, and how much memory they hold, per format.

For each format, the largest transcript of it in the traces folder (an OpenHands V1
conversation folder counts as the sum of its files) is imported with ``import_with_report``
(leniently: one shared transcript is no valid conversation), as ``contextledger import`` does
before it writes.

Method. Speed: wall time of the import with nothing traced, the median of 1 run (``--full``: 5),
as input MB per second. Memory: the same import again under ``tracemalloc``, its peak of
Python-allocated memory (msgspec and the json module allocate through Python's allocator, so
the decoded records, the events and the result are all counted; the interpreter and the
modules loaded before are not), reset just before the import. ``peak_mb_per_input_mb`` is that
peak over the input's size, the largest over the formats (target <= 3): the result (every event
of the file) is held at the end, so the figure can never fall far below what the events weigh.

``--events N`` picks the smallest transcript of each format instead (for tests). Keys:
``formats`` (per format: ``source``, ``input_mb``, ``seconds``, ``mb_per_s``, ``peak_mb``,
``peak_mb_per_input_mb``, ``events``), ``peak_mb_per_input_mb``, ``worst_format``,
``min_mb_per_s``, ``target_met``. Without traces: ``{"available": false, "reason": ...}``.
"""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path
from typing import Any, Final

from contextledger.bench._common import Options, median, table
from contextledger.bench._estimation import DEFAULT_TRACES
from contextledger.importers import detect_format, import_with_report, transcripts_under

#: Peak memory per input MB the importers should stay under.
PEAK_TARGET: Final = 3.0
#: Timed runs per transcript: one by default (the largest files take seconds), five at full size.
RUNS: Final = 1
RUNS_FULL: Final = 5
_MB: Final = 1024 * 1024


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def pick(traces: Path, *, largest: bool) -> dict[str, Path]:
    """The largest (or smallest) transcript of each format under ``traces``, by format."""
    chosen: dict[str, Path] = {}
    for path in transcripts_under(traces):
        fmt = detect_format(path)
        best = chosen.get(fmt)
        if best is None or (_size(path) > _size(best)) == largest:
            chosen[fmt] = path
    return dict(sorted(chosen.items()))


def measure(path: Path, runs: int) -> dict[str, Any]:
    """The speed and peak memory of importing ``path`` (see the module docstring)."""
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        result = import_with_report(path, lenient=True)
        seconds.append(time.perf_counter() - started)
        del result
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = import_with_report(path, lenient=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    input_mb = _size(path) / _MB
    took = median(seconds)
    return {
        "source": f"{path.parent.name}/{path.name}",
        "input_mb": round(input_mb, 3),
        "seconds": round(took, 3),
        "mb_per_s": round(input_mb / max(took, 1e-9), 2),
        "peak_mb": round(peak / _MB, 2),
        "peak_mb_per_input_mb": round(peak / _MB / input_mb, 2),
        "events": sum(len(s.events) for top in result.sessions for s in top.sessions()),
    }


def run(options: Options, traces: Path = DEFAULT_TRACES) -> dict[str, Any]:
    """Measure each format's transcript and return the figures (see the module docstring)."""
    if not traces.is_dir():
        return {"available": False, "reason": f"no traces under {traces}"}
    chosen = pick(traces, largest=not options.events)
    runs = RUNS_FULL if options.full else RUNS
    formats = {fmt: measure(path, runs) for fmt, path in chosen.items()}
    worst = max(formats, key=lambda fmt: formats[fmt]["peak_mb_per_input_mb"])
    peak = formats[worst]["peak_mb_per_input_mb"]
    return {
        "available": True,
        "formats": formats,
        "peak_mb_per_input_mb": peak,
        "worst_format": worst,
        "min_mb_per_s": min(f["mb_per_s"] for f in formats.values()),
        "target_met": peak <= PEAK_TARGET,
    }


def render(result: dict[str, Any]) -> str:
    """The figures as a table, one row per format."""
    if not result["available"]:
        return f"import: {result['reason']}\n"
    rows = [["format", "transcript", "MB", "s", "MB/s", "peak MB", "peak/input"]]
    for fmt, f in result["formats"].items():
        rows.append(
            [
                fmt,
                f["source"],
                f"{f['input_mb']:.2f}",
                f"{f['seconds']:.2f}",
                f"{f['mb_per_s']:.1f}",
                f"{f['peak_mb']:.1f}",
                f"{f['peak_mb_per_input_mb']:.2f}",
            ]
        )
    verdict = "met" if result["target_met"] else "not met"
    summary = (
        f"peak_mb_per_input_mb {result['peak_mb_per_input_mb']:.2f} ({result['worst_format']}; "
        f"target <= {PEAK_TARGET:g}: {verdict}), slowest {result['min_mb_per_s']:.1f} MB/s\n"
    )
    return table(rows, right=[False, False, True, True, True, True, True]) + summary
