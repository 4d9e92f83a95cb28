"""Build an HTML report from a small input and, where Chromium is installed, render it to PNG
with headless Chromium, to look at the charts (``make report-check``).

``python -m contextledger.cli._report_check [--out report.html] [--png report.png] [TRACE...]``
simulates the transcripts given, or without any a generated session
(``synthetic_session``), under the default strategies on both providers, writes the report
and screenshots it. Without Chromium it says so on stderr and exits 0 after writing the HTML.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import trio

from contextledger.cli._output import emit_text
from contextledger.logging import configure_logging
from contextledger.report import render_report, write_report
from contextledger.simulation import (
    DEFAULT_STRATEGIES,
    DEFAULT_WINDOW,
    PROVIDERS,
    TraceResult,
    simulate_paths_async,
    simulate_trace_async,
)
from contextledger.simulation._synthetic import synthetic_session

CHROMIUM_NAMES: Final = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Wide enough for three charts side by side, tall enough for the first trace's summary table
# and both providers' charts.
WINDOW_SIZE: Final = "1400,2400"
# A cold headless start takes a few seconds; a minute means it is stuck.
SCREENSHOT_TIMEOUT_S: Final = 60
# Four turns make about 120 model calls: enough for the compacting strategies to act, small
# enough to simulate in a couple of seconds.
SYNTHETIC_TURNS: Final = 4
SYNTHETIC_TRACE: Final = "synthetic/ses_report"

Results = dict[str, dict[str, dict[str, TraceResult]]]


def find_chromium(which: Callable[[str], str | None] = shutil.which) -> str | None:
    """The first of ``CHROMIUM_NAMES`` that ``which`` finds on the PATH, or None."""
    return next((found for name in CHROMIUM_NAMES if (found := which(name))), None)


def screenshot_command(browser: str, html: Path, png: Path) -> list[str]:
    """The command that has headless ``browser`` screenshot ``html`` into ``png``."""
    return [
        browser,
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        f"--screenshot={png.resolve()}",
        f"--window-size={WINDOW_SIZE}",
        html.resolve().as_uri(),
    ]


async def _synthetic_results() -> Results:
    events = synthetic_session("ses_report", seed=7, turns=SYNTHETIC_TURNS)
    return {
        SYNTHETIC_TRACE: {
            name: {
                provider: await simulate_trace_async(
                    events, strategy_name=name, provider_family=provider
                )
                for provider in PROVIDERS
            }
            for name in DEFAULT_STRATEGIES
        }
    }


async def _results(traces: Sequence[Path]) -> Results:
    if not traces:
        return await _synthetic_results()
    return await simulate_paths_async(traces, DEFAULT_STRATEGIES, PROVIDERS)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the report and its screenshot; return the exit code (0 also without Chromium)."""
    parser = argparse.ArgumentParser(prog="python -m contextledger.cli._report_check")
    parser.add_argument("traces", nargs="*", type=Path, help="transcripts (default: generated)")
    parser.add_argument("--out", type=Path, default=Path("report.html"))
    parser.add_argument("--png", type=Path, default=Path("report.png"))
    args = parser.parse_args(argv)
    # The compactions that cannot fit the window log warnings; they are expected here.
    configure_logging("error")
    results = trio.run(_results, args.traces)
    title = "contextledger report: " + (
        ", ".join(str(t) for t in args.traces) or f"a generated session, {SYNTHETIC_TURNS} turns"
    )
    write_report(args.out, render_report(results, title=title, window=DEFAULT_WINDOW))
    emit_text(f"wrote {args.out}")
    browser = find_chromium()
    if browser is None:
        sys.stderr.write(
            f"report-check: no Chromium on the PATH (looked for {', '.join(CHROMIUM_NAMES)}); "
            f"open {args.out} in a browser instead, no PNG written\n"
        )
        return 0
    try:
        subprocess.run(
            screenshot_command(browser, args.out, args.png),
            check=True,
            capture_output=True,
            timeout=SCREENSHOT_TIMEOUT_S,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        sys.stderr.write(f"report-check: {browser} could not screenshot {args.out}: {exc}\n")
        return 1
    emit_text(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
