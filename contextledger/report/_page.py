"""The report page: per trace a summary table and, per provider, three charts (prompt tokens,
cumulative input cost, cache-hit ratio per model call) with one line per strategy and the
cost-retention chart (one dot per strategy, the frontier drawn through the strategies no other
beats on both); the figures are also embedded as JSON. Everything is inline: the page loads
nothing."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from itertools import accumulate
from typing import Any, Final

from contextledger.report._svg import Point, Series, frontier_chart, line_chart
from contextledger.simulation import RECENT_CALLS, TraceResult

Results = Mapping[str, Mapping[str, Mapping[str, TraceResult]]]

DATA_ID: Final = "contextledger-data"
# Colour-blind-safe (Okabe-Ito, without yellow, which is unreadable on white), then Tableau
# colours; a strategy keeps its colour in every chart of the page.
PALETTE: Final = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#E69F00",
    "#000000",
    "#8c564b",
    "#7f7f7f",
    "#bcbd22",
)
SUMMARY_COLUMNS: Final = (
    "calls",
    "peak_prompt",
    "billed_input_cost",
    "summary_cost",
    "cost",
    "lower_bound",
    "cost_vs_lower_bound",
    "retention",
    "retention_older",
    "compactions",
    "over_window_calls",
    "failed_at",
)

STYLE: Final = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px;
  color: #1a1a1a; background: #fff; }
h1 { font-size: 1.5em; margin: 0 0 8px; }
h2 { font-size: 1.2em; margin: 32px 0 8px; border-top: 1px solid #ccc; padding-top: 16px;
  overflow-wrap: anywhere; }
h3 { font-size: 1em; margin: 16px 0 4px; }
p.meta { color: #555; margin: 4px 0; }
table.summary { border-collapse: collapse; font-size: 0.9em; }
table.summary th, table.summary td { padding: 3px 10px; border-bottom: 1px solid #e3e3e3;
  text-align: left; }
table.summary td.num { text-align: right; font-variant-numeric: tabular-nums; }
ul.legend { list-style: none; padding: 0; margin: 4px 0; display: flex; flex-wrap: wrap;
  gap: 4px 16px; font-size: 0.9em; }
.swatch { display: inline-block; width: 14px; height: 4px; margin-right: 6px;
  vertical-align: middle; }
.charts { display: flex; flex-wrap: wrap; gap: 8px; }
svg.chart { font-size: 11px; background: #fafafa; }
svg.chart .chart-title { font-size: 13px; font-weight: 600; }
svg.chart .tick, svg.chart .axis { fill: #555; }
svg.chart circle.action { stroke: #fff; stroke-width: 1; }
.toggle button { margin-right: 6px; }
"""

# Shows only one provider's charts; the page is complete without it (the buttons stay hidden).
SCRIPT: Final = """
for (const toggle of document.querySelectorAll(".toggle")) toggle.hidden = false;
for (const button of document.querySelectorAll(".toggle button")) {
  button.addEventListener("click", () => {
    const show = button.dataset.show;
    for (const block of document.querySelectorAll(".provider")) {
      block.hidden = show !== "all" && block.dataset.provider !== show;
    }
  });
}
"""


def cache_hit_ratios(result: TraceResult) -> list[float]:
    """Per call, the cache-read tokens over all input tokens (uncached, written and read); 0
    for a call without input tokens."""
    ratios: list[float] = []
    for uncached, written, read in zip(
        result.uncached, result.cache_write, result.cache_read, strict=True
    ):
        total = uncached + written + read
        ratios.append(read / total if total else 0.0)
    return ratios


def cumulative_cost(result: TraceResult) -> list[float]:
    """Per call, the input cost (USD) of that call and every call before it."""
    return list(accumulate(result.input_cost))


def report_data(results: Results) -> dict[str, Any]:
    """``{trace: {strategy: {provider: {"summary", "prompt_tokens", "input_cost",
    "cache_hit_ratio", "actions"}}}}``: ``summary`` is ``TraceResult.summary()`` and the lists
    hold one entry per call (``input_cost`` per call, not cumulative)."""
    return {
        trace: {
            name: {
                provider: {
                    "summary": r.summary(),
                    "prompt_tokens": list(r.prompt_tokens),
                    "input_cost": list(r.input_cost),
                    "cache_hit_ratio": cache_hit_ratios(r),
                    "actions": list(r.actions),
                }
                for provider, r in by_provider.items()
            }
            for name, by_provider in by_strategy.items()
        }
        for trace, by_strategy in results.items()
    }


