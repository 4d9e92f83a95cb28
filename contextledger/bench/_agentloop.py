"""``agentloop``: concurrent agent loops through the runtime against the loopback provider,
from an asyncio host, as an orchestrator runs them.

``contextledger.testing.run_scenario_in_asyncio`` runs ``SESSIONS`` sessions of ``STEPS``
tool steps each (outputs of 0.2-50 KB, drawn log-uniformly) on a ``WINDOW``-token window, a
quarter of the sessions with a child session and a quarter with an agent slice, 5% of the
requests faulted (429 with and without retry-after, 500, 529, dropped connections,
overflows) and every loop's request half-way refused once as too long, on SQLite, the
runtime a trio guest of the asyncio loop; once with the default configuration (the
extractive summarizer) and once with the model summarizer answered by the loopback provider.

Keys, per run (``extractive`` and ``model``): ``failed_sessions`` (loops that raised or did
not end; target 0), ``over_window_requests`` (requests the provider refused as longer than
the window, injected overflows excepted; 0), ``replay_mismatches`` (recorded requests whose
body the log does not rebuild; 0), ``cache_read_share`` (prompt tokens the provider read
from its cache, as a share of all) beside ``cache_read_share_lower_bound`` (the reads of
``cachesim.lower_bound``: each request reads the longest prefix it shares with any earlier
one), ``loop_lag_p99_ms`` (the asyncio loop's lag at the 99th percentile over the 5 ms ticks
that overlap a compaction; target <= 20) beside ``loop_lag_p99_own_ms`` (each of those lags
less the time the loop's thread was ready to run with no CPU free, as Linux counts it: the lag
the process causes itself, apart from a loaded machine's, whose ``load_average`` over the
last minute is reported too) and ``loop_lag_p99_outside_compactions_ms`` (over the other
ticks), ``runtime_cpu_share`` (the process's CPU time less the loopback server's request
handling, as a share of the process's: the runtime, the store and the client side of the
loop), and ``requests``, ``overflows``, ``compactions``, ``seconds``. The top level repeats
the extractive run's keys (the default configuration).
The default size (``SESSIONS_FAST`` x ``STEPS_FAST``) runs in well under a minute;
``--full`` runs the issue's 20 x 32; ``--events N`` runs two sessions of ``N // 100`` steps
(at least two), for tests.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Final

from contextledger.bench._common import Options, table, temp_dir
from contextledger.store import SQLiteStore
from contextledger.testing import Scenario, ScenarioRun, run_scenario_in_asyncio

#: The issue's size: 20 sessions x 32 tool steps on a 32k window.
SESSIONS: Final = 20
STEPS: Final = 32
WINDOW: Final = 32_000
#: The default size, a quarter of the issue's work, so the two runs stay well under a minute.
SESSIONS_FAST: Final = 10
STEPS_FAST: Final = 16
#: Requests faulted: one in twenty, each one of ``testing._agentloop.FAULTS``.
FAULT_RATE: Final = 0.05
SEED: Final = 13
#: Targets, as printed: None where the figure is reported, not judged.
TARGETS: Final[dict[str, str]] = {
    "failed_sessions": "0",
    "over_window_requests": "0",
    "replay_mismatches": "0",
    "cache_read_share": "—",
    "loop_lag_p99_ms": "<= 20",
    "runtime_cpu_share": "—",
}
#: The host loop's lag target during compactions, in milliseconds.
LAG_TARGET_MS: Final = 20.0


def _size(options: Options) -> tuple[int, int]:
    if options.events is not None:
        return 2, max(2, options.events // 100)
    return (SESSIONS, STEPS) if options.full else (SESSIONS_FAST, STEPS_FAST)


def _figures(run: ScenarioRun, seconds: float) -> dict[str, Any]:
    return {
        "failed_sessions": len({a.session_id for a in run.failed}),
        "failed_loops": [f"{a.session_id}/{a.agent_id}: {a.error}"[:200] for a in run.failed],
        "over_window_requests": len(run.over_window),
        "replay_mismatches": len(run.replay_mismatches),
        "cache_read_share": round(run.cache_read_share, 4),
        "cache_read_share_lower_bound": round(run.cache_read_share_lower_bound, 4),
        "loop_lag_p99_ms": round(run.loop_lag_p99_ms, 1),
        "loop_lag_p99_own_ms": round(run.loop_lag_p99_own_ms, 1),
        "loop_lag_p99_outside_compactions_ms": round(run.loop_lag_p99_outside_compactions_ms, 1),
        "runtime_cpu_share": round(run.runtime_cpu_share, 3),
        "requests": len(run.exchanges),
        "overflows": sum(len(a.overflows) for a in run.agents),
        "compactions": len(run.compactions),
        "seconds": round(seconds, 1),
        "load_average": round(os.getloadavg()[0], 1),
    }


def _run_one(scenario: Scenario, path: Path) -> dict[str, Any]:
    start = time.perf_counter()
    run = run_scenario_in_asyncio(scenario, SQLiteStore.open(path))
    return _figures(run, time.perf_counter() - start)


def run(options: Options) -> dict[str, Any]:
    """Run the loops with each summarizer and return the figures (see the module
    docstring)."""
    sessions, steps = _size(options)
    quarter = max(1, sessions // 4)
    results: dict[str, Any] = {}
    with temp_dir("contextledger-agentloop-") as folder:
        for summarizer in ("extractive", "model"):
            scenario = Scenario(
                sessions=sessions,
                steps=steps,
                window=WINDOW,
                children=quarter,
                slices=quarter,
                fault_rate=FAULT_RATE,
                overflow_at=steps // 2,
                summarizer=summarizer,
                seed=SEED,
            )
            results[summarizer] = _run_one(scenario, Path(folder) / f"{summarizer}.db")
    default = results["extractive"]
    return {
        **{key: default[key] for key in TARGETS},
        "cache_read_share_lower_bound": default["cache_read_share_lower_bound"],
        "loop_lag_p99_own_ms": default["loop_lag_p99_own_ms"],
        "loop_lag_target_met": default["loop_lag_p99_ms"] <= LAG_TARGET_MS,
        "sessions": sessions,
        "steps": steps,
        "window": WINDOW,
        "issue_size": (sessions, steps) == (SESSIONS, STEPS),
        **results,
    }


def render(result: dict[str, Any]) -> str:
    """The figures of both runs as a table, with their targets."""
    rows = [["", "extractive", "model", "target"]]
    for key, target in TARGETS.items():
        rows.append([key, str(result["extractive"][key]), str(result["model"][key]), target])
        beside = {
            "cache_read_share": "cache_read_share_lower_bound",
            "loop_lag_p99_ms": "loop_lag_p99_own_ms",
        }.get(key)
        if beside is not None:
            rows.append(
                [beside, str(result["extractive"][beside]), str(result["model"][beside]), "—"]
            )
    for key in (
        "loop_lag_p99_outside_compactions_ms",
        "requests",
        "overflows",
        "compactions",
        "seconds",
        "load_average",
    ):
        rows.append([key, str(result["extractive"][key]), str(result["model"][key]), ""])
    size = "the issue's size" if result["issue_size"] else "scaled down; --full for 20 x 32"
    text = (
        f"agentloop: {result['sessions']} sessions x {result['steps']} steps on a "
        f"{result['window']:,}-token window through the loopback provider, asyncio host "
        f"({size})\n"
    )
    text += table(rows, right=[False, True, True, False])
    for label in ("extractive", "model"):
        for loop in result[label]["failed_loops"][:5]:
            text += f"{label}: failed {loop}\n"
    return text
