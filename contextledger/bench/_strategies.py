"""``strategies``: what each context strategy costs on the Claude Code traces, per provider,
under the same constraints and with every cost counted.

Every Claude Code transcript in the traces folder is replayed (``simulate_trace``) under pi's
four strategies (``baseline``, ``truncate-500``, ``age-truncate-500-keep-3``,
``compact-at-12000-structured``) and ours (``default``), at a 200k window and at 32k, with
Anthropic prices (the trace's model) and OpenAI's (``gpt-5``). A request over the window is
refused and answered by an overflow compaction (pi's strategies: one, and one retry), and
every compaction's summary is a model call priced like the session's own (``summarizer =
"model"``); ``default`` is also priced with its extractive summarizer, which makes no call
(``default/extractive``). ``--full`` adds Kilo's and opencode's (``opencode``) and MiMo Code's
(``mimo-tiers``); ``--events N`` replays only the first N events of each session (for tests).

Keys: ``windows`` -> window -> ``traces`` -> trace -> strategy -> provider -> the
``TraceResult.summary`` figures (``cost`` = billed input + ``summary_cost``,
``cost_vs_lower_bound``, ``compactions``, ``over_window_calls``, ``failed_at``, ...); per
window, for ``default`` and for ``default/extractive``, per provider:
``max_cost_vs_lower_bound`` over the traces (None when no trace has a lower bound above
zero; ``without_lower_bound`` counts those that do not), ``cheaper_than_pi`` (the traces on
which it costs less than each of pi's four), ``above_baseline`` (the traces on which it costs
more than ``baseline``), ``over_window_calls`` and ``failed`` (summed over the traces).
Target: ``default`` within 1.3x of its lower bound, summaries included, with no over-window
call and no failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from contextledger.bench._common import Options, table
from contextledger.bench._estimation import DEFAULT_TRACES, trace_dir
from contextledger.events._catalogue import Event
from contextledger.simulation import (
    PROVIDERS,
    Provider,
    TraceResult,
    simulate_trace,
    trace_sessions,
)

PI: Final = ("baseline", "truncate-500", "age-truncate-500-keep-3", "compact-at-12000-structured")
KILO_AND_MIMO: Final = ("opencode", "mimo-tiers")
#: ``default`` compacting with its extractive summarizer (no summary call).
EXTRACTIVE: Final = "default/extractive"
WINDOWS: Final = (200_000, 32_000)
TARGET_COST_VS_LOWER_BOUND: Final = 1.3


def _verdicts(traces: dict[str, Any], ours_name: str) -> dict[str, Any]:
    """Per provider: the worst cost of ``ours_name`` over its lower bound, the traces on
    which it is cheaper than each of pi's strategies and those on which it costs more than
    ``baseline``, and its over-window calls and failures."""
    out: dict[str, Any] = {}
    for provider in PROVIDERS:
        ours = {name: t[ours_name][provider] for name, t in traces.items()}
        ratios = [r["cost_vs_lower_bound"] for r in ours.values()]
        out[provider] = {
            "max_cost_vs_lower_bound": max((r for r in ratios if r is not None), default=None),
            "without_lower_bound": sum(r is None for r in ratios),
            "cheaper_than_pi": [
                name
                for name, t in traces.items()
                if all(ours[name]["cost"] < t[s][provider]["cost"] for s in PI)
            ],
            "above_baseline": [
                name
                for name, t in traces.items()
                if ours[name]["cost"] > t["baseline"][provider]["cost"]
            ],
            "over_window_calls": sum(r["over_window_calls"] for r in ours.values()),
            "failed": sum(r["failed_at"] is not None for r in ours.values()),
        }
    return out


def _simulated(events: Sequence[Event], name: str, window: int, provider: Provider) -> TraceResult:
    if name == EXTRACTIVE:
        return simulate_trace(
            events, strategy_name="default", window=window, provider_family=provider
        )
    return simulate_trace(
        events, strategy_name=name, window=window, provider_family=provider, summarizer="model"
    )


def run(options: Options) -> dict[str, Any]:
    """Simulate and return the figures (see the module docstring)."""
    folder = trace_dir(DEFAULT_TRACES)
    paths = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not paths:
        return {"available": False, "reason": f"no Claude Code traces under {folder}"}
    names = (*PI, *KILO_AND_MIMO, "default") if options.full else (*PI, "default")
    names = (*names, EXTRACTIVE)
    sessions = [
        (name, session.events[: options.events])
        for path in paths
        for name, session in trace_sessions(path)
    ]
    windows: dict[str, Any] = {}
    for window in WINDOWS:
        traces = {
            trace: {
                name: {
                    provider: _simulated(events, name, window, provider).summary()
                    for provider in PROVIDERS
                }
                for name in names
            }
            for trace, events in sessions
        }
        windows[str(window)] = {
            "traces": traces,
            "default": _verdicts(traces, "default"),
            EXTRACTIVE: _verdicts(traces, EXTRACTIVE),
        }
    return {
        "available": True,
        "strategies": list(names),
        "target_cost_vs_lower_bound": TARGET_COST_VS_LOWER_BOUND,
        "windows": windows,
    }


def render(result: dict[str, Any]) -> str:
    """Per window, a table of the cost (USD, summaries included) per trace, strategy and
    provider, one of the over-window calls and failures per strategy, then the verdicts."""
    if not result.get("available"):
        return f"strategies: not measured: {result.get('reason')}\n"
    names: list[str] = result["strategies"]
    text = ""
    for window, figures in result["windows"].items():
        rows = [["trace", "provider", *names, "default / bound", "extractive / bound"]]
        refused = [["strategy", "provider", "over-window calls", "failed traces", "compactions"]]
        for trace, by_strategy in figures["traces"].items():
            for provider in PROVIDERS:
                rows.append(
                    [
                        trace.rsplit("/", 1)[-1][:13],
                        provider,
                        *(_cost(by_strategy[n][provider]) for n in names),
                        *(
                            f"{by_strategy[n][provider]['cost_vs_lower_bound'] or 0:.2f}"
                            for n in ("default", EXTRACTIVE)
                        ),
                    ]
                )
        for name in names:
            for provider in PROVIDERS:
                runs = [t[name][provider] for t in figures["traces"].values()]
                refused.append(
                    [
                        name,
                        provider,
                        str(sum(r["over_window_calls"] for r in runs)),
                        str(sum(r["failed_at"] is not None for r in runs)),
                        str(sum(r["compactions"] for r in runs)),
                    ]
                )
        text += f"strategies: cost (USD, summaries included), {int(window):,}-token window\n"
        text += table(rows, right=[False, False, *([True] * (len(names) + 2))])
        text += table(refused, right=[False, False, True, True, True])
        verdicts = [
            (ours, provider, verdict)
            for ours in ("default", EXTRACTIVE)
            for provider, verdict in figures[ours].items()
        ]
        for ours, provider, verdict in verdicts:
            worst = verdict["max_cost_vs_lower_bound"]
            text += (
                f"  {provider}: {ours} at most {'n/a' if worst is None else f'{worst:.2f}'}x its "
                f"lower bound (target {result['target_cost_vs_lower_bound']}x); cheaper than "
                f"each of pi's four on {len(verdict['cheaper_than_pi'])} of "
                f"{len(figures['traces'])} traces; above baseline on "
                f"{len(verdict['above_baseline'])}; {verdict['over_window_calls']} over-window "
                f"calls, {verdict['failed']} failed\n"
            )
    return text


def _cost(figures: dict[str, Any]) -> str:
    """A strategy's cost; ``!N`` after it when it failed at call N."""
    failed = figures["failed_at"]
    return f"{figures['cost']:.3f}" + (f" !{failed}" if failed is not None else "")
