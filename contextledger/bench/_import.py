"""``import``: how fast ``contextledger import`` reads and writes, and how much memory it holds,
per format.

For each format, the largest transcript of it in the traces folder (an OpenHands V1
conversation folder counts as the sum of its files) is imported by the command itself,
``contextledger import FILE --db NEW --lenient --json`` (leniently: one shared transcript is
no valid conversation), into a new SQLite store, in a process of its own: the whole path a user
runs, from reading the file to the last event written.

Method. In that process the command runs four times. The first run is timed (input MB per
second; it also loads what the command loads on first use). Then the command imports a
two-message chat log twice, the second time traced by ``tracemalloc``: its peak is the
command's fixed cost (``fixed_mb``: the argument parser, the trio run, opening the store, the
report), the same for every input. Last, the transcript is imported again into a new store,
traced (``peak_mb``): the peak of Python-allocated memory counts the file's bytes, the
decoded records, the events, their type-checked copies and encodings (msgspec and the json
module allocate through Python's allocator; SQLite's page cache, bounded by SQLite, does not
count). A format's ``peak_mb_per_input_mb`` is ``(peak_mb - fixed_mb) / input_mb``: the
memory the input costs. The key is the largest over the formats (target <= 3), counting
inputs of ``MIN_INPUT_MB`` or more: under it a single large record, or one write batch's
copies, is a large share of the input (they are measured and shown all the same).

A format without a transcript in the traces folder (the OpenAI chat log) is measured on one
generated to ``GENERATED_MB`` (``FULL_GENERATED_MB`` with ``--full``): a chat of tool-call
turns, one JSON document on one line, as large as the largest shared transcripts.

``--events N`` picks the smallest transcript of each format instead, and generates a small
chat log (for tests). Keys:
``formats`` (per format: ``source``, ``input_mb``, ``seconds``, ``mb_per_s``, ``peak_mb``,
``fixed_mb``, ``peak_mb_per_input_mb``, ``events``, ``counted``), ``peak_mb_per_input_mb``,
``worst_format``, ``min_mb_per_s``, ``target_met``. Without traces: ``{"available": false,
"reason": ...}``.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

from contextledger.bench._common import Options, table
from contextledger.bench._estimation import DEFAULT_TRACES
from contextledger.importers import detect_format, transcripts_under

#: Peak memory per input MB the import should stay under.
PEAK_TARGET: Final = 3.0
#: The smallest input counted in ``peak_mb_per_input_mb``: at 0.1 MB the target allows 0.3 MB,
#: half of which a write batch's type-checked copies (up to 8 times its 16 KiB of encodings)
#: or one large record can take by themselves.
MIN_INPUT_MB: Final = 0.1
_MB: Final = 1024 * 1024
#: How large the generated chat log is by default, with ``--full`` and with ``--events``.
GENERATED_MB: Final = 4.0
FULL_GENERATED_MB: Final = 20.0
SMALL_GENERATED_MB: Final = 0.05
_WORDS: Final = ("alpha", "beta", "gamma", "delta", "epsilon")
#: What runs in the measuring process (argv: the transcript, a folder for the stores).
_PROBE: Final = """
import contextlib, io, json, os, sys, time, tracemalloc
from contextledger.cli import main

path, work = sys.argv[1], sys.argv[2]
smallest = os.path.join(work, "smallest.json")
with open(smallest, "w") as f:
    json.dump([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], f)

def run(source, db, out):
    with contextlib.redirect_stdout(out):
        code = main(["import", source, "--db", os.path.join(work, db), "--lenient", "--json"])
    if code:
        raise SystemExit(f"import failed with {code}")

def traced(source, db):
    with open(os.devnull, "w") as null:
        tracemalloc.start()
        tracemalloc.reset_peak()
        run(source, db, null)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak

