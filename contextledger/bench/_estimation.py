"""The estimation benchmark: how well each token counter predicts what a prompt gains per call.

On every Claude Code transcript of each trace set (``bench._sets``: ``tune``, the folder
``claude-code-jsonl`` of ``shared/traces``, or of ``--traces PATH``, and ``test``,
``claude-code-more``): import it, replay its main thread through the ``History``
projection, and at each API call take the prompt's measure
(``policy._tokens.PromptMeasure``: characters of text, tool inputs and tool outputs, tool
calls, media). For each pair of consecutive calls of one model (as the calibrated counter and
the runtime's calibration from usage reports learn them: a call of another model in between,
such as a ``<synthetic>`` notice Claude Code writes itself without usage, ends no pair), the
provider's figure is the change in prompt tokens (input + cache read + cache write); each
method predicts it from the measure the history gained in between (the previous call's
output, the tool results, new user text):

- ``plain``: ``EstimateCounter`` (characters / 4, media at a fixed charge);
- ``calibrated``: ``CalibratedCounter``, one per (session, model), having observed only the
  calls before the one predicted (no peeking);
- ``single_ratio``: for comparison, one characters-per-token ratio learnt the simple way (an
  exponentially weighted ratio of the characters and tokens gained, same forgetting).

Pairs where the prompt shrank or stayed put (a compaction, a resumed session) are excluded
and counted. Errors are absolute relative errors, |predicted - actual| / actual; the figures
are their median and 90th percentile per trace and over all pairs of a set (under ``sets``);
``tune_calibrated_median_error`` and ``test_calibrated_median_error`` are the calibrated
counter's medians, and ``target_met`` holds for ``test``'s. Sub-agent threads are not
measured (their calls are few and short).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from contextledger.bench._common import Options, table
from contextledger.bench._sets import CLAUDE_CODE_FOLDERS, TRACE_SETS, set_files
from contextledger.events._catalogue import MessageAdded, RecordedEvent
from contextledger.events._parts import Part, PromptMeasure
from contextledger.history._estimate import MEDIA_TOKENS
from contextledger.history._projection import History
from contextledger.importers._claude_code import ImportedSession, import_claude_code
from contextledger.policy._tokens import (
    EMPTY,
    FORGETTING,
    CalibratedCounter,
    EstimateCounter,
    Observation,
    measure_part,
)

#: The traces shipped beside the repository (``/work/shared/traces`` for ``/work/main``).
DEFAULT_TRACES: Final = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
#: The folder of Claude Code transcripts inside the traces folder.
CLAUDE_CODE_DIR: Final = "claude-code-jsonl"
#: The calibrated counter's goal: a median relative error of at most 10% per call.
TARGET_CALIBRATED_MEDIAN: Final = 0.10
#: Characters per token the single-ratio comparison starts from (the plain estimate's).
_START_CHARS_PER_TOKEN: Final = 4.0


class _PairErrors(msgspec.Struct):
    plain: list[float] = []
    calibrated: list[float] = []
    single_ratio: list[float] = []
    excluded: int = 0


class _RunningMeasure:
    """The history's measure, kept current through the projection's per-part estimate hook
    (called once per part version), so each call costs only what changed."""

    def __init__(self) -> None:
        self.total = EMPTY
        self._parts: dict[str, PromptMeasure] = {}

    def __call__(self, part: Part) -> int:
        measure = measure_part(part)
        self.total = self.total - self._parts.get(part.id, EMPTY) + measure
        self._parts[part.id] = measure
        return measure.chars


class _SingleRatio:
    """One characters-per-token ratio: exponentially weighted sums of characters and tokens
    gained (the comparison for the calibrated counter's four-number fit)."""

    def __init__(self) -> None:
        self.chars = 0.0
        self.tokens = 0.0

    def predict(self, gained: PromptMeasure) -> float:
        rate = self.tokens / self.chars if self.chars > 0 else 1 / _START_CHARS_PER_TOKEN
        return gained.chars * rate + gained.media * MEDIA_TOKENS

    def observe(self, gained: PromptMeasure, tokens: int) -> None:
        text_tokens = tokens - gained.media * MEDIA_TOKENS
        if gained.chars > 0 and text_tokens > 0:
            self.chars = FORGETTING * self.chars + gained.chars
            self.tokens = FORGETTING * self.tokens + text_tokens


def measure_session(session: ImportedSession) -> _PairErrors:
    """The relative errors of each method on consecutive API calls of ``session``."""
    running = _RunningMeasure()
    history = History(session.session_id, estimate=running)
    calls = {call.message_id: call for call in session.calls}
    plain = EstimateCounter()
    calibrated: dict[str, CalibratedCounter] = {}
    single = _SingleRatio()
    errors = _PairErrors()
    last: dict[str, Observation] = {}
    for seq, event in enumerate(session.events, 1):
        call = calls.get(event.message_id) if isinstance(event, MessageAdded) else None
        if call is not None:
            observation = Observation(measure=running.total, prompt_tokens=call.usage.prompt)
            counter = calibrated.get(call.model, CalibratedCounter())
            previous = last.get(call.model)
            if previous is not None:
                gained = observation.measure - previous.measure
                tokens = observation.prompt_tokens - previous.prompt_tokens
                if tokens <= 0:
                    errors.excluded += 1
                else:
                    errors.plain.append(_error(plain.count_measure(gained), tokens))
                    errors.calibrated.append(_error(counter.count_measure(gained), tokens))
                    errors.single_ratio.append(_error(single.predict(gained), tokens))
                    single.observe(gained, tokens)
            calibrated[call.model] = counter.observe(observation)
            last[call.model] = observation
        history.apply(RecordedEvent(session.session_id, seq, seq, event))
    return errors


def _error(predicted: float, actual: int) -> float:
    return abs(predicted - actual) / actual


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _p90(values: Sequence[float]) -> float | None:
    """The 90th percentile, interpolated between the closest ranks."""
    if not values:
        return None
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=10, method="inclusive")[8])


