"""``retention``: how many of the facts a session needs again survive its compactions.

Every transcript in the traces folder (every format the importers read; every run or
session of a multi-session file) is replayed with a 32,000-token window (``--full``: also
64,000) by the simulation (``simulation.strategy_steps``: its recorded turns in a
``LocalSession``, which decides through ``policy._decisions`` as the runtime does and compacts
with the ``ExtractiveSummarizer``, no model). For each compaction,
the *needed* facts are the exact strings (``compaction._facts.exact_strings``: file paths,
error lines, commands, identifiers) of the compacted head that the rest of the session uses
again: that the user or the assistant writes, or the assistant passes to a tool, later on. A
fact is *retained* when it appears in the summary or in the kept tail. Tool outputs that
merely print a string again (a build log listing the same font files) do not make it needed;
``retention_with_outputs`` counts them too, for comparison.

Each trace is replayed twice (``CADENCES``): under the ``runtime`` strategy (the runtime's policy
with the default ``Config``: compaction when the reported usage reaches the usable window),
and under the ``default`` strategy's economic cadence, which compacts earlier and more often.

Keys, per trace (under ``traces``; ``@economic`` appended for the second replay): ``cadence``,
``compactions``, ``needed``, ``retained``, ``retention`` (retained / needed), ``missed`` (a
sample of missed strings, most used again first), ``failed_at`` (the 1-based call the replay
could not send: its request stayed over the window after every compaction the session could
make; the compactions before it are measured); overall: ``retention_min`` (the lowest over
traces; target >= 0.90), ``retention_overall``, ``compactions``, ``target_met``, ``failed``
(replays that failed), and the same five with the suffix ``_economic``.

The same replays are also scored by the definition that does not use the summarizer's
extractor (``simulation._retention``'s older measure, the one that tells summaries apart: the
facts the agent uses again whose latest mention lies before its newest ``RECENT_CALLS`` calls,
held by the request it was sent): ``facts_needed`` and ``independent_retention`` per trace,
``independent_min`` (over the replays that compacted) and ``independent_overall`` (and
``_economic``).
Without traces: ``{"available": false, "reason": ...}``.

A session that never outgrows the window has no compaction and no retention figure
(``retention`` is null for it); ``retention_min`` is over the sessions that compacted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import trio

from contextledger.bench._common import Options, table
from contextledger.bench._estimation import DEFAULT_TRACES
from contextledger.compaction._compactor import CompactionExhausted
from contextledger.compaction._facts import exact_strings, strings_in
from contextledger.events._catalogue import (
    Event,
    MessageAdded,
    PartAdded,
    PartUpdated,
    ToolStateChanged,
)
from contextledger.events._parts import (
    Part,
    ReasoningPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    ToolState,
)
from contextledger.history._projection import History, Message
from contextledger.importers._detect import import_trace, transcripts_under
from contextledger.importers._errors import TraceImportError
from contextledger.simulation import raw_events, recorded_turns, strategy_steps
from contextledger.simulation._replay import ReplayFailed
from contextledger.simulation._retention import Retention, RetentionCounter
from contextledger.strategies import Strategy, strategy
from contextledger.vocabulary._defaults import CHARS_PER_TOKEN

WINDOWS: Final = (32_000,)
WINDOWS_FULL: Final = (32_000, 64_000)
#: When the replay compacts: at the window (the runtime's own policy under the default
#: ``Config``), and at the economic threshold of the ``default`` strategy (more often, with a
#: 2,000-token tail).
CADENCES: Final = {"window": strategy("runtime"), "economic": strategy("default")}
#: The model the replay is sized and priced for (its output limit: a quarter of the window).
MODEL_ID: Final = "claude-sonnet-4-5"
TARGET: Final = 0.90
MISSED_SHOWN: Final = 12


def message_text(message: Message) -> str:
    """Everything a message says: texts, reasoning, tool inputs, outputs and errors."""
    return "\n".join(_part_text(p) for p in message.parts)


class _Measure(msgspec.Struct):
    compactions: int = 0
    needed: int = 0
    retained: int = 0
    missed: Counter[str] = msgspec.field(default_factory=Counter)
    needed_any: int = 0
    retained_any: int = 0
    head_chars: int = 0
    summary_chars: int = 0
    summary_max_chars: int = 0
    failed_at: int | None = None
    independent: Retention = Retention()


def _facts(messages: Iterable[Message]) -> set[str]:
    return exact_strings("\n".join(message_text(m) for m in messages))


async def _replay(events: list[Event], window: int, chosen: Strategy) -> _Measure:
    """Replay ``events`` under ``chosen`` at ``window`` (the simulation's ``LocalSession``:
    the runtime's decisions) and measure what each of its compactions keeps."""
    conversation = raw_events(events)
    turns = recorded_turns(conversation)
    calls = [call for turn in turns for call in turn.calls]
    independent = RetentionCounter(turns)
    at = {e.message_id: i for i, e in enumerate(events) if isinstance(e, MessageAdded)}
    pending: list[tuple[set[str], str, int]] = []  # head facts, kept text, event index
    sizes = [0, 0, 0]  # head and summary characters, the largest summary
    measured: set[str] = set()
    steps = strategy_steps(conversation, chosen, model_id=MODEL_ID, window=window)
    sent = 0
    failed_at: int | None = None
    try:
        async for call in steps:
            sent = call.call + 1
            independent.observe(call.call, call.built.request.messages)
            history = call.history
            for request_id, compaction in history.state.compactions.items():
                if request_id in measured or compaction.status != "completed":
                    continue
                measured.add(request_id)
                head, kept, head_chars, summary_chars = _kept(history, request_id)
                if head:
                    pending.append((head, kept, at[calls[call.call].message_id]))
                    sizes[0] += head_chars
                    sizes[1] += summary_chars
                    sizes[2] = max(sizes[2], summary_chars)
    except (CompactionExhausted, ReplayFailed) as exc:
        # A request that stays over the window after every compaction the session could
        # make: the replay stops there, and what it compacted before is measured.
        failed_at = exc.call + 1 if isinstance(exc, ReplayFailed) else sent + 1
    measure = _Measure(
        compactions=len(pending),
        head_chars=sizes[0],
        summary_chars=sizes[1],
        summary_max_chars=sizes[2],
        failed_at=failed_at,
        independent=independent.result,
    )
    for head, kept, step in pending:
        needed = head & _later_facts(events[step:], outputs=False)
        missed = {s for s in needed if s not in kept}
        measure.needed += len(needed)
        measure.retained += len(needed) - len(missed)
        measure.missed.update(missed)
        needed_any = head & _later_facts(events[step:], outputs=True)
        measure.needed_any += len(needed_any)
        measure.retained_any += sum(s in kept for s in needed_any)
    return measure


def _later_facts(events: Sequence[Event], *, outputs: bool) -> set[str]:
    """The exact strings the session uses after a point: what the user and the assistant
    write and the tool inputs the assistant sends; with ``outputs``, tool outputs too."""
    return exact_strings("\n".join(_event_text(e, outputs) for e in events))


def _event_text(event: Event, outputs: bool) -> str:
    match event:
        case PartAdded(part=part) | PartUpdated(part=part):
            return _part_text(part, outputs)
        case ToolStateChanged(state=state):
            return _state_text(state, outputs)
    return ""


def _part_text(part: Part, outputs: bool = True) -> str:
    if isinstance(part, TextPart | ReasoningPart):
        return part.text
    if isinstance(part, ToolPart):
        return _state_text(part.state, outputs)
    return ""


def _state_text(state: ToolState, outputs: bool = True) -> str:
    text = "\n".join(strings_in(state.input))
    if not outputs:
        return text
    if isinstance(state, ToolCompleted):
        return f"{text}\n{state.output}"
    if isinstance(state, ToolErrored):
        return f"{text}\n{state.error}"
    return text


def _kept(history: History, request_id: str) -> tuple[set[str], str, int, int]:
    """For the completed compaction ``request_id``: the head's facts, the text that keeps
    them (summary + tail), and the sizes in characters of the head and of the summary."""
    compaction = history.state.compactions[request_id]
    projection = compaction.projection
    assert projection is not None
    head_ids = _head_ids(history, projection.head_first_id, projection.head_last_id)
    head = [history.message(i) for i in head_ids]
    tail = _tail(history, compaction.tail_start_id, request_id)
    summary = "\n".join(message_text(history.message(i)) for i in compaction.summary_message_ids)
    kept = "\n".join([summary, *(message_text(m) for m in tail)])
    head_chars = sum(len(message_text(m)) for m in head)
    return _facts(head), kept, head_chars, len(summary)


def _head_ids(history: History, first: str | None, last: str | None) -> list[str]:
    if first is None or last is None:
        return []
    return [m.id for m in history.messages if first <= m.id <= last and not m.summary]


def _tail(history: History, start: str | None, request: str) -> list[Message]:
    if start is None:
        return []
    return [m for m in history.messages if start <= m.id < request]


def _traces(traces: Path) -> list[Path]:
    """Every transcript under ``traces`` (all formats; an OpenHands V1 conversation folder is
    one), in name order."""
    if not traces.is_dir():
        return []
    return transcripts_under(traces)


def _sessions(paths: Sequence[Path]) -> tuple[list[tuple[str, list[Event]]], list[str]]:
    """``(name, events)`` of every session (main threads) of every transcript the
    importers read, and the names of the transcripts they do not (left out, and reported)."""
    named: list[tuple[str, list[Event]]] = []
    unread: list[str] = []
    for path in paths:
        name = f"{path.parent.name}/{path.name}"
        try:
            sessions = import_trace(path, lenient=True)
        except TraceImportError:
            unread.append(name)
            continue
        for i, session in enumerate(sessions):
            suffix = f"#{i + 1}" if len(sessions) > 1 else ""
            named.append((name + suffix, session.events))
    return named, unread


def run(options: Options) -> dict[str, Any]:
    """Measure and return the figures (see the module docstring)."""
    paths = _traces(DEFAULT_TRACES)
    if not paths:
        return {"available": False, "reason": f"no traces under {DEFAULT_TRACES}"}
    windows = WINDOWS_FULL if options.full else WINDOWS
    per_trace: dict[str, Any] = {}
    sessions, unread = _sessions(paths)
    for name, events in sessions:
        if options.events:
            events = events[: max(50, options.events)]
        for window in windows:
            for cadence, chosen in CADENCES.items():
                measure = trio.run(_replay, events, window, chosen)
                key = name if len(windows) == 1 else f"{name}@{window}"
                per_trace[key if cadence == "window" else f"{key}@{cadence}"] = {
                    "window": window,
                    "cadence": cadence,
                    "compactions": measure.compactions,
                    "needed": measure.needed,
                    "retained": measure.retained,
                    "retention": measure.retained / measure.needed if measure.needed else None,
                    "retention_with_outputs": measure.retained_any / measure.needed_any
                    if measure.needed_any
                    else None,
                    "head_chars": measure.head_chars,
                    "summary_chars": measure.summary_chars,
                    "summary_max_tokens": measure.summary_max_chars // CHARS_PER_TOKEN,
                    "missed": [s for s, _ in measure.missed.most_common(MISSED_SHOWN)],
                    "facts_needed": measure.independent.needed_older,
                    "independent_retention": measure.independent.share_older,
                    "failed_at": measure.failed_at,
                }
    figures: dict[str, Any] = {"available": True, "traces": per_trace, "unread": unread}
    for cadence in CADENCES:
        runs = [r for r in per_trace.values() if r["cadence"] == cadence]
        rates = [r["retention"] for r in runs if r["retention"] is not None]
        needed = sum(r["needed"] for r in runs)
        retained = sum(r["retained"] for r in runs)
        suffix = "" if cadence == "window" else f"_{cadence}"
        figures[f"retention_min{suffix}"] = min(rates) if rates else None
        figures[f"retention_overall{suffix}"] = retained / needed if needed else None
        figures[f"compactions{suffix}"] = sum(r["compactions"] for r in runs)
        figures[f"failed{suffix}"] = sum(r["failed_at"] is not None for r in runs)
        shares = [r["independent_retention"] for r in runs if r["compactions"]]
        figures[f"independent_min{suffix}"] = min(
            (r for r in shares if r is not None), default=None
        )
        facts = sum(r["facts_needed"] for r in runs)
        kept = sum(r["facts_needed"] * (r["independent_retention"] or 0) for r in runs)
        figures[f"independent_overall{suffix}"] = kept / facts if facts else None
    figures["target"] = TARGET
    for suffix in ("", "_economic"):
        minimum = figures[f"retention_min{suffix}"]
        figures[f"target_met{suffix}"] = minimum is not None and minimum >= TARGET
    return figures


def render(result: dict[str, Any]) -> str:
    """The figures as a table."""
    if not result.get("available"):
        return f"retention: not measured: {result.get('reason')}\n"
    rows = [
        [
            "trace",
            "window",
            "cadence",
            "compactions",
            "head KB",
            "summary KB",
            "max summary tok",
            "needed",
            "retained",
            "retention",
            "with outputs",
            "independent",
        ]
    ]
    quiet = [name for name, r in result["traces"].items() if not r["compactions"]]
    for name, r in result["traces"].items():
        if not r["compactions"]:
            continue
        rows.append(
            [
                name,
                str(r["window"]),
                r["cadence"],
                str(r["compactions"]),
                f"{r['head_chars'] / 1024:.0f}",
                f"{r['summary_chars'] / 1024:.1f}",
                str(r["summary_max_tokens"]),
                str(r["needed"]),
                str(r["retained"]),
                _percent(r["retention"]),
                _percent(r["retention_with_outputs"]),
                _percent(r["independent_retention"]),
            ]
        )
    text = "retention: facts of compacted heads used again, kept by summary + tail\n"
    text += table(rows, right=[False, True, False] + [True] * 9)
    if quiet:
        text += f"({len(quiet)} replays never outgrew the window: not shown; --json lists them)\n"
    minimum = result["retention_min"]
    shown = "n/a" if minimum is None else f"{minimum:.1%}"
    met = "met" if result["target_met"] else "NOT met"
    text += f"retention_min: {shown} (target >= {TARGET:.0%}, {met})\n"
    economic = result["retention_min_economic"]
    text += (
        "under the default strategy's economic cadence ("
        f"{result['compactions_economic']} compactions against {result['compactions']}): "
        f"retention_min {'n/a' if economic is None else f'{economic:.1%}'}, overall "
        f"{_percent(result['retention_overall_economic'])} (target >= {TARGET:.0%}, "
        f"{'met' if result['target_met_economic'] else 'NOT met'})\n"
    )
    text += (
        "independent (simulation._retention's older facts: those the agent used again, last "
        "mentioned before its newest five calls, held by its requests): "
        f"min {_percent(result['independent_min'])}, overall "
        f"{_percent(result['independent_overall'])}; economic cadence: min "
        f"{_percent(result['independent_min_economic'])}, overall "
        f"{_percent(result['independent_overall_economic'])}\n"
    )
    for name, r in result["traces"].items():
        if r["missed"]:
            text += f"  missed in {name}: {', '.join(r['missed'][:6])}\n"
    for name, r in result["traces"].items():
        if r["failed_at"] is not None:
            text += (
                f"  failed in {name} at call {r['failed_at']}: over the window after compacting\n"
            )
    if result["unread"]:
        folders = Counter(name.split("/")[0] for name in result["unread"])
        shown = ", ".join(f"{folder} ({n})" for folder, n in sorted(folders.items()))
        text += f"left out, in formats the importers do not read: {shown}\n"
    return text


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"
