"""``report``: simulate transcripts as ``simulate`` does and write the figures as one
self-contained HTML page with charts."""

from __future__ import annotations

import argparse
from pathlib import Path

from contextledger.cli._analysis import run_simulation
from contextledger.cli._output import check_out, emit_json, emit_text, write_out
from contextledger.report import render_report


async def report(args: argparse.Namespace) -> None:
    """Simulate ``args.paths`` and write the HTML report to ``args.out``; print where. Raises
    ``ValueError`` (nothing written) for bad arguments or an output that cannot be written."""
    out: Path = args.out
    check_out(out, "report")
    strategies, providers, results = await run_simulation(args, "report")
    title = "contextledger report: " + ", ".join(str(p) for p in args.paths)
    write_out(out, render_report(results, title=title, window=args.window))
    if args.json:
        emit_json(
            {
                "report": str(out),
                "traces": len(results),
                "strategies": list(strategies),
                "providers": list(providers),
            }
        )
    else:
        emit_text(
            f"wrote {out} (traces: {len(results):,}, strategies: {len(strategies)}, "
            f"providers: {len(providers)})"
        )
