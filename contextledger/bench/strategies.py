"""``strategies``: what each context strategy costs on the Claude Code traces, per provider.

Every Claude Code transcript in the traces folder is replayed under pi's four strategies
(``baseline``, ``truncate-500``, ``age-truncate-500-keep-3``,
``compact-at-12000-structured``) and ours (``default``), at a 200k window and at 32k, with
Anthropic prices (the trace's model) and OpenAI's (``gpt-5``), as ``contextledger simulate``
does. ``--full`` adds Kilo's and opencode's (``opencode``) and MiMo Code's (``mimo-tiers``);
``--events N`` replays only the first N events of each session (for tests).

Keys: ``windows`` -> window -> ``traces`` -> trace -> strategy -> provider ->
``billed_input_cost``, ``peak_prompt``, ``lower_bound``, ``cost_vs_lower_bound``, ``calls``;
per window and provider (under ``default``): ``max_cost_vs_lower_bound`` over the traces (None
when no trace has a lower bound above zero; ``without_lower_bound`` counts those that do not)
and ``cheaper_than_pi`` (the traces on which ``default`` costs less than each of pi's four).
Target (at 200k): ``default`` within 1.3x of its lower bound and cheaper than each of pi's
four strategies on the long traces.
"""

from __future__ import annotations

from typing import Any, Final

from contextledger.bench._common import Options, table
from contextledger.bench.estimation import DEFAULT_TRACES, trace_dir
from contextledger.simulation import PROVIDERS, simulate_trace, trace_sessions

PI: Final = ("baseline", "truncate-500", "age-truncate-500-keep-3", "compact-at-12000-structured")
KILO_AND_MIMO: Final = ("opencode", "mimo-tiers")
WINDOWS: Final = (200_000, 32_000)
TARGET_COST_VS_LOWER_BOUND: Final = 1.3


def _verdicts(traces: dict[str, Any]) -> dict[str, Any]:
    """Per provider: the worst ``default`` cost over its lower bound and the traces on which
    ``default`` is cheaper than each of pi's strategies."""
    out: dict[str, Any] = {}
    for provider in PROVIDERS:
        ratios = [t["default"][provider]["cost_vs_lower_bound"] for t in traces.values()]
        cheaper = [
            name
            for name, t in traces.items()
            if all(
                t["default"][provider]["billed_input_cost"] < t[s][provider]["billed_input_cost"]
                for s in PI
            )
        ]
        out[provider] = {
            "max_cost_vs_lower_bound": max((r for r in ratios if r is not None), default=None),
            "without_lower_bound": sum(r is None for r in ratios),
            "cheaper_than_pi": cheaper,
        }
    return out


def run(options: Options) -> dict[str, Any]:
    """Simulate and return the figures (see the module docstring)."""
    folder = trace_dir(DEFAULT_TRACES)
    paths = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not paths:
        return {"available": False, "reason": f"no Claude Code traces under {folder}"}
    names = (*PI, *KILO_AND_MIMO, "default") if options.full else (*PI, "default")
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
                    provider: simulate_trace(
                        events, strategy_name=name, window=window, provider_family=provider
                    ).summary()
                    for provider in PROVIDERS
                }
                for name in names
            }
            for trace, events in sessions
        }
        windows[str(window)] = {"traces": traces, "default": _verdicts(traces)}
    return {
        "available": True,
        "strategies": list(names),
        "target_cost_vs_lower_bound": TARGET_COST_VS_LOWER_BOUND,
        "windows": windows,
    }


def render(result: dict[str, Any]) -> str:
    """Per window, a table of the billed input cost (USD) per trace, strategy and provider,
    then the verdicts."""
    if not result.get("available"):
        return f"strategies: not measured: {result.get('reason')}\n"
    names: list[str] = result["strategies"]
    text = ""
    for window, figures in result["windows"].items():
        rows = [["trace", "provider", *names, "default / bound"]]
        for trace, by_strategy in figures["traces"].items():
            for provider in PROVIDERS:
                default = by_strategy["default"][provider]
                rows.append(
                    [
                        trace.rsplit("/", 1)[-1][:13],
                        provider,
                        *(f"{by_strategy[n][provider]['billed_input_cost']:.3f}" for n in names),
                        f"{default['cost_vs_lower_bound'] or 0:.2f}",
                    ]
                )
        text += f"strategies: billed input cost (USD), {int(window):,}-token window\n"
        text += table(rows, right=[False, False, *([True] * (len(names) + 1))])
        for provider, verdict in figures["default"].items():
            worst = verdict["max_cost_vs_lower_bound"]
            text += (
                f"  {provider}: default at most {'n/a' if worst is None else f'{worst:.2f}'}x its "
                f"lower bound (target {result['target_cost_vs_lower_bound']}x); cheaper than "
                f"each of pi's four on {len(verdict['cheaper_than_pi'])} of "
                f"{len(figures['traces'])} traces\n"
            )
    return text
