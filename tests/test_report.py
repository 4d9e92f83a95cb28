"""The HTML report: its embedded figures, charts, escaping, atomic writing, and the
``report_check`` screenshot script."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from contextledger.cli import _report_check as report_check
from contextledger.report import (
    DATA_ID,
    cache_hit_ratios,
    cumulative_cost,
    render_report,
    report_data,
    write_report,
)
from contextledger.report._page import script_json
from contextledger.report._svg import (
    Point,
    Series,
    frontier,
    frontier_chart,
    line_chart,
    x_ticks,
    y_ticks,
)
from contextledger.simulation import (
    DEFAULT_STRATEGIES,
    PROVIDERS,
    TraceResult,
    simulate_trace_async,
)
from contextledger.simulation._synthetic import synthetic_session

WINDOW = 60_000
# ``compact-at-20000`` acts on this session (its prompt reaches about 60,000 tokens), so the
# charts have action markers; ``truncate-500`` changes every prompt without acting.
STRATEGIES = ("baseline", "truncate-500", "compact-at-20000")
TRACE = "synthetic/ses_report"

Results = dict[str, dict[str, dict[str, TraceResult]]]


async def _simulate() -> Results:
    events = synthetic_session("ses_report", seed=7, turns=2)
    return {
        TRACE: {
            name: {
                provider: await simulate_trace_async(
                    events, strategy_name=name, window=WINDOW, provider_family=provider
                )
                for provider in PROVIDERS
            }
            for name in STRATEGIES
        }
    }


@pytest.fixture(scope="module")
def results() -> Results:
    return trio.run(_simulate)


@pytest.fixture(scope="module")
def page(results: Results) -> str:
    return render_report(results, title="three strategies", window=WINDOW)


def embedded(page: str) -> Any:
    """The figures embedded in ``page``, parsed."""
    match = re.search(rf'<script type="application/json" id="{DATA_ID}">(.*?)</script>', page)
    assert match is not None
    return json.loads(match.group(1))


def charts(page: str) -> list[str]:
    return re.findall(r"<svg .*?</svg>", page)


def _result(**changes: Any) -> TraceResult:
    base = TraceResult(
        strategy="baseline",
        provider="anthropic",
        model="claude-sonnet-4-5",
        prompt_tokens=(10, 20, 30),
        uncached=(10, 0, 0),
        cache_write=(0, 5, 0),
        cache_read=(0, 15, 0),
        input_cost=(0.25, 0.5, 0.0),
        actions=("", "", "pruned"),
        billed_input_cost=0.75,
        peak_prompt=30,
        lower_bound=0.5,
        calls_lower_bound=0.5,
    )
    return msgspec.structs.replace(base, **changes)


def test_the_embedded_figures_are_the_simulated_ones_for_every_series(
    results: Results, page: str
) -> None:
    data = embedded(page)
    assert list(data) == [TRACE]
    assert list(data[TRACE]) == list(STRATEGIES)
    for name in STRATEGIES:
        assert list(data[TRACE][name]) == list(PROVIDERS)
        for provider in PROVIDERS:
            r = results[TRACE][name][provider]
            figures = data[TRACE][name][provider]
            assert figures["summary"] == r.summary()
            assert figures["prompt_tokens"] == list(r.prompt_tokens)
            assert figures["input_cost"] == list(r.input_cost)
            assert figures["actions"] == list(r.actions)
            assert figures["cache_hit_ratio"] == cache_hit_ratios(r)
    assert data == json.loads(json.dumps(report_data(results)))


def test_the_summary_table_shows_the_summary_figures(results: Results, page: str) -> None:
    values = [json.loads(v) for v in re.findall(r'data-value="([^"]*)"', page)]
    expected = [
        results[TRACE][name][provider].summary()[column]
        for name in STRATEGIES
        for provider in PROVIDERS
        for column in (
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
    ]
    assert values == expected


def test_the_cumulative_cost_ends_at_the_billed_input_cost(results: Results) -> None:
    for by_provider in results[TRACE].values():
        for r in by_provider.values():
            cumulative = cumulative_cost(r)
            assert len(cumulative) == r.calls
            assert cumulative == sorted(cumulative)
            assert cumulative[-1] == pytest.approx(r.billed_input_cost, rel=1e-12)


def test_cache_hit_ratios_are_fractions_and_the_cache_is_hit(results: Results) -> None:
    for by_provider in results[TRACE].values():
        for r in by_provider.values():
            ratios = cache_hit_ratios(r)
            assert len(ratios) == r.calls
            assert all(0.0 <= ratio <= 1.0 for ratio in ratios)
            assert max(ratios) > 0.5


def test_the_cache_hit_ratio_is_cache_reads_over_all_input_tokens() -> None:
    assert cache_hit_ratios(_result()) == [0.0, 0.75, 0.0]
    # A call without input tokens hits nothing rather than dividing by zero.
    assert cache_hit_ratios(_result(uncached=(0, 0, 0))) == [0.0, 0.75, 0.0]


def test_each_trace_and_provider_has_three_charts_with_a_line_per_strategy(page: str) -> None:
    found = charts(page)
    assert len(found) == 4 * len(PROVIDERS)  # and the cost-retention chart
    titles = re.findall(r'<svg class="chart"[^>]*aria-label="([^"]*)"', page)
    assert titles == ["prompt tokens", "cumulative input cost (USD)", "cache-hit ratio"] * 2
    for svg in (s for s in found if 'class="chart frontier"' not in s):
        assert re.findall(r'<polyline class="series" data-series="([^"]*)"', svg) == list(
            STRATEGIES
        )
    for name in STRATEGIES:
        assert f"</span>{name}</li>" in page


def test_calls_where_a_strategy_acted_are_marked_with_what_it_did(
    results: Results, page: str
) -> None:
    acted = [
        (name, call, action)
        for name, by_provider in results[TRACE].items()
        for call, action in enumerate(by_provider["anthropic"].actions, 1)
        if action
    ]
    assert acted, "the compaction strategy should act on this session"
    assert "compact-at-20000" in {name for name, _, _ in acted}
    # baseline acts only when a request went over the window: an overflow compaction.
    assert all(a.startswith("compacted") for name, _, a in acted if name == "baseline")
    anthropic = "".join(charts(page)[:3])
    tooltips = re.findall(r'<circle class="action"[^>]*><title>([^<]*)</title>', anthropic)
    assert tooltips == [f"{name}, call {call}: {action}" for name, call, action in acted] * 3


def test_the_cost_retention_chart_places_each_strategy_and_draws_the_frontier(
    results: Results, page: str
) -> None:
    svgs = re.findall(r'<svg class="chart frontier".*?</svg>', page)
    assert len(svgs) == len(PROVIDERS)
    runs = results[TRACE]
    for svg, provider in zip(svgs, PROVIDERS, strict=True):
        placed = re.findall(r'<circle class="strategy" data-series="([^"]*)"', svg)
        assert placed == [n for n in STRATEGIES if runs[n][provider].retention is not None]
        assert placed, "the session needs facts again"
        assert '<polyline class="frontier-line"' in svg
    assert '<td class="num" data-value' in page and "retention" in page


def test_the_frontier_is_the_strategies_no_other_beats_on_both_counts() -> None:
    a, b, c, d = (
        Point("cheap", "#000", 1.0, 0.80),
        Point("dear and better", "#000", 2.0, 0.95),
        Point("beaten", "#000", 2.5, 0.90),
        Point("tied on cost, worse", "#000", 1.0, 0.70),
    )
    assert frontier([c, b, d, a]) == [a, b]
    assert frontier([]) == []
    assert "beaten" in frontier_chart("t", [a, b, c, d])


def test_text_is_escaped_and_the_json_cannot_end_its_script(results: Results) -> None:
    name = "</script><b>x & 'y'"
    action = '<img src=x onerror="alert(1)">'
    r = results[TRACE]["baseline"]["anthropic"]
    hostile = {
        name: {"baseline": {"anthropic": msgspec.structs.replace(r, actions=(action,) * r.calls)}}
    }
    page = render_report(hostile, title=name, window=WINDOW)
    assert "<b>" not in page and "<img" not in page
    assert page.count("</script>") == 2  # the embedded figures and the provider toggle
    assert "<h2>&lt;/script&gt;&lt;b&gt;x &amp; &#x27;y&#x27;</h2>" in page
    assert "baseline, call 2: &lt;img src=x onerror=&quot;alert(1)&quot;&gt;</title>" in page
    data = embedded(page)
    assert list(data) == [name]
    assert data[name]["baseline"]["anthropic"]["actions"][0] == action
    assert script_json({"a": "</x>&"}) == '{"a": "\\u003c/x\\u003e\\u0026"}'


def test_the_page_refers_to_no_external_resource(page: str) -> None:
    assert "http://" not in page and "https://" not in page
    assert "<link" not in page and " src=" not in page and "@import" not in page
    assert page.startswith("<!DOCTYPE html>")


def test_an_empty_simulation_renders_a_page_without_charts() -> None:
    page = render_report({}, title="nothing", window=WINDOW)
    assert embedded(page) == {} and charts(page) == []


def test_a_chart_of_no_calls_or_one_call_draws_without_error() -> None:
    assert "<polyline" not in line_chart("empty", [], y_format=str)
    one = line_chart("one", [Series("s", "#000", [5.0], ["acted"])], y_format=str)
    assert one.count("<polyline") == 1 and "s, call 1: acted" in one


def test_y_ticks_are_round_and_reach_the_largest_value() -> None:
    assert y_ticks(1.0) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert y_ticks(92_405) == [0.0, 25_000.0, 50_000.0, 75_000.0, 100_000.0]
    assert y_ticks(3) == [0.0, 1.0, 2.0, 3.0]
    assert y_ticks(0.0) == [0.0, 1.0]
    for largest in (0.0123, 0.59, 7, 22_000, 123_456_789):
        ticks = y_ticks(largest)
        assert 2 <= len(ticks) <= 5 and ticks[-1] >= largest and ticks[-2] < largest


def test_x_ticks_label_the_first_and_last_call() -> None:
    assert x_ticks(0) == []
    assert x_ticks(4) == [1, 2, 3, 4]
    assert x_ticks(123) == [1, 25, 50, 74, 99, 123]


def test_write_report_replaces_the_file_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    write_report(path, "<p>first</p>")
    write_report(path, "<p>second ✓</p>")
    assert path.read_text(encoding="utf-8") == "<p>second ✓</p>"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["report.html"]


def test_a_failed_write_keeps_the_old_report_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "report.html"
    write_report(path, "old")

    def fail(source: str, target: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_report(path, "new")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["report.html"]


def test_find_chromium_takes_the_first_name_on_the_path() -> None:
    found = {"google-chrome": "/opt/chrome", "chromium-browser": "/usr/bin/chromium-browser"}
    assert report_check.find_chromium(found.get) == "/usr/bin/chromium-browser"
    assert report_check.find_chromium(lambda name: None) is None


def test_the_screenshot_command_is_headless_and_uses_absolute_paths(tmp_path: Path) -> None:
    html, png = tmp_path / "r.html", tmp_path / "r.png"
    command = report_check.screenshot_command("/usr/bin/chromium", html, png)
    assert command[0] == "/usr/bin/chromium" and "--headless" in command
    assert f"--screenshot={png}" in command and "--window-size=1400,2400" in command
    assert command[-1] == html.as_uri()


def test_report_check_without_chromium_writes_the_html_and_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    out, png = tmp_path / "report.html", tmp_path / "report.png"
    assert report_check.main(["--out", str(out), "--png", str(png)]) == 0
    captured = capsys.readouterr()
    assert "no Chromium on the PATH" in captured.err and not png.exists()
    data = embedded(out.read_text(encoding="utf-8"))
    assert list(data) == [report_check.SYNTHETIC_TRACE]
    assert list(data[report_check.SYNTHETIC_TRACE]) == list(DEFAULT_STRATEGIES)


def test_report_check_screenshots_with_the_chromium_it_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    browser = tmp_path / "bin" / "chromium"
    browser.parent.mkdir()
    browser.write_text(
        '#!/bin/sh\nfor a in "$@"; do case $a in --screenshot=*) '
        'printf png > "${a#--screenshot=}";; esac; done\n'
    )
    browser.chmod(0o755)
    monkeypatch.setenv("PATH", str(browser.parent))
    chat = tmp_path / "chat.json"
    chat.write_text(
        json.dumps(
            [
                {"role": "user", "content": "Say hi."},
                {"role": "assistant", "content": "Hi."},
            ]
        )
    )
    out, png = tmp_path / "report.html", tmp_path / "report.png"
    assert report_check.main([str(chat), "--out", str(out), "--png", str(png)]) == 0
    assert png.read_text() == "png"
    assert f"wrote {png}" in capsys.readouterr().out
