"""``strategies``: what each context strategy costs and retains on the trace sets, per
provider, under the same constraints and with every cost counted.

Every transcript of the ``test`` trace set (``bench._sets``; ``--full`` adds ``tune``, the
traces the constants were chosen on) is replayed (``simulate_trace``, the traces spread over
the machine's cores) under pi's four strategies (``baseline``, ``truncate-500``,
``age-truncate-500-keep-3``, ``compact-at-12000-structured``), ``last-40`` and ours
(``default``), at a 200k window and at 32k, with Anthropic prices (the trace's model when the
table has it, else Claude Sonnet 4.5) and OpenAI's (``gpt-5``). A request over the window is
refused and answered by an overflow compaction (pi's strategies: one, and one retry), and every
compaction's summary is a model call priced like the session's own (``summarizer = "model"``);
``default`` is also priced with its extractive summarizer, which makes no call
(``default/extractive``), and replayed with compactions that keep only the tail
(``default/tail-only``: the retention a summary adds is the difference). ``--full`` adds Kilo's
and opencode's (``opencode``) and MiMo Code's (``mimo-tiers``); ``--events N`` replays only the
first N events of each session (for tests).

Keys: ``sets`` -> set -> ``windows`` -> window -> ``traces`` -> trace -> strategy ->
provider -> the ``TraceResult.summary`` figures (``cost`` = billed input + ``summary_cost``,
``cost_vs_lower_bound``, ``retention``, ``retention_older``, ``compactions``,
``over_window_calls``, ``failed_at``, ...), for ours also against ``baseline`` at each of the
``endings`` (every call the session could have ended after: ``compare_endings`` of the two
runs' ``running_costs``, None when one failed): ``endings_above_baseline`` (at how many ours
had cost more), ``max_ending_cost_vs_baseline`` and ``mean_ending_cost_vs_baseline`` (ours
over baseline's with every ending as likely); and ``providers`` -> provider -> strategy -> the
figures over the set's traces (``Totals``: ``cost``, ``summary_cost``, ``compactions``,
``over_window_calls`` summed, ``failed`` counted, ``cost_vs_lower_bound`` the worst,
``retention`` over every needed fact, ``retention_older`` over the older ones) and, for
``default`` and ``default/extractive``, ``verdicts``: ``max_cost_vs_lower_bound``
(``cost_vs_lower_bound``: the cost over the least the same calls and summary calls could
cost), ``max_cost_vs_calls_lower_bound`` (over the least the calls alone could cost),
``cheaper_than_pi`` (the traces on which it costs less than each of pi's four),
``above_baseline`` (those on which it costs more than ``baseline``),
``above_baseline_on_average`` (those on which its ``mean_ending_cost_vs_baseline`` is above 1),
``endings_above_baseline`` and ``endings`` summed, the worst ``max_ending_cost_vs_baseline``,
``dominated`` (those on which another strategy that finished is both cheaper and higher in
``retention``: every fact the agent used again), ``dominated_older`` (the same in
``retention_older``: the facts last mentioned more than ``RECENT_CALLS`` calls back, what
tells summaries apart; see ``simulation._retention``), ``over_window_calls`` and
``failed``. At the top, the ``test`` set's counts over its windows and providers (the
targets: 0): ``default_above_baseline``, ``default_above_baseline_on_average``,
``default_dominated``, ``default_dominated_older``, ``default_over_window_calls``,
``default_failed``; and, with no target,
``default_endings_above_baseline`` of ``default_endings``; with ``--full``, ``tune_...`` the
same for ``tune``.
Targets on ``test``: ``default`` within 1.3x of its lower bound, summaries included, no
over-window call, no failure, never above ``baseline``, never dominated.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Final

from contextledger.bench._common import Options, table
from contextledger.bench._estimation import DEFAULT_TRACES
from contextledger.bench._sets import TRACE_SETS, set_files
from contextledger.events._catalogue import Event
from contextledger.logging import configure_logging
from contextledger.simulation import (
    PROVIDERS,
    FactMemo,
    Provider,
    SummaryMemo,
    TraceResult,
    compare_endings,
    simulate_trace,
    trace_sessions,
)
from contextledger.simulation._summaries import SummarizerName

PI: Final = ("baseline", "truncate-500", "age-truncate-500-keep-3", "compact-at-12000-structured")
#: pi's ``last-N`` (the newest 40 messages), a baseline for retention.
LAST_N: Final = "last-40"
KILO_AND_MIMO: Final = ("opencode", "mimo-tiers")
#: ``default`` compacting with its extractive summarizer (no summary call).
EXTRACTIVE: Final = "default/extractive"
#: ``default``'s compactions keeping only the tail (no summary): a baseline for retention.
TAIL_ONLY: Final = "default/tail-only"
#: The summarizer of each variant of a strategy (every other one compacts with model calls).
VARIANTS: Final[dict[str, SummarizerName]] = {EXTRACTIVE: "extractive", TAIL_ONLY: "tail-only"}
OURS: Final = ("default", EXTRACTIVE)
WINDOWS: Final = (200_000, 32_000)
TARGET_COST_VS_LOWER_BOUND: Final = 1.3
#: The verdicts counted at the top of the result (traces x windows x providers, ``default``).
COUNTED: Final = (
    "above_baseline",
    "above_baseline_on_average",
    "endings_above_baseline",
    "endings",
    "dominated",
    "dominated_older",
    "over_window_calls",
    "failed",
)


def _dominated(
    by_strategy: dict[str, Any], ours: str, provider: str, retention: str = "retention"
) -> bool:
    """Whether a strategy other than ours, that finished, is both cheaper than ``ours`` and
    higher in ``retention`` (the key of the figures) on one trace."""
    mine = by_strategy[ours][provider]
    return any(
        figures[provider]["failed_at"] is None
        and figures[provider]["cost"] < mine["cost"]
        and (figures[provider][retention] or 0) > (mine[retention] or 0)
        for name, figures in by_strategy.items()
        if name not in OURS
    )


def _verdicts(traces: dict[str, Any], ours: str, provider: str) -> dict[str, Any]:
    """How ``ours`` fares against the others on each trace (see the module docstring)."""
    mine = {name: t[ours][provider] for name, t in traces.items()}
    ratios = [r["cost_vs_lower_bound"] for r in mine.values() if r["cost_vs_lower_bound"]]
    strict = [
        r["cost_vs_calls_lower_bound"] for r in mine.values() if r["cost_vs_calls_lower_bound"]
    ]
    return {
        "max_cost_vs_lower_bound": max(ratios, default=None),
        "max_cost_vs_calls_lower_bound": max(strict, default=None),
        "cheaper_than_pi": [
            name
            for name, t in traces.items()
            if all(mine[name]["cost"] < t[s][provider]["cost"] for s in PI)
        ],
        "above_baseline": [
            name
            for name, t in traces.items()
            if mine[name]["cost"] > t["baseline"][provider]["cost"]
        ],
        "above_baseline_on_average": [
            name for name, r in mine.items() if (r["mean_ending_cost_vs_baseline"] or 0) > 1
        ],
        "endings_above_baseline": sum(r["endings_above_baseline"] or 0 for r in mine.values()),
        "endings": sum(r["endings"] or 0 for r in mine.values()),
        "max_ending_cost_vs_baseline": max(
            (r["max_ending_cost_vs_baseline"] for r in mine.values() if r["endings"]),
            default=None,
        ),
        "dominated": [name for name, t in traces.items() if _dominated(t, ours, provider)],
        "dominated_older": [
            name for name, t in traces.items() if _dominated(t, ours, provider, "retention_older")
        ],
        "over_window_calls": sum(r["over_window_calls"] for r in mine.values()),
        "failed": sum(r["failed_at"] is not None for r in mine.values()),
    }


def _totals(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A strategy's figures over a set's traces."""
    ratios = [r["cost_vs_lower_bound"] for r in runs if r["cost_vs_lower_bound"]]
    return {
        "cost": sum(r["cost"] for r in runs),
        "summary_cost": sum(r["summary_cost"] for r in runs),
        "cost_vs_lower_bound": max(ratios, default=None),
        "retention": _share(runs, "facts_retained", "facts_needed"),
        "retention_older": _share(runs, "facts_retained_older", "facts_needed_older"),
        "compactions": sum(r["compactions"] for r in runs),
        "over_window_calls": sum(r["over_window_calls"] for r in runs),
        "failed": sum(r["failed_at"] is not None for r in runs),
    }


