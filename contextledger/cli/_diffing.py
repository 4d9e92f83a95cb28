"""``diff``: the model view before and after a context strategy at one model call of a stored
session, as a coloured line diff (see ``contextledger.simulation._viewdiff``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from contextledger.cli._output import emit_diff, emit_json, emit_text
from contextledger.simulation import DEFAULT_WINDOW, PROVIDERS, Provider
from contextledger.simulation._viewdiff import TurnViews, collapse, summarize, turn_views
from contextledger.store._sqlite import SQLiteStore


def add_strategy_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """Add ``--strategy``, ``--turn``, ``--provider`` and ``--window`` to ``parser`` (the
    first two ``required`` or not)."""
    parser.add_argument(
        "--strategy", required=required, help="the strategy (see docs/strategies.md)"
    )
    parser.add_argument(
        "--turn",
        type=int,
        required=required,
        default=None,
        metavar="N",
        help="model call N, from 1" + ("" if required else " (default: the last)"),
    )
    parser.add_argument(
        "--provider",
        choices=PROVIDERS,
        default="anthropic" if required else None,
        help="the wire format and prices the replay uses (default: anthropic)",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW if required else None,
        help=f"window in tokens (default: {DEFAULT_WINDOW:,})",
    )


async def stored_turn_views(
    db: Path,
    session: str,
    strategy_name: str,
    turn: int | None,
    *,
    provider: Provider,
    window: int,
) -> TurnViews:
    """``turn_views`` of ``session`` as stored in ``db``; ``ValueError`` when it is unknown."""
    async with SQLiteStore.open(db, create=False) as store:
        recorded = await store.read(session)
    if not recorded:
        raise ValueError(f"no session {session!r} in {db}")
    return await turn_views(
        [r.event for r in recorded], strategy_name, turn, provider=provider, window=window
    )


async def diff(args: argparse.Namespace) -> None:
    """Print the view of ``args.session`` before and after ``args.strategy`` at call
    ``args.turn``: a header, then the diff with runs of identical lines collapsed to
    ``args.context`` lines around each change (all of them when it is negative)."""
    views = await stored_turn_views(
        args.db,
        args.session,
        args.strategy,
        args.turn,
        provider=args.provider,
        window=args.window,
    )
    lines = views.diff()
    summary = summarize(views.before, views.after, lines)
    if args.json:
        emit_json(
            {
                "session": args.session,
                "strategy": views.strategy,
                "turn": views.turn,
                "calls": views.calls,
                "actions": views.actions,
                "seq": views.seq,
                "tokens_before": summary.tokens_before,
                "tokens_after": summary.tokens_after,
                "removed": summary.removed,
                "added": summary.added,
                "same": summary.same,
                "lines": lines,
            }
        )
        return
    emit_text(
        f"{args.session} under {views.strategy}, call {views.turn} of {views.calls} "
        f"(at seq {views.seq}): {views.actions or 'no actions'} before the call; "
        f"~{summary.tokens_before:,} -> ~{summary.tokens_after:,} tokens; "
        f"{summary.removed:,} lines removed, {summary.added:,} added, {summary.same:,} identical"
    )
    emit_diff(collapse(lines, args.context))