def script_json(value: Any) -> str:
    """``value`` as JSON that cannot end or confuse the ``<script>`` element it is put in:
    ``<``, ``>`` and ``&`` are written as ``\\u`` escapes (they only occur inside strings)."""
    text = json.dumps(value, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def strategy_colours(results: Results) -> dict[str, str]:
    """A colour per strategy, in order of first appearance, the palette repeating."""
    names = dict.fromkeys(name for by_strategy in results.values() for name in by_strategy)
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def _cell(column: str, value: float | int | str | None) -> str:
    if value is None:
        text = "n/a"
    elif isinstance(value, str):
        text = escape(value)
    elif column in ("billed_input_cost", "summary_cost", "cost", "lower_bound"):
        text = f"${value:,.4f}"
    elif column == "cost_vs_lower_bound":
        text = f"{value:.3f}"
    elif column in ("retention", "retention_older"):
        text = f"{value:.1%}"
    else:
        text = f"{value:,}"
    return f'<td class="num" data-value="{escape(json.dumps(value))}">{text}</td>'


def _summary_table(by_strategy: Mapping[str, Mapping[str, TraceResult]]) -> str:
    head = "".join(f"<th>{c}</th>" for c in ("strategy", "provider", *SUMMARY_COLUMNS))
    rows = []
    for name, by_provider in by_strategy.items():
        for provider, r in by_provider.items():
            summary = r.summary()
            cells = "".join(_cell(c, summary[c]) for c in SUMMARY_COLUMNS)
            rows.append(f"<tr><td>{escape(name)}</td><td>{escape(provider)}</td>{cells}</tr>")
    return f'<table class="summary"><tr>{head}</tr>{"".join(rows)}</table>'


def _tokens(value: float) -> str:
    return f"{value / 1000:g}k" if value >= 1000 else f"{value:g}"


def _provider_block(
    provider: str, runs: Sequence[tuple[str, TraceResult]], colours: Mapping[str, str]
) -> str:
    """The legend and four charts of one trace on one provider, ``runs`` by strategy; the
    cost-retention chart shows the strategies that finished and needed a fact again."""

    def series(values: list[list[float]]) -> list[Series]:
        return [
            Series(name, colours[name], v, r.actions)
            for (name, r), v in zip(runs, values, strict=True)
        ]

    models = ", ".join(dict.fromkeys(r.model for _, r in runs))
    legend = "".join(
        f'<li><span class="swatch" style="background:{colours[name]}"></span>{escape(name)}</li>'
        for name, _ in runs
    )
    charts = (
        line_chart(
            "prompt tokens",
            series([[float(t) for t in r.prompt_tokens] for _, r in runs]),
            y_format=_tokens,
        ),
        line_chart(
            "cumulative input cost (USD)",
            series([cumulative_cost(r) for _, r in runs]),
            y_format=lambda v: f"${v:g}",
        ),
        line_chart(
            "cache-hit ratio",
            series([cache_hit_ratios(r) for _, r in runs]),
            y_format=lambda v: f"{v:.0%}",
            y_max=1.0,
        ),
        frontier_chart(
            "cost and retention",
            [
                Point(name, colours[name], r.cost, r.retention)
                for name, r in runs
                if r.retention is not None and r.failed_at is None
            ],
        ),
    )
    return (
        f'<div class="provider" data-provider="{escape(provider)}">'
        f"<h3>{escape(provider)} <small>({escape(models)})</small></h3>"
        f'<ul class="legend">{legend}</ul><div class="charts">{"".join(charts)}</div></div>'
    )


def _trace_section(
    number: int,
    trace: str,
    by_strategy: Mapping[str, Mapping[str, TraceResult]],
    colours: Mapping[str, str],
) -> str:
    providers = dict.fromkeys(p for by_provider in by_strategy.values() for p in by_provider)
    blocks = "".join(
        _provider_block(
            provider,
            [(name, by_p[provider]) for name, by_p in by_strategy.items() if provider in by_p],
            colours,
        )
        for provider in providers
    )
    return (
        f'<section class="trace" id="trace-{number}"><h2>{escape(trace)}</h2>'
        f"{_summary_table(by_strategy)}{blocks}</section>"
    )


def render_report(results: Results, *, title: str, window: int) -> str:
    """One self-contained HTML document for ``results`` (``{trace: {strategy: {provider:
    TraceResult}}}``, as ``simulate_paths`` returns): per trace a summary table whose figures
    are ``TraceResult.summary()``, and per provider three charts with one line per strategy,
    a dot with a tooltip where the strategy acted, and the cost-retention chart. The figures
    are also embedded as JSON (``report_data``) in ``<script type="application/json"
    id="contextledger-data">``. All text is escaped; the page refers to no external
    resource."""
    colours = strategy_colours(results)
    providers = dict.fromkeys(
        p for by_strategy in results.values() for by_p in by_strategy.values() for p in by_p
    )
    toggle = "".join(
        f'<button type="button" data-show="{escape(p)}">{escape(p)}</button>'
        for p in ("all", *providers)
    )
    contents = "".join(
        f'<li><a href="#trace-{n}">{escape(trace)}</a></li>' for n, trace in enumerate(results, 1)
    )
    sections = "".join(
        _trace_section(n, trace, by_strategy, colours)
        for n, (trace, by_strategy) in enumerate(results.items(), 1)
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1>"
        f'<p class="meta">traces: {len(results):,}; context window: {window:,} tokens; '
        f"strategies: {escape(', '.join(colours))}; providers: {escape(', '.join(providers))}."
        '</p><p class="meta">Each chart has one line per strategy over the model calls. '
        "Cache-hit ratio: cache-read tokens over all input tokens of the call. A dot marks a "
        "call before which the strategy acted (hover for what it did). Costs are input costs "
        "in USD, as <code>contextledger simulate</code> prices them. The last chart places "
        "each strategy by its cost (summaries included) and its retention (the share of the "
        "facts the agent used again that its requests held); the dashed line is the frontier, "
        "the strategies no other is both cheaper than and higher in retention. The tables' "
        "<code>retention_older</code> counts only the facts last mentioned more than "
        f"{RECENT_CALLS} calls before their use: what a compaction kept of the conversation "
        "before its tail."
        "</p>"
        f'<div class="toggle" hidden>show: {toggle}</div><ul class="contents">{contents}</ul>'
        f'{sections}<script type="application/json" id="{DATA_ID}">'
        f"{script_json(report_data(results))}</script><script>{SCRIPT}</script></body></html>\n"
    )