def _share(runs: Sequence[dict[str, Any]], retained: str, needed: str) -> float | None:
    """The ``retained`` counts over the ``needed`` ones, summed over ``runs``."""
    total = sum(r[needed] for r in runs)
    return sum(r[retained] for r in runs) / total if total else None


def _simulated(
    events: Sequence[Event],
    name: str,
    window: int,
    provider: Provider,
    memos: tuple[FactMemo, SummaryMemo],
) -> TraceResult:
    return simulate_trace(
        events,
        strategy_name=name.partition("/")[0],
        window=window,
        provider_family=provider,
        summarizer=VARIANTS.get(name, "model"),
        facts=memos[0],
        summary_memo=memos[1],
    )


def _trace_figures(job: tuple[Sequence[Event], tuple[str, ...], int]) -> dict[str, Any]:
    """One trace at one window: each strategy's figures per provider (a worker's job; its
    simulations share one ``FactMemo`` and one ``SummaryMemo``, so each text's facts are found
    once and each summary is written once), ours with ``_endings`` against ``baseline``."""
    events, names, window = job
    memos = (FactMemo(), SummaryMemo())
    figures: dict[str, Any] = {}
    for provider in PROVIDERS:
        results = {name: _simulated(events, name, window, provider, memos) for name in names}
        for name, result in results.items():
            summary = result.summary()
            if name in OURS:
                summary |= _endings(result, results["baseline"])
            figures.setdefault(name, {})[provider] = summary
    return figures


