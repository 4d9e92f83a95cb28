"""``python -m contextledger.bench NAME [--json] [--full] [--events N]``.

``NAME`` is a registered benchmark or ``all``. By default each prints a table and runs in
under a minute; ``--full`` runs at full size; ``--json`` prints exactly one JSON object: the
benchmark's figures, or for ``all`` an object of them keyed by name.
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Callable, Sequence
from typing import Any, cast

from contextledger.bench._common import Benchmark, Options, write
from contextledger.logging import configure_logging

#: Every benchmark: its name and the module that has its ``run`` and ``render``.
BENCHMARKS: dict[str, str] = {
    "ledger": "contextledger.bench.ledger",
    "view": "contextledger.bench.view",
    "estimation": "contextledger.bench.estimation",
    "request": "contextledger.bench.request",
    "retention": "contextledger.bench.retention",
    "cachesim": "contextledger.bench.cachesim",
    "actors": "contextledger.bench.actors",
    "strategies": "contextledger.bench.strategies",
}


def load(name: str) -> Benchmark:
    """The benchmark module registered as ``name``."""
    return cast(Benchmark, importlib.import_module(BENCHMARKS[name]))


def run_named(
    name: str, options: Options, show: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run benchmark ``name`` (or every one for ``all``) and return the JSON-ready figures:
    the benchmark's own, or for ``all`` an object of them keyed by name. ``show``, when
    given, receives each benchmark's table as soon as it has run."""
    names = list(BENCHMARKS) if name == "all" else [name]
    results: dict[str, dict[str, Any]] = {}
    for each in names:
        bench = load(each)
        results[each] = bench.run(options)
        if show is not None:
            show(bench.render(results[each]))
    return results if name == "all" else results[name]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks asked for and print their results."""
    parser = argparse.ArgumentParser(prog="python -m contextledger.bench", description=__doc__)
    parser.add_argument("name", choices=[*BENCHMARKS, "all"], help="benchmark to run")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--full", action="store_true", help="run at full size (slower)")
    parser.add_argument(
        "--events", type=int, metavar="N", help="use N events (overrides the size; for tests)"
    )
    args = parser.parse_args(argv)
    if args.events is not None and args.events < 1:
        parser.error("--events must be at least 1")
    # Log lines go to stderr, so that stdout holds nothing but the results.
    configure_logging("warning")
    options = Options(full=args.full, events=args.events)
    payload = run_named(args.name, options, None if args.json else write)
    if args.json:
        write(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