def _figures(errors: _PairErrors) -> dict[str, Any]:
    return {
        "pairs": len(errors.plain),
        "excluded": errors.excluded,
        "plain_median_error": _median(errors.plain),
        "plain_p90_error": _p90(errors.plain),
        "calibrated_median_error": _median(errors.calibrated),
        "calibrated_p90_error": _p90(errors.calibrated),
        "single_ratio_median_error": _median(errors.single_ratio),
        "single_ratio_p90_error": _p90(errors.single_ratio),
    }


def trace_dir(traces: Path) -> Path:
    """The folder of Claude Code transcripts under ``traces`` (or ``traces`` itself when it
    holds them directly)."""
    nested = traces / CLAUDE_CODE_DIR
    return nested if nested.is_dir() else traces


def _measure(files: Sequence[Path]) -> dict[str, Any]:
    """The figures of ``files``: over all their pairs, and per trace under ``traces``."""
    overall = _PairErrors()
    per_trace: list[dict[str, Any]] = []
    for path in files:
        imported = import_claude_code(path)
        errors = measure_session(imported)
        overall.plain += errors.plain
        overall.calibrated += errors.calibrated
        overall.single_ratio += errors.single_ratio
        overall.excluded += errors.excluded
        per_trace.append(
            {
                "trace": path.name,
                "api_calls": len(imported.all_calls()),
                "main_calls": len(imported.calls),
                **_figures(errors),
            }
        )
    return {**_figures(overall), "traces": per_trace}


def run(argv: Sequence[str] | Options | None = None) -> dict[str, Any]:
    """Measure every Claude Code transcript of each trace set (``bench._sets``: ``tune`` and
    ``test``); return the figures (a dict saying why, when none are found).

    ``argv``: ``[--json] [--traces PATH]`` (``--json`` is the caller's business: the result is
    always the same dict). Benchmark ``Options`` are accepted and mean the defaults.
    """
    parser = argparse.ArgumentParser(prog="estimation", add_help=False)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    args = parser.parse_args([] if argv is None or isinstance(argv, Options) else list(argv))
    files = {name: set_files(args.traces, name, folders=CLAUDE_CODE_FOLDERS) for name in TRACE_SETS}
    if not any(files.values()):
        return {
            "available": False,
            "reason": f"no Claude Code traces (*.jsonl) in {args.traces}",
            "traces_dir": str(args.traces),
        }
    sets = {name: _measure(found) for name, found in files.items() if found}
    medians = {
        f"{name}_calibrated_median_error": sets[name]["calibrated_median_error"]
        if name in sets
        else None
        for name in TRACE_SETS
    }
    test_median = medians["test_calibrated_median_error"]
    return {
        "available": True,
        "traces_dir": str(args.traces),
        **medians,
        "target_calibrated_median_error": TARGET_CALIBRATED_MEDIAN,
        "target_met": None if test_median is None else test_median <= TARGET_CALIBRATED_MEDIAN,
        "sets": sets,
    }


def render(result: dict[str, Any]) -> str:
    """The figures as a table: per set, one row per trace and one for all of them."""
    if not result.get("available"):
        return f"estimation: {result.get('reason', 'no traces')}\n"

    def pct(value: object) -> str:
        return f"{value:.1%}" if isinstance(value, float) else "-"

    rows = [
        ["set", "trace", "pairs", "excl", "plain med", "p90", "calibrated med", "p90", "ratio med"]
    ]
    for name, figures in result["sets"].items():
        for row in [*figures["traces"], {"trace": "all", **figures}]:
            rows.append(
                [
                    name,
                    str(row["trace"]),
                    str(row["pairs"]),
                    str(row["excluded"]),
                    pct(row["plain_median_error"]),
                    pct(row["plain_p90_error"]),
                    pct(row["calibrated_median_error"]),
                    pct(row["calibrated_p90_error"]),
                    pct(row["single_ratio_median_error"]),
                ]
            )
    return table(rows, right=[False, False, *[True] * 7])
