"""``contextledger``: write, list and inspect session logs.

Commands (each table also as ``--json``):
  demo      write a realistic generated coding session into ./contextledger-demo.db and
            print its history
  sessions  list the sessions of a database
  history   print a session's history (messages, parts, token estimates) at any seq
  view      print the model view (what the model is sent) at any seq
  events    print a session's raw events
  compact   compact a session with the extractive summarizer (--dry-run: print the plan)
  prune     clear, trim or strip old tool outputs and media (--dry-run: print the plan)
  import    import a transcript (any supported format) into a database
  replay    check a session replays to its stored projection and recorded request prefixes
  simulate  price context strategies on transcripts with the prompt-cache simulator
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from contextledger.cli import analysis, commands, maintenance
from contextledger.events.errors import LedgerError
from contextledger.logging import LEVELS, configure_logging


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextledger",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--log-level", choices=LEVELS, default="warning")
    parser.add_argument("--log-json", action="store_true", help="log as JSON lines")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="write a generated session and print its history")
    demo.add_argument("--db", type=Path, default=Path("contextledger-demo.db"))
    demo.add_argument("--turns", type=int, default=6)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--json", action="store_true")

    sessions = sub.add_parser("sessions", help="list sessions")
    sessions.add_argument("db", type=Path)
    sessions.add_argument("--json", action="store_true")

    history = sub.add_parser("history", help="print a session's history")
    history.add_argument("db", type=Path)
    history.add_argument("--session", required=True)
    history.add_argument("--at", type=int, default=None, help="as of this seq (default: now)")
    history.add_argument("--parts", action="store_true", help="one row per part")
    history.add_argument("--json", action="store_true")

    view = sub.add_parser("view", help="print the model view of a session at any seq")
    view.add_argument("db", type=Path)
    view.add_argument("--session", required=True)
    view.add_argument("--at", type=int, default=None, help="as of this seq (default: now)")
    view.add_argument(
        "--model", default=None, help="provider/model the request is for (e.g. anthropic/x)"
    )
    view.add_argument("--agent", default=None, help="only this agent's slice")
    view.add_argument("--json", action="store_true")

    events = sub.add_parser("events", help="print a session's raw events")
    events.add_argument("db", type=Path)
    events.add_argument("--session", required=True)
    events.add_argument("--from", dest="from_seq", type=int, default=1)
    events.add_argument("--limit", type=int, default=None)
    events.add_argument("--json", action="store_true")

    for name, text in (
        ("compact", "compact a session (extractive summary; --dry-run prints the plan)"),
        ("prune", "prune old tool outputs, media and reasoning (--dry-run prints the plan)"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("db", type=Path)
        command.add_argument("--session", required=True)
        command.add_argument("--agent", default="main", help="the agent slice (default: main)")
        command.add_argument(
            "--model", default=None, help="provider/model to size for (default: the session's)"
        )
        command.add_argument("--context", type=int, default=200_000, help="window in tokens")
        command.add_argument("--output", type=int, default=32_000, help="output limit in tokens")
        command.add_argument("--config", type=Path, default=None, help="a .toml or .json config")
        command.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
        command.add_argument("--json", action="store_true")
    compact = sub.choices["compact"]
    compact.add_argument("--template", choices=["opencode", "continuation"], default=None)
    prune = sub.choices["prune"]
    prune.add_argument("--mode", choices=["opencode", "mimo", "cost"], default=None)
    prune.add_argument(
        "--level", type=int, default=None, help="pressure level (default: from the last usage)"
    )
    imported = sub.add_parser("import", help="import a transcript into a database")
    imported.add_argument("trace", type=Path)
    imported.add_argument("--db", type=Path, required=True)
    imported.add_argument("--json", action="store_true")

    replayed = sub.add_parser("replay", help="check a session replays to what was recorded")
    replayed.add_argument("db", type=Path)
    replayed.add_argument("--session", required=True)
    replayed.add_argument("--json", action="store_true")

    simulated = sub.add_parser("simulate", help="price context strategies on transcripts")
    simulated.add_argument("paths", nargs="+", type=Path, help="transcripts or folders")
    simulated.add_argument("--strategy", action="append", default=None, help="repeatable")
    simulated.add_argument(
        "--provider", action="append", choices=["anthropic", "openai"], default=None
    )
    simulated.add_argument("--window", type=int, default=analysis.DEFAULT_WINDOW)
    simulated.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    args = _parser().parse_args(argv)
    configure_logging(args.log_level, json=args.log_json)
    handlers: dict[str, Any] = {
        "demo": commands.demo,
        "sessions": commands.sessions,
        "history": commands.history,
        "view": commands.view,
        "events": commands.events,
        "compact": maintenance.compact,
        "prune": maintenance.prune,
        "import": analysis.import_,
        "replay": analysis.replay,
        "simulate": analysis.simulate,
    }
    if args.command not in ("demo", "import", "simulate") and not os.path.exists(args.db):
        sys.stderr.write(f"contextledger: no database at {args.db}\n")
        return 2
    try:
        trio.run(handlers[args.command], args)
    except (LedgerError, ValueError) as exc:
        sys.stderr.write(f"contextledger: {exc}\n")
        return 1
    except BrokenPipeError:
        # The reader (e.g. ``head``) went away; stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