def _endings(ours: TraceResult, baseline: TraceResult) -> dict[str, Any]:
    """``ours`` against ``baseline`` at every call the session could have ended after
    (``compare_endings``; None when one of them failed)."""
    both = ours.failed_at is None and baseline.failed_at is None
    found = compare_endings(ours.running_costs, baseline.running_costs) if both else None
    return {
        "endings": None if found is None else found.endings,
        "endings_above_baseline": None if found is None else found.above,
        "max_ending_cost_vs_baseline": None if found is None else found.max_ratio,
        "mean_ending_cost_vs_baseline": None if found is None else found.mean_ratio,
    }


def _window(traces: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """One set at one window: the traces' figures and, per provider, the totals and verdicts."""
    providers = {
        provider: {
            **{name: _totals([t[name][provider] for t in traces.values()]) for name in names},
            "verdicts": {ours: _verdicts(traces, ours, provider) for ours in OURS},
        }
        for provider in PROVIDERS
    }
    return {"traces": traces, "providers": providers}


def _counts(windows: dict[str, Any], prefix: str) -> dict[str, int]:
    """``default``'s verdicts counted over a set's windows and providers."""
    verdicts = [
        figures["providers"][provider]["verdicts"]["default"]
        for figures in windows.values()
        for provider in PROVIDERS
    ]
    return {
        f"{prefix}default_{key}": sum(
            v[key] if isinstance(v[key], int) else len(v[key]) for v in verdicts
        )
        for key in COUNTED
    }


def _sessions(folder: Path, name: str, events: int | None) -> list[tuple[str, list[Event]]]:
    return [
        (trace, list(session.events[:events]))
        for path in set_files(folder, name)
        for trace, session in trace_sessions(path)
    ]


def run(options: Options) -> dict[str, Any]:
    """Simulate and return the figures (see the module docstring)."""
    folder = DEFAULT_TRACES
    chosen = TRACE_SETS if options.full else ("test",)
    sessions = {name: _sessions(folder, name, options.events) for name in chosen}
    if not any(sessions.values()):
        return {"available": False, "reason": f"no Claude Code traces under {folder}"}
    names = (
        *PI,
        LAST_N,
        *(KILO_AND_MIMO if options.full else ()),
        "default",
        EXTRACTIVE,
        TAIL_ONLY,
    )
    # The longest sessions first, so that none is left to run alone at the end.
    jobs = sorted(
        (
            (name, window, trace, events)
            for name, found in sessions.items()
            for window in WINDOWS
            for trace, events in found
        ),
        key=lambda job: -len(job[3]),
    )
    # Each trace is simulated on its own, so the jobs are spread over the machine's cores;
    # a new process logs as the command does (to stderr: stdout holds only the results).
    with ProcessPoolExecutor(
        os.cpu_count(),
        mp_context=get_context("spawn"),
        initializer=configure_logging,
        initargs=("warning",),
    ) as pool:
        figures = pool.map(_trace_figures, [(events, names, w) for _, w, _, events in jobs])
        by_job = {(name, w, trace): f for (name, w, trace, _), f in zip(jobs, figures, strict=True)}
    sets: dict[str, dict[str, Any]] = {
        name: {
            "folders": list(TRACE_SETS[name]),
            "windows": {
                str(w): _window({trace: by_job[name, w, trace] for trace, _ in found}, names)
                for w in WINDOWS
            },
        }
        for name, found in sessions.items()
        if found
    }
    counts = {
        key: value
        for name, figures in sets.items()
        for key, value in _counts(figures["windows"], "" if name == "test" else f"{name}_").items()
    }
    return {
        "available": True,
        "strategies": list(names),
        "target_cost_vs_lower_bound": TARGET_COST_VS_LOWER_BOUND,
        **counts,
        "sets": sets,
    }


def render(result: dict[str, Any]) -> str:
    """Per set and window, a table of each strategy's cost (USD, summaries included) and
    retentions (every fact, older facts) per trace and provider, one of its totals, then
    ``default``'s verdicts."""
    if not result.get("available"):
        return f"strategies: not measured: {result.get('reason')}\n"
    names: list[str] = result["strategies"]
    text = ""
    for set_name, per_set in result["sets"].items():
        for window, figures in per_set["windows"].items():
            text += f"strategies, {set_name} set, {int(window):,}-token window: cost (USD, "
            text += "summaries included) / retention / retention of older facts\n"
            rows = [["trace", "provider", *names]]
            for trace, by_strategy in figures["traces"].items():
                for provider in PROVIDERS:
                    rows.append(
                        [
                            trace.rsplit("/", 1)[-1][:13],
                            provider,
                            *(_cell(by_strategy[n][provider]) for n in names),
                        ]
                    )
            text += table(rows, right=[False, False, *([True] * len(names))])
            text += _totals_table(figures["providers"], names)
            for provider in PROVIDERS:
                verdicts = figures["providers"][provider]["verdicts"]
                for ours in OURS:
                    text += _verdict_line(provider, ours, verdicts[ours], len(figures["traces"]))
    counts = ", ".join(f"{k} {result[k]}" for k in result if k.startswith("default_"))
    return text + f"test set: {counts}\n"


def _totals_table(providers: dict[str, Any], names: Sequence[str]) -> str:
    rows = [
        [
            "strategy",
            "provider",
            "cost",
            "summaries",
            "x bound",
            "retention",
            "retention (older)",
            "compactions",
            "over-window calls",
            "failed",
        ]
    ]
    for name in names:
        for provider in PROVIDERS:
            t = providers[provider][name]
            rows.append(
                [
                    name,
                    provider,
                    f"{t['cost']:.3f}",
                    f"{t['summary_cost']:.3f}",
                    _number(t["cost_vs_lower_bound"], "{:.2f}"),
                    _number(t["retention"], "{:.1%}"),
                    _number(t["retention_older"], "{:.1%}"),
                    str(t["compactions"]),
                    str(t["over_window_calls"]),
                    str(t["failed"]),
                ]
            )
    return table(rows, right=[False, False, *([True] * 8)])


def _verdict_line(provider: str, ours: str, verdict: dict[str, Any], traces: int) -> str:
    worst = _number(verdict["max_cost_vs_lower_bound"], "{:.2f}")
    strict = _number(verdict["max_cost_vs_calls_lower_bound"], "{:.2f}")
    return (
        f"  {provider}: {ours} at most {worst}x its lower bound (target "
        f"{TARGET_COST_VS_LOWER_BOUND}x; {strict}x the bound of its calls alone); cheaper "
        f"than each of pi's four on "
        f"{len(verdict['cheaper_than_pi'])} of {traces} traces; above baseline on "
        f"{len(verdict['above_baseline'])} (on {len(verdict['above_baseline_on_average'])} "
        f"averaged over every call the session could have ended after; had it ended after "
        f"one, above it at {verdict['endings_above_baseline']:,} of {verdict['endings']:,}, by "
        f"at most {_number(verdict['max_ending_cost_vs_baseline'], '{:.2f}')}x); dominated on "
        f"{len(verdict['dominated'])} "
        f"({len(verdict['dominated_older'])} on older facts); "
        f"{verdict['over_window_calls']} over-window calls, {verdict['failed']} failed\n"
    )


def _number(value: float | None, form: str) -> str:
    return "n/a" if value is None else form.format(value)


def _cell(figures: dict[str, Any]) -> str:
    """A strategy's cost, retention and retention of older facts; ``!N`` after them when it
    failed at call N."""
    failed = figures["failed_at"]
    retention = _number(figures["retention"], "{:.0%}")
    older = _number(figures["retention_older"], "{:.0%}")
    cell = f"{figures['cost']:.3f}/{retention}/{older}"
    return cell + (f" !{failed}" if failed is not None else "")
