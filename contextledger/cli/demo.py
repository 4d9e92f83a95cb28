"""``demo``: a coding session replayed through the runtime under the default policy, printed
turn by turn, stored in a database and compared with other strategies in an HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path

from contextledger.cli.output import Progress, emit_json, emit_table, emit_text
from contextledger.demo import (
    TABLE_COLUMNS,
    load_session,
    next_session_id,
    replay_session,
    report_results,
    simulate_strategies,
    totals,
    turn_rows,
)
from contextledger.report import render_report, write_report
from contextledger.store.sqlite import SQLiteStore


async def demo(args: argparse.Namespace) -> None:
    """Replay the demo session (``--trace``, else the newest Claude Code session under
    ``~/.claude/projects/``, else a generated one) into ``args.db`` through the runtime, print
    the per-turn table and write ``args.report``. Raises ``ValueError`` (nothing written) for
    bad arguments or a transcript that cannot be imported."""
    window: int = args.window
    report: Path = args.report
    if window < 1:
        raise ValueError("--window must be positive")
    if not report.parent.is_dir():
        raise ValueError(f"cannot write {report}: no folder {report.parent}")
    source, events = load_session(args.trace, Path.home(), seed=args.seed, turns=args.turns)
    if not args.json:
        emit_text(f"source: {source.describe()}")
    with Progress("simulating strategies") as bar:
        simulated = await simulate_strategies(events, window, bar.update)
    model_id = simulated["default"].model
    async with SQLiteStore.open(args.db) as store:
        session_id = next_session_id(await store.streams())
        with Progress("replaying through the runtime") as bar:
            replay = await replay_session(
                store, session_id, events, model_id=model_id, window=window, on_progress=bar.update
            )
        written = await store.stream_version(session_id)
    rows = turn_rows(replay)
    total = totals(rows)
    html = render_report(
        report_results(source.label, simulated, replay),
        title=f"contextledger demo: {source.label}",
        window=window,
    )
    try:
        write_report(report, html)
    except OSError as exc:
        raise ValueError(f"cannot write {report}: {exc}") from exc
    if args.json:
        emit_json(
            {
                "source": source,
                "db": str(args.db),
                "session": session_id,
                "window": window,
                "model": model_id,
                "turns": rows,
                "totals": total,
                "report": str(report),
            }
        )
        return
    emit_text(
        f"wrote session {session_id} ({written:,} events) to {args.db}: replayed through the "
        f"runtime under the default policy, {window:,}-token window, priced as {model_id}\n"
    )
    emit_table([*rows, total], TABLE_COLUMNS)
    emit_text(
        "\npeak_prompt: the largest request of the turn; cache figures: tokens read from, "
        "written to and sent past the simulated prompt cache; input_cost_usd: their price"
    )
    emit_text(f"report (the default policy against other strategies): {report}")
    emit_text(f"inspect the session: contextledger history {args.db} --session {session_id}")
