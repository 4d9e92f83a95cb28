"""``bench``: run the registered benchmarks (``python -m contextledger.bench``) from the CLI."""

from __future__ import annotations

import argparse
import functools

import trio

from contextledger.bench import Options, run_named
from contextledger.cli._output import emit_json, emit_text


def _show(table: str) -> None:
    emit_text(table.rstrip("\n"))


async def bench(args: argparse.Namespace) -> None:
    """Run benchmark ``args.name`` (or ``all``); print its table, or its figures as JSON."""
    if args.events is not None and args.events < 1:
        raise ValueError("--events must be at least 1")
    options = Options(full=args.full, events=args.events)
    # The benchmarks run their own trio loops, so they run in a worker thread.
    figures = await trio.to_thread.run_sync(
        functools.partial(run_named, args.name, options, None if args.json else _show)
    )
    if args.json:
        emit_json(figures)
