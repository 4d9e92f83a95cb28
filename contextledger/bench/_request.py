"""``request``: building the Anthropic request at every model step, against encoding the
same final request with ``msgspec.json.encode`` and against a naive rebuild.

The session is the longest Claude Code transcript in ``shared/traces`` (a synthetic session
shaped like them when the traces are absent), then the same session extended with synthetic
turns to 5,000 messages. At every model step (before each assistant
message) the builder is handed the history so far and builds the request: live view update,
prefix decision, cache marks and encoding. The first step's prefix pin is applied, as the
runtime would. The baselines, at sampled steps:

* ``encode``: ``msgspec.json.encode`` of the step's final request as plain JSON objects (the
  bytes decoded once, outside the timing): the cost of merely serialising it.
* ``naive``: what a stateless builder does each step: read the session from the SQLite
  store, project it, build the view and encode, from scratch.

The baselines are measured at 12 steps per session (``--full``: 36), spread over the trace
and the last ones of the extension.

Keys: ``time_vs_encode`` (ours divided by encode, the median over sampled steps of both
sessions, the worse of the two; target <= 2) and ``speedup_vs_naive_5000`` (naive divided by
ours near 5,000 messages; target >= 20).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import trio

from contextledger.bench._common import Options, median, ratio, table, temp_dir
from contextledger.bench._estimation import DEFAULT_TRACES, trace_dir
from contextledger.events._catalogue import Event, MessageAdded, SessionStarted
from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.history._projection import History
from contextledger.importers._claude_code import import_claude_code
from contextledger.providers._anthropic import AnthropicMessages
from contextledger.request._builder import RequestBuilder, RequestInputs
from contextledger.request._system import SystemSegments, family_prompt
from contextledger.simulation._synthetic import synthetic_session
from contextledger.store._sqlite import SQLiteStore

MODEL: Final = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
EXTENDED: Final = 5_000
#: Steps at which the baselines are measured, per session (three times as many with --full).
SAMPLES: Final = 12
TARGET_ENCODE: Final = 2.0
TARGET_NAIVE: Final = 20.0
TOOLS: Final = tuple(
    ToolSchema(
        name=name,
        description=f"The {name} tool.",
        input_schema={"type": "object", "properties": {"arg": {"type": "string"}}},
    )
    for name in ("Bash", "Edit", "Glob", "Grep", "Read", "Task", "TodoWrite", "Write")
)
INPUTS: Final = RequestInputs(
    model=MODEL,
    segments=SystemSegments(prompt=family_prompt("anthropic"), environment="<env>\n</env>"),
    tools=TOOLS,
    max_output_tokens=8192,
)
_json_decode = msgspec.json.Decoder().decode
_json_encode = msgspec.json.Encoder().encode


def longest_trace(traces: Path) -> tuple[str, list[Event]]:
    """The events of the transcript with the most messages (a synthetic session when there
    are no transcripts)."""
    folder = trace_dir(traces)
    best: list[Event] = []
    name = "synthetic"
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        events = import_claude_code(path, session_id="ses_request_bench").events
        if _messages(events) > _messages(best):
            best, name = events, path.name
    if not best:
        best = synthetic_session("ses_request_bench", seed=11, turns=12)
    return name, best


def extend(events: Sequence[Event], messages: int) -> list[Event]:
    """``events`` followed by synthetic turns until the session has ``messages`` messages."""
    last = max(e.time_ms for e in events)
    turns = max(1, (messages - _messages(events)) // 17)
    while True:
        more = synthetic_session(
            events[0].session_id, seed=7, turns=turns, start_ms=last + 86_400_000
        )
        combined = [*events, *(e for e in more if not isinstance(e, SessionStarted))]
        if _messages(combined) >= messages:
            cut = [i for i, e in enumerate(combined) if isinstance(e, MessageAdded)][messages]
            return combined[:cut]
        turns = turns * 3 // 2 + 1


def _messages(events: Sequence[Event]) -> int:
    return sum(isinstance(e, MessageAdded) for e in events)


def _steps(events: Sequence[Event]) -> list[int]:
    """Event indices where a model call is made: before each assistant message."""
    return [
        i for i, e in enumerate(events) if isinstance(e, MessageAdded) and e.role == "assistant"
    ]


def _sampled(steps: Sequence[int], count: int, *, tail: bool = False) -> set[int]:
    if tail:
        return set(steps[-count:])
    stride = max(1, len(steps) // count)
    return set(steps[stride - 1 :: stride][:count])


async def _naive(store: SQLiteStore, session_id: str) -> bytes:
    history = History.rebuild(session_id, await store.read(session_id))
    return RequestBuilder(AnthropicMessages()).build(history, INPUTS).encoded.body


async def _measure(events: list[Event], samples: int, folder: str, tail: bool) -> dict[str, Any]:
    session_id = events[0].session_id
    steps = _steps(events)
    sampled = _sampled(steps, samples, tail=tail)
    history = History(session_id)
    builder = RequestBuilder(AnthropicMessages())
    async with SQLiteStore.open(os.path.join(folder, f"{len(events)}.db")) as store:
        ours: list[float] = []
        at_samples: list[float] = []
        encodes: list[float] = []
        naive: list[float] = []
        done = 0
        seq = 0
        for step in steps:
            batch = events[done:step]
            recorded = await store.append(session_id, seq, batch) if batch else []
            history.apply_all(recorded)
            seq, done = seq + len(batch), step
            start = time.perf_counter()
            built = builder.build(history, INPUTS)
            elapsed = time.perf_counter() - start
            ours.append(elapsed)
            pin = built.prefix.event(session_id)
            if pin is not None:
                (recorded_pin,) = await store.append(session_id, seq, [pin])
                history.apply(recorded_pin)
                seq += 1
            if step not in sampled:
                continue
            at_samples.append(elapsed)
            plain = _json_decode(built.encoded.body)
            start = time.perf_counter()
            _json_encode(plain)
            encodes.append(time.perf_counter() - start)
            start = time.perf_counter()
            body = await _naive(store, session_id)
            naive.append(time.perf_counter() - start)
            assert body == builder.build(history, INPUTS).encoded.body, "naive and ours differ"
    return {
        "messages": len(history.messages),
        "steps": len(steps),
        "request_bytes": len(built.encoded.body),
        "ours_ms_median": median(ours) * 1e3,
        "ours_ms_p99": sorted(ours)[int(0.99 * (len(ours) - 1))] * 1e3,
        "ours_ms_sampled": median(at_samples) * 1e3,
        "encode_ms_sampled": median(encodes) * 1e3,
        "naive_ms_sampled": median(naive) * 1e3,
        "time_vs_encode": median([o / e for o, e in zip(at_samples, encodes, strict=True)]),
        "speedup_vs_naive": ratio(median(naive), median(at_samples)),
    }


def run(options: Options) -> dict[str, Any]:
    """Measure and return the figures (see the module docstring)."""
    name, trace = longest_trace(DEFAULT_TRACES)
    target = EXTENDED
    samples = SAMPLES * 3 if options.full else SAMPLES
    if options.events:
        trace = trace[: max(10, options.events)]
        target = _messages(trace) + max(20, options.events // 10)
    extended = extend(trace, target)

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        with temp_dir("contextledger-request-") as folder:
            first = await _measure(trace, samples, folder, tail=False)
            second = await _measure(extended, samples, folder, tail=True)
            return first, second

    on_trace, on_extended = trio.run(both)
    worst = max(on_trace["time_vs_encode"], on_extended["time_vs_encode"])
    result: dict[str, Any] = {
        "trace": name,
        "sessions": {"trace": on_trace, "extended": on_extended},
        "time_vs_encode": worst,
        "speedup_vs_naive_5000": on_extended["speedup_vs_naive"],
        "extended_messages": on_extended["messages"],
        "targets": {"time_vs_encode": TARGET_ENCODE, "speedup_vs_naive_5000": TARGET_NAIVE},
    }
    result["targets_met"] = {
        "time_vs_encode": worst <= TARGET_ENCODE,
        "speedup_vs_naive_5000": (on_extended["speedup_vs_naive"] or 0) >= TARGET_NAIVE,
    }
    return result


def render(result: dict[str, Any]) -> str:
    """The figures as a table."""
    rows = [
        [
            "session",
            "messages",
            "steps",
            "KB",
            "ours ms",
            "p99 ms",
            "encode ms",
            "naive ms",
            "ours/encode",
            "naive/ours",
        ]
    ]
    for label, r in result["sessions"].items():
        rows.append(
            [
                label,
                str(r["messages"]),
                str(r["steps"]),
                f"{r['request_bytes'] / 1024:.0f}",
                f"{r['ours_ms_median']:.3f}",
                f"{r['ours_ms_p99']:.3f}",
                f"{r['encode_ms_sampled']:.3f}",
                f"{r['naive_ms_sampled']:.1f}",
                f"{r['time_vs_encode']:.2f}x",
                f"{r['speedup_vs_naive']:.0f}x",
            ]
        )
    text = f"request: Anthropic request per model step ({result['trace']}, then extended)\n"
    text += table(rows, right=[False] + [True] * 9)
    text += "(encode and naive at sampled steps; ours/encode is the median of per-step ratios)\n"
    met = result["targets_met"]
    text += (
        f"time_vs_encode: {result['time_vs_encode']:.2f}x (target <= {TARGET_ENCODE:g}x, "
        f"{'met' if met['time_vs_encode'] else 'NOT met'})\n"
        f"speedup_vs_naive_5000 ({result['extended_messages']:,} messages): "
        f"{result['speedup_vs_naive_5000']:.0f}x (target >= {TARGET_NAIVE:g}x, "
        f"{'met' if met['speedup_vs_naive_5000'] else 'NOT met'})\n"
    )
    return text
