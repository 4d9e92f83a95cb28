"""``contextledger``: write, list and inspect session logs.

Commands (each table also as ``--json``):
  demo      replay a coding session (--trace, your latest Claude Code session, or a generated
            one) through the runtime on a 32k window: per-turn table, ./contextledger-demo.db,
            ./report.html
  sessions  list the sessions of a database
  history   print a session's history (messages, parts, token estimates) at any seq
  view      print the model view (what the model is sent) at any seq
  events    print a session's raw events
  output    print a page of a tool call's full output (what read_tool_output returns)
  compact   compact a session with the extractive summarizer (--dry-run: print the plan)
  prune     clear, trim or strip old tool outputs and media (--dry-run: print the plan)
  import    import a transcript (any supported format), or a folder of them, into a database
  export-trace  write a session as an OpenAI chat log or a Claude Code transcript
  check     verify a database: every page, checksum, seq, owner and snapshot (exit 1 on a
            problem)
  delete    delete a session with its child sessions
  gc        delete sessions older than some days and shrink the file
  export    write a session to a portable file (JSON lines)
  restore   write an exported session into a database
  replay    check a session replays to its stored projection and recorded request prefixes
  simulate  price context strategies on transcripts with the prompt-cache simulator
  report    write a self-contained HTML report with charts of a simulation
  diff      show the model view before and after a strategy at one model call, coloured
  bench     run a benchmark (or all) and print its figures
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, get_args

import trio

from contextledger.bench import BENCHMARKS
from contextledger.cli import _analysis as analysis
from contextledger.cli import _benching as benching
from contextledger.cli import _commands as commands
from contextledger.cli import _diffing as diffing
from contextledger.cli import _importing as importing
from contextledger.cli import _maintenance as maintenance
from contextledger.cli import _reporting as reporting
from contextledger.cli import _storage as storage
from contextledger.cli._demo import demo as demo_command
from contextledger.cli._demo_session import DEMO_SEED, DEMO_TURNS, DEMO_WINDOW
from contextledger.config import PruneMode
from contextledger.events._errors import LedgerError
from contextledger.history._truncate import PAGE_LINES
from contextledger.importers import EXPORT_FORMATS
from contextledger.logging import LEVELS, configure_logging
from contextledger.simulation import DEFAULT_WINDOW
from contextledger.vocabulary import TemplateName
from contextledger.vocabulary._defaults import OUTPUT_TOKEN_MAX, PRESSURE_PERCENTS

#: Commands that replay strategies over a whole session (and ``view --strategy``): the
#: compactions they run log every rollback at warning, which their tables already report.
_REPLAYING = frozenset({"demo", "simulate", "report", "diff"})


def _at_least(least: int) -> Callable[[str], int]:
    """An argparse ``type``: an int of ``least`` or more ("--limit: must be 0 or more, got
    -1", rather than a read that means something else)."""

    def parse(text: str) -> int:
        value = int(text)
        if value < least:
            raise argparse.ArgumentTypeError(f"must be {least} or more, got {value}")
        return value

    parse.__name__ = "int"  # argparse's message for what is no int: "invalid int value"
    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextledger",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default=None,
        help="default: warning; error for the commands that replay strategies (demo, "
        "simulate, report, diff), whose tables already show each compaction's outcome",
    )
    parser.add_argument("--log-json", action="store_true", help="log as JSON lines")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="replay a coding session through the runtime")
    demo.add_argument("--trace", type=Path, default=None, help="a transcript to replay")
    demo.add_argument("--db", type=Path, default=Path("contextledger-demo.db"))
    demo.add_argument("--window", type=int, default=DEMO_WINDOW, help="context window in tokens")
    demo.add_argument("--report", type=Path, default=Path("report.html"), help="the HTML file")
    demo.add_argument("--turns", type=int, default=DEMO_TURNS, help="generated session's turns")
    demo.add_argument("--seed", type=int, default=DEMO_SEED, help="generated session's seed")
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
    diffing.add_strategy_options(view, required=False)
    view.add_argument("--json", action="store_true")

    events = sub.add_parser("events", help="print a session's raw events")
    events.add_argument("db", type=Path)
    events.add_argument("--session", required=True)
    events.add_argument("--from", dest="from_seq", type=_at_least(1), default=1)
    events.add_argument("--limit", type=_at_least(0), default=None)
    events.add_argument("--json", action="store_true")

    paged = sub.add_parser("output", help="print a page of a tool call's full output")
    paged.add_argument("db", type=Path)
    paged.add_argument("--session", required=True)
    paged.add_argument("call", help="the tool call's part id or the provider's call id")
    paged.add_argument("--offset", type=int, default=0, help="the first line, 0-based")
    paged.add_argument("--limit", type=int, default=PAGE_LINES, help="lines (default: one page)")
    paged.add_argument("--json", action="store_true")

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
        command.add_argument("--context", type=int, default=DEFAULT_WINDOW, help="window in tokens")
        command.add_argument(
            "--output", type=int, default=OUTPUT_TOKEN_MAX, help="output limit in tokens"
        )
        command.add_argument("--config", type=Path, default=None, help="a .toml or .json config")
        command.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
        command.add_argument("--json", action="store_true")
    compact = sub.choices["compact"]
    compact.add_argument("--template", choices=get_args(TemplateName), default=None)
    prune = sub.choices["prune"]
    prune.add_argument("--mode", choices=get_args(PruneMode), default=None)
    prune.add_argument(
        "--level",
        type=int,
        choices=range(len(PRESSURE_PERCENTS) + 1),
        metavar="N",
        default=None,
        help="pressure level, 0 to 3 (default: from the last usage)",
    )
    imported = sub.add_parser("import", help="import a transcript into a database")
    imported.add_argument("trace", type=Path)
    imported.add_argument("--db", type=Path, required=True)
    imported.add_argument(
        "--session", default=None, help="the (first) session's id (default: from the source)"
    )
    imported.add_argument(
        "--lenient",
        action="store_true",
        help="import what is valid and record the rest as left out (default: refuse the file)",
    )
    imported.add_argument("--json", action="store_true")

    storage.add_parsers(sub)

    exported = sub.add_parser(
        "export-trace", help="write a session as an OpenAI chat log or a Claude Code transcript"
    )
    exported.add_argument("db", type=Path)
    exported.add_argument("--session", required=True)
    exported.add_argument("--format", choices=EXPORT_FORMATS, required=True)
    exported.add_argument("--out", type=Path, default=None, help="the file (default: stdout)")

    replayed = sub.add_parser("replay", help="check a session replays to what was recorded")
    replayed.add_argument("db", type=Path)
    replayed.add_argument("--session", required=True)
    replayed.add_argument(
        "--config",
        type=Path,
        default=None,
        help="the .toml or .json config the requests were built with (default: the defaults)",
    )
    replayed.add_argument("--json", action="store_true")

    # The arguments ``simulate`` and ``report`` share.
    simulation = argparse.ArgumentParser(add_help=False)
    simulation.add_argument("paths", nargs="+", type=Path, help="transcripts or folders")
    simulation.add_argument("--strategy", action="append", default=None, help="repeatable")
    simulation.add_argument(
        "--provider", action="append", choices=["anthropic", "openai"], default=None
    )
    simulation.add_argument("--window", type=int, default=analysis.DEFAULT_WINDOW)
    simulation.add_argument(
        "--summarizer",
        choices=["extractive", "model", "tail-only"],
        default="extractive",
        help="what writes compaction summaries; model: each summary priced as a model call; "
        "tail-only: no summary, only the kept tail",
    )
    simulation.add_argument("--json", action="store_true")
    sub.add_parser("simulate", parents=[simulation], help="price context strategies on transcripts")
    reported = sub.add_parser(
        "report", parents=[simulation], help="write an HTML report with charts of a simulation"
    )
    reported.add_argument("--out", type=Path, default=Path("report.html"), help="the HTML file")

    diffed = sub.add_parser("diff", help="the model view before and after a strategy at a call")
    diffed.add_argument("db", type=Path)
    diffed.add_argument("--session", required=True)
    diffing.add_strategy_options(diffed, required=True)
    diffed.add_argument(
        "--context",
        type=int,
        default=3,
        metavar="K",
        help="identical lines shown around each change (-1: all)",
    )
    diffed.add_argument("--json", action="store_true")

    benched = sub.add_parser("bench", help="run a benchmark (or all) and print its figures")
    benched.add_argument("name", nargs="?", choices=[*BENCHMARKS, "all"], default="all")
    benched.add_argument("--full", action="store_true", help="run at full size (slower)")
    benched.add_argument(
        "--events", type=int, metavar="N", help="use N events (overrides the size; for tests)"
    )
    benched.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    args = _parser().parse_args(argv)
    replaying = args.command in _REPLAYING or (args.command == "view" and args.strategy)
    level = args.log_level or ("error" if replaying else "warning")
    configure_logging(level, json=args.log_json)
    handlers: dict[str, Any] = {
        "demo": demo_command,
        "sessions": commands.sessions,
        "history": commands.history,
        "view": commands.view,
        "events": commands.events,
        "output": commands.output,
        "compact": maintenance.compact,
        "prune": maintenance.prune,
        "import": importing.import_,
        "export-trace": analysis.export_trace_,
        "replay": analysis.replay,
        "check": storage.check,
        "delete": storage.delete,
        "gc": storage.gc,
        "export": storage.export,
        "restore": storage.restore,
        "simulate": analysis.simulate,
        "report": reporting.report,
        "diff": diffing.diff,
        "bench": benching.bench,
    }
    exempt = ("demo", "import", "restore", "simulate", "report", "bench")
    if args.command not in exempt and not os.path.exists(args.db):
        sys.stderr.write(f"contextledger: no database at {args.db}\n")
        return 2
    try:
        status = trio.run(handlers[args.command], args)
    except (LedgerError, ValueError) as exc:
        sys.stderr.write(f"contextledger: {exc}\n")
        return 1
    except BrokenPipeError:
        # The reader (e.g. ``head``) went away; stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
