"""Line charts as inline SVG, drawn without JavaScript: one polyline per series over the model
calls, a dot with a tooltip where a series has a note (what a strategy did before that call)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Final

# Three charts side by side fit a 1,400-pixel-wide page with room for the margins.
WIDTH: Final = 440
HEIGHT: Final = 260
# Room for the y tick labels ("$0.125", "100k") on the left, the title on top and the call
# numbers plus the axis label below.
LEFT: Final = 60
RIGHT: Final = 12
TOP: Final = 30
BOTTOM: Final = 40
# At most this many intervals between y tick labels, at least half as many: enough to read a
# value off, few enough to stay legible at 260 pixels.
Y_TICKS: Final = 4
X_TICKS: Final = 5
# The mantissas of a y tick step: the step is the first of them, times a power of ten, that
# needs at most ``Y_TICKS`` intervals, so tick labels stay short ("20k", "$0.4", "25%").
ROUND_STEPS: Final = (1.0, 2.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class Series:
    """One line of a chart: its name, colour, value per call and the note per call (what
    happened before it; "" for nothing, no dot)."""

    name: str
    colour: str
    values: Sequence[float]
    notes: Sequence[str]


def y_ticks(largest: float) -> list[float]:
    """The y tick values, from 0 up to the first round multiple of the step at or above
    ``largest`` (see ``ROUND_STEPS``); 0 to 1 when ``largest`` is not positive."""
    if largest <= 0:
        return [0.0, 1.0]
    wanted = largest / Y_TICKS
    scale = 10.0 ** math.floor(math.log10(wanted))
    step = next(m * scale for m in ROUND_STEPS if m * scale >= wanted * (1 - 1e-12))
    intervals = max(1, math.ceil(largest / step - 1e-9))
    return [step * i for i in range(intervals + 1)]


def x_ticks(calls: int) -> list[int]:
    """At most ``X_TICKS`` + 1 call numbers (1-based) to label: the first, the last and evenly
    spaced ones between."""
    if calls <= X_TICKS + 1:
        return list(range(1, calls + 1))
    return sorted({1 + round(i * (calls - 1) / X_TICKS) for i in range(X_TICKS + 1)})


def line_chart(
    title: str,
    series: Sequence[Series],
    *,
    y_format: Callable[[float], str],
    y_max: float | None = None,
) -> str:
    """An ``<svg>`` element plotting each of ``series`` against the call number, the y axis
    from 0 to ``y_max`` (default: the largest value) rounded up to a tick (``y_ticks``); every
    text is escaped."""
    calls = max((len(s.values) for s in series), default=0)
    if y_max is None:
        y_max = max((max(s.values, default=0.0) for s in series), default=0.0)
    ticks = y_ticks(y_max)
    top = ticks[-1]
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM

    def x(call: int) -> float:
        return LEFT + plot_w * (call / (calls - 1) if calls > 1 else 0.5)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / top)

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<text class="chart-title" x="{LEFT}" y="{TOP - 12}">{escape(title)}</text>',
    ]
    for value in ticks:
        parts.append(
            f'<line class="grid" stroke="#e0e0e0" x1="{LEFT}" x2="{WIDTH - RIGHT}" '
            f'y1="{y(value):.1f}" y2="{y(value):.1f}"/>'
            f'<text class="tick" x="{LEFT - 6}" y="{y(value) + 4:.1f}" '
            f'text-anchor="end">{escape(y_format(value))}</text>'
        )
    for call in x_ticks(calls):
        parts.append(
            f'<text class="tick" x="{x(call - 1):.1f}" y="{HEIGHT - BOTTOM + 16}" '
            f'text-anchor="middle">{call}</text>'
        )
    parts.append(
        f'<text class="axis" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" '
        'text-anchor="middle">model call</text>'
    )
    for s in series:
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(s.values))
        parts.append(
            f'<polyline class="series" data-series="{escape(s.name)}" fill="none" '
            f'stroke="{s.colour}" stroke-width="1.6" points="{points}"/>'
        )
    for s in series:
        for i, (value, note) in enumerate(zip(s.values, s.notes, strict=True)):
            if note:
                parts.append(
                    f'<circle class="action" cx="{x(i):.1f}" cy="{y(value):.1f}" r="3.5" '
                    f'fill="{s.colour}"><title>{escape(s.name)}, call {i + 1}: '
                    f"{escape(note)}</title></circle>"
                )
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Point:
    """One strategy on a cost-retention chart: its name, colour, cost and retention."""

    name: str
    colour: str
    cost: float
    retention: float


def frontier(points: Sequence[Point]) -> list[Point]:
    """The points no other point beats on both counts (cheaper or as cheap, and retaining
    more or as much, better on at least one), cheapest first: the cost-retention frontier."""

    def beaten(p: Point) -> bool:
        return any(
            q.cost <= p.cost
            and q.retention >= p.retention
            and (q.cost < p.cost or q.retention > p.retention)
            for q in points
        )

    return sorted((p for p in points if not beaten(p)), key=lambda p: (p.cost, p.retention))


def frontier_chart(title: str, points: Sequence[Point]) -> str:
    """An ``<svg>`` element with one dot per point (cost on x from 0, retention on y from 0 to
    100 %), each named in its tooltip and its label, and the frontier (``frontier``) drawn as
    a line through the points on it; every text is escaped."""
    x_ticks_ = y_ticks(max((p.cost for p in points), default=0.0))
    right, plot_w, plot_h = x_ticks_[-1], WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(cost: float) -> float:
        return LEFT + plot_w * cost / right

    def y(retention: float) -> float:
        return TOP + plot_h * (1 - retention)

    parts = [
        f'<svg class="chart frontier" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<text class="chart-title" x="{LEFT}" y="{TOP - 12}">{escape(title)}</text>',
    ]
    for share in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line class="grid" stroke="#e0e0e0" x1="{LEFT}" x2="{WIDTH - RIGHT}" '
            f'y1="{y(share):.1f}" y2="{y(share):.1f}"/><text class="tick" x="{LEFT - 6}" '
            f'y="{y(share) + 4:.1f}" text-anchor="end">{share:.0%}</text>'
        )
    for cost in x_ticks_:
        parts.append(
            f'<text class="tick" x="{x(cost):.1f}" y="{HEIGHT - BOTTOM + 16}" '
            f'text-anchor="middle">${cost:g}</text>'
        )
    parts.append(
        f'<text class="axis" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" '
        'text-anchor="middle">cost (USD) against retention</text>'
    )
    line = " ".join(f"{x(p.cost):.1f},{y(p.retention):.1f}" for p in frontier(points))
    parts.append(
        f'<polyline class="frontier-line" fill="none" stroke="#555" stroke-dasharray="4 3" '
        f'points="{line}"/>'
    )
    for p in points:
        parts.append(
            f'<circle class="strategy" data-series="{escape(p.name)}" cx="{x(p.cost):.1f}" '
            f'cy="{y(p.retention):.1f}" r="4" fill="{p.colour}"><title>{escape(p.name)}: '
            f"${p.cost:.4f}, {p.retention:.1%}</title></circle>"
            f'<text class="tick" x="{x(p.cost) + 6:.1f}" y="{y(p.retention) - 6:.1f}">'
            f"{escape(p.name)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
