"""What the benchmarks share: options, output, timing, temporary files and the event corpus."""

from __future__ import annotations

import contextlib
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Protocol

from contextledger.events._catalogue import Event
from contextledger.simulation._synthetic import synthetic_session


class Options(NamedTuple):
    """How a benchmark runs: ``full`` size or the fast default, and an event count that
    overrides both (for smoke tests)."""

    full: bool = False
    events: int | None = None


class Benchmark(Protocol):
    """A benchmark module: ``run`` measures and returns JSON-ready figures, ``render`` turns
    them into a table for people."""

    def run(self, options: Options) -> dict[str, Any]: ...

    def render(self, result: dict[str, Any]) -> str: ...


def write(text: str) -> None:
    """The benchmarks' only output."""
    sys.stdout.write(text)
    sys.stdout.flush()


def median(samples: Sequence[float]) -> float:
    """The median of ``samples``."""
    return float(statistics.median(samples))


def rate(count: float, seconds: Sequence[float]) -> float:
    """``count`` per second at the median of the timings ``seconds``."""
    return count / max(median(seconds), 1e-9)


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """``ours / theirs``, or None when either is missing."""
    if ours is None or not theirs:
        return None
    return ours / theirs


@contextlib.contextmanager
def temp_dir(prefix: str) -> Iterator[str]:
    """A temporary directory, removed with everything in it afterwards."""
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def synthetic_corpus(
    events: int, *, seed: int = 0, turns: int = 40
) -> list[tuple[str, list[Event]]]:
    """Exactly ``events`` events in synthetic sessions of ``turns`` turns, as (session id,
    events) pairs. The last session is cut short (a prefix of a valid session is valid)."""
    corpus: list[tuple[str, list[Event]]] = []
    left = events
    while left > 0:
        session_id = f"bench-{seed}-{len(corpus):04d}"
        session = synthetic_session(session_id, seed=seed * 1_000_003 + len(corpus), turns=turns)
        corpus.append((session_id, session[:left]))
        left -= len(corpus[-1][1])
    return corpus


def table(rows: Sequence[Sequence[str]], *, right: Sequence[bool]) -> str:
    """Rows as aligned text columns; ``right`` says which columns align right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if r else cell.ljust(w)
            for cell, w, r in zip(row, widths, right, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"
