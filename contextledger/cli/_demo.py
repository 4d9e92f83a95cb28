"""``demo``: a coding session replayed through the runtime under the default policy, printed
turn by turn, stored in a database and compared with other strategies in an HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from contextledger.cli._demo_session import (
    DEMO_SEED,
    DEMO_TURNS,
    TABLE_COLUMNS,
    load_session,
    next_session_id,
    replay_session,
    report_results,
    simulate_strategies,
    totals,
    turn_rows,
)
from contextledger.cli._output import (
    Progress,
    check_out,
    emit_json,
    emit_table,
    emit_text,
    write_out,
)
from contextledger.report import render_report
from contextledger.simulation import TraceResult
from contextledger.store._sqlite import SQLiteStore


async def demo(args: argparse.Namespace) -> None:
    """Replay the demo session (``--trace``, else the newest Claude Code session under
    ``~/.claude/projects/``, else a generated one) into ``args.db`` through the runtime, print
    the per-turn table and write ``args.report``. Raises ``ValueError`` (nothing written) for
    bad arguments or a transcript that cannot be imported."""
    window: int = args.window
    report: Path = args.report
    if window < 1:
        raise ValueError("--window must be positive")
    if args.turns < 1:
        raise ValueError(f"--turns must be 1 or more, not {args.turns}")
    if args.trace is not None and (args.turns != DEMO_TURNS or args.seed != DEMO_SEED):
        raise ValueError("--turns and --seed shape the generated session; not with --trace")
    check_out(report, "report")
    check_out(args.db, "database")
    source, events = load_session(args.trace, Path.home(), seed=args.seed, turns=args.turns)
    if not args.json:
        emit_text(f"source: {source.describe()}")
    async with SQLiteStore.open(args.db) as store:
        with Progress("simulating strategies") as bar:
            simulated = await simulate_strategies(events, window, bar.update)
        model_id = simulated["default"].model
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
    write_out(report, html)
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
                "strategies": {name: r.summary() for name, r in simulated.items()},
                "report": str(report),
            }
        )
        return
    emit_text(
        f"wrote session {session_id} ({written:,} events) to {args.db}: replayed through the "
        f"runtime under the default policy, {window:,}-token window, priced as {model_id}\n"
    )
    summary = {
        **total,
        "turn": "total",
        "actions": f"actions in {total['turns_with_actions']} of {total['turns']} turns",
    }
    emit_table([_usd(row) for row in (*rows, summary)], TABLE_COLUMNS)
    emit_text(
        "\npeak_prompt: the largest request of the turn; cache figures: tokens read from, "
        "written to and sent past the simulated prompt cache; input_cost_usd: their price"
    )
    if total["peak_prompt"] > window:
        emit_text(
            f"note: the peak prompt ({total['peak_prompt']:,} tokens) exceeds the window: a "
            "single message or step was larger than any compaction can shrink"
        )
    compared = ", ".join(f"{name} {_outcome(r)}" for name, r in simulated.items())
    emit_text(
        "the same session simulated under each strategy (cost, USD; requests the provider "
        f"refused as over the window in brackets): {compared}"
    )
    emit_text(f"report (the default policy against other strategies): {report}")
    emit_text(f"inspect the session: contextledger history {args.db} --session {session_id}")


def _usd(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its cost to four decimals (small turns cost fractions of a cent)."""
    return {**row, "input_cost_usd": f"{row['input_cost_usd']:.4f}"}


def _outcome(result: TraceResult) -> str:
    """``1.23``, ``1.23 (4 refused)``, or with the call it could not make."""
    said = f"{result.cost:.2f}"
    notes = []
    if result.over_window_calls:
        notes.append(f"{result.over_window_calls} refused")
    if result.failed_at:
        notes.append(f"could not get under the window at call {result.failed_at}")
    return said + (f" ({'; '.join(notes)})" if notes else "")