printed = io.StringIO()
started = time.perf_counter()
run(path, "timed.db", printed)
seconds = time.perf_counter() - started
events = sum(row["events"] for row in json.loads(printed.getvalue())["sessions"])
run(smallest, "warm.db", io.StringIO())
fixed = traced(smallest, "fixed.db")
peak = traced(path, "traced.db")
print(json.dumps({"seconds": seconds, "peak": peak, "fixed": fixed, "events": events}))
"""


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


def measure(path: Path) -> dict[str, Any]:
    """The speed and memory of importing ``path`` (see the module docstring)."""
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(path), work],
            capture_output=True,
            text=True,
            check=True,
        )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    input_mb = _size(path) / _MB
    peak_mb, fixed_mb = figures["peak"] / _MB, figures["fixed"] / _MB
    return {
        "source": f"{path.parent.name}/{path.name}",
        "input_mb": round(input_mb, 3),
        "seconds": round(figures["seconds"], 3),
        "mb_per_s": round(input_mb / max(figures["seconds"], 1e-9), 2),
        "peak_mb": round(peak_mb, 2),
        "fixed_mb": round(fixed_mb, 2),
        "peak_mb_per_input_mb": round((peak_mb - fixed_mb) / input_mb, 2),
        "events": figures["events"],
        "counted": input_mb >= MIN_INPUT_MB,
    }


def generated_chat(path: Path, size: int, *, seed: int = 1) -> int:
    """Write a chat log of at least ``size`` bytes to ``path``: a system prompt, then turns of
    a question, a tool call, its result and an answer (one JSON document on one line). Returns
    the number of turns."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    written, turn = 0, 0
    while written < size:
        text = " ".join(rng.choice(_WORDS) for _ in range(300))
        call = {"name": "run", "arguments": json.dumps({"cmd": text[:200]})}
        turn_messages: list[dict[str, Any]] = [
            {"role": "user", "content": f"q{turn} {text}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{turn}", "type": "function", "function": call}],
            },
            {"role": "tool", "tool_call_id": f"c{turn}", "content": text},
            {"role": "assistant", "content": f"a{turn} {text[:500]}"},
        ]
        messages += turn_messages
        written += len(json.dumps(turn_messages))
        turn += 1
    path.write_text(json.dumps(messages))
    return turn


def run(options: Options, traces: Path = DEFAULT_TRACES) -> dict[str, Any]:
    """Measure each format's transcript and return the figures (see the module docstring)."""
    if not traces.is_dir():
        return {"available": False, "reason": f"no traces under {traces}"}
    chosen = pick(traces, largest=not options.events)
    formats = {fmt: measure(path) for fmt, path in chosen.items()}
    if "openai-chat" not in formats:
        mb = FULL_GENERATED_MB if options.full else GENERATED_MB
        with tempfile.TemporaryDirectory() as work:
            path = Path(work) / "generated" / "chat.json"
            path.parent.mkdir()
            generated_chat(path, int((SMALL_GENERATED_MB if options.events else mb) * _MB))
            formats["openai-chat"] = measure(path)
        formats = dict(sorted(formats.items()))
    counted = [fmt for fmt in formats if formats[fmt]["counted"]] or list(formats)
    worst = max(counted, key=lambda fmt: formats[fmt]["peak_mb_per_input_mb"])
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
    rows = [["format", "transcript", "MB", "s", "MB/s", "peak MB", "fixed MB", "peak/input"]]
    for fmt, f in result["formats"].items():
        rows.append(
            [
                fmt,
                f["source"],
                f"{f['input_mb']:.2f}",
                f"{f['seconds']:.2f}",
                f"{f['mb_per_s']:.1f}",
                f"{f['peak_mb']:.2f}",
                f"{f['fixed_mb']:.2f}",
                f"{f['peak_mb_per_input_mb']:.2f}" + ("" if f["counted"] else " *"),
            ]
        )
    verdict = "met" if result["target_met"] else "not met"
    summary = (
        f"peak_mb_per_input_mb {result['peak_mb_per_input_mb']:.2f} ({result['worst_format']}; "
        f"target <= {PEAK_TARGET:g}: {verdict}), slowest {result['min_mb_per_s']:.1f} MB/s\n"
    )
    note = f"* under {MIN_INPUT_MB:g} MB: not counted in peak_mb_per_input_mb\n"
    return table(rows, right=[False, False, *[True] * 6]) + summary + note
