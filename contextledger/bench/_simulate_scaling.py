"""``simulate_scaling``: how the simulation's time and memory grow with the session.

A generated coding session (``simulation._synthetic``) of about N messages is simulated under
``default`` at a 200,000-token window on Anthropic prices (``simulate_trace``, extractive
summarizer), at each size in turn, smallest first; each run's wall time and the process's peak
resident memory after it (``ru_maxrss``: the sizes run in increasing order, so the peak after
the largest is its own) are reported.

Sizes: 1k, 4k and 16k messages, by default and with ``--full`` alike (about a minute on
an idle machine: the simulation is linear, so the largest size costs 16 times the smallest):
key ``time_growth_16k_vs_1k`` (linear is 16, target <= 24) and ``peak_mb_16k`` (target
<= 500). ``--events N``: N/4, N/2 and N messages, for tests (a 4x ladder: target <= 6).
Keys: ``runs`` (per size: ``messages``, ``calls``, ``seconds``, ``peak_rss_mb``), the growth
key of the sizes run and ``peak_mb_<largest>``.
"""

from __future__ import annotations

import resource
import sys
import time
from typing import Any, Final

from contextledger.bench._common import Options, table
from contextledger.events._catalogue import Event, MessageAdded
from contextledger.simulation import DEFAULT_WINDOW, simulate_trace
from contextledger.simulation._synthetic import synthetic_session

SIZES: Final = (1_000, 4_000, 16_000)
#: Messages a generated turn holds on average (the user's, the model's steps, the answer).
MESSAGES_PER_TURN: Final = 16.5
TARGETS: Final = {4: 6.0, 16: 24.0}
PEAK_TARGET_MB: Final = 500


def _session(messages: int) -> list[Event]:
    turns = max(1, round(messages / MESSAGES_PER_TURN))
    return synthetic_session("ses_scaling", seed=7, turns=turns)


def _peak_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 / (1024 if sys.platform == "darwin" else 1)


def run(options: Options) -> dict[str, Any]:
    """Simulate at each size and return the figures (see the module docstring)."""
    if options.events:
        sizes: tuple[int, ...] = (options.events // 4, options.events // 2, options.events)
    else:
        sizes = SIZES
    runs = []
    for size in sizes:
        events = _session(size)
        started = time.perf_counter()
        result = simulate_trace(events, strategy_name="default", window=DEFAULT_WINDOW)
        seconds = time.perf_counter() - started
        runs.append(
            {
                "size": size,
                "messages": sum(isinstance(e, MessageAdded) for e in events),
                "calls": result.calls,
                "seconds": seconds,
                "peak_rss_mb": _peak_mb(),
            }
        )
    factor = sizes[-1] // sizes[0]
    growth = runs[-1]["seconds"] / runs[0]["seconds"] if runs[0]["seconds"] else None
    return {
        "runs": runs,
        f"time_growth_{_label(sizes[-1])}_vs_{_label(sizes[0])}": growth,
        "linear_growth": factor,
        "growth_target": TARGETS.get(factor),
        f"peak_mb_{_label(sizes[-1])}": runs[-1]["peak_rss_mb"],
        "peak_target_mb": PEAK_TARGET_MB,
    }


def _label(size: int) -> str:
    """``4k`` for 4,000; the number itself when it is not whole thousands."""
    return f"{size // 1000}k" if size >= 1000 and size % 1000 == 0 else str(size)


def render(result: dict[str, Any]) -> str:
    """The runs as a table, then the growth and the peak."""
    rows = [["messages", "calls", "seconds", "peak RSS MB"]]
    for r in result["runs"]:
        rows.append(
            [
                f"{r['messages']:,}",
                f"{r['calls']:,}",
                f"{r['seconds']:.2f}",
                f"{r['peak_rss_mb']:.0f}",
            ]
        )
    text = "simulate_scaling: simulate under default at 200k, a generated session\n"
    text += table(rows, right=[True, True, True, True])
    for key, value in result.items():
        if key.startswith("time_growth_") and value is not None:
            target = result["growth_target"]
            text += f"{key}: {value:.2f}x (linear is {result['linear_growth']}x"
            text += f", target <= {target}x)\n" if target else ")\n"
        if key.startswith("peak_mb_"):
            text += f"{key}: {value:.0f} MB (target <= {result['peak_target_mb']} MB at 16k)\n"
    return text
