"""``python -m contextledger.bench NAME [--json] [--full] [--events N]``.

``NAME`` is a registered benchmark or ``all``. By default each prints a table and runs in
under a minute; ``--full`` runs at full size; ``--json`` prints exactly one JSON object: the
benchmark's figures, or for ``all`` an object of them keyed by name.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from contextledger.bench import BENCHMARKS, Options, run_named
from contextledger.bench._common import write
from contextledger.logging import configure_logging


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
